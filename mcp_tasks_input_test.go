package carmy_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// TestMCPTasksAfterInput: a tool with TaskAfterInput asks its question in
// an input-required round, without a task, and the round that brings the
// answer starts its task, which finds the answer; a client that does not
// take tasks is still refused, and a tampered state starts nothing.
func TestMCPTasksAfterInput(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	reg := taskRegistry(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"},
	)), carmy.Tool(func(ctx carmy.Context) (string, error) {
		runs.Add(1)
		var c Confirm
		if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
			return "", err
		}
		if c.Sure {
			return "sure", nil
		}
		return "unsure", nil
	}, carmy.Read, carmy.Name("ask_first"), carmy.Tasks(carmy.TaskRequired), carmy.TaskAfterInput(), carmy.Register(false)))
	srv := serve(t, reg)
	alice := taskMCP{t, srv.URL, "alice", true}

	r, code, _ := alice.rpc("tools/call", "ask_first", `"name":"ask_first","arguments":{},`)
	state, _ := r["requestState"].(string)
	q, _ := r["inputRequests"].(map[string]any)
	if code != 0 || r["resultType"] != "input_required" || r["taskId"] != nil || state == "" || len(q) != 1 || q["confirm"] == nil {
		t.Fatalf("first round = %v (error %d); want the question confirm in an input-required round, no task", r, code)
	}
	round2 := func(state string) (map[string]any, int) {
		st, _ := json.Marshal(state)
		r, code, _ := alice.rpc("tools/call", "ask_first", `"name":"ask_first","arguments":{},"requestState":`+string(st)+
			`,"inputResponses":{"confirm":{"action":"accept","content":{"sure":true}}},`)
		return r, code
	}
	before := runs.Load()
	if r, code := round2(state[:len(state)-2] + "xx"); code != int(jsonrpc.CodeInvalidParams) {
		t.Fatalf("a tampered state = %v (error %d); want invalid params", r, code)
	}
	if runs.Load() != before {
		t.Fatal("a tampered state ran the tool")
	}
	r, code = round2(state)
	id, _ := r["taskId"].(string)
	if code != 0 || r["resultType"] != "task" || id == "" || r["requestState"] != nil || r["inputRequests"] != nil {
		t.Fatalf("the round with the answer = %v (error %d); want a task, without the round's members", r, code)
	}
	done := alice.await(id, "completed")
	if !strings.Contains(jsonText(done["result"]), "sure") || strings.Contains(jsonText(done["result"]), "unsure") {
		t.Fatalf("task %v; want the answer of the round taken", done)
	}

	_, err := carmy.New().Tool(carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("never"),
		carmy.Tasks(carmy.TaskForbidden), carmy.TaskAfterInput(), carmy.Register(false))).Build()
	if err == nil || !strings.Contains(err.Error(), "TaskAfterInput") {
		t.Fatalf("Build of a tool with TaskAfterInput that forbids tasks: %v; want the conflict named", err)
	}

	noTasks := taskMCP{t, srv.URL, "alice", false}
	if r, code, _ := noTasks.rpc("tools/call", "ask_first", `"name":"ask_first","arguments":{},`); code != int(mcp.CodeMissingRequiredClientCapabilities) {
		t.Fatalf("a client without tasks = %v (error %d); want missing capability", r, code)
	}
}
