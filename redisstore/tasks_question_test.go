package redisstore

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

type Confirm struct {
	Sure bool `json:"sure"`
}

// TestTaskQuestionAcrossHosts: two registries on one Redis. A task's tool
// asks its question on host a; host b shows the question (MCP tasks/get)
// and takes the answer (tasks/update), which reaches the tool on host a
// through the store's notifications (the hosts poll once an hour): the
// task completes with it.
func TestTaskQuestionAcrossHosts(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	host := func() string {
		ask := carmy.Tool(func(ctx carmy.Context) (string, error) {
			var c Confirm
			if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
				return "", err
			}
			if c.Sure {
				return "sure", nil
			}
			return "unsure", nil
		}, carmy.Read, carmy.Name("ask"), carmy.Register(false))
		reg, err := carmy.New().Store(newStore(t, c, prefix, WithPollInterval(time.Hour))).Tool(ask).Logger(quiet).Build()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close() })
		srv := httptest.NewServer(reg.Handler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	a, b := host(), host()
	rpc := func(url, method, name, params string) map[string]any {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var msg struct {
			Result map[string]any `json:"result"`
		}
		if json.Unmarshal(raw, &msg) != nil || msg.Result == nil {
			t.Fatalf("%s answered %s", method, raw)
		}
		return msg.Result
	}
	get := func(url, id, want string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := rpc(url, "tasks/get", id, `"taskId":"`+id+`",`)
			if r["status"] == want {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %v; want %s", id, r, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	started := rpc(a, "tools/call", "ask", `"name":"ask","arguments":{},`)
	id, _ := started["taskId"].(string)
	if id == "" {
		t.Fatalf("tools/call answered %v; want a task", started)
	}
	r := get(b, id, "input_required")
	if q, _ := r["inputRequests"].(map[string]any); q["confirm"] == nil || !strings.Contains(mustJSON(q), "Sure?") {
		t.Fatalf("host b shows %v; want the question the tool asked on host a", r["inputRequests"])
	}
	rpc(b, "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"confirm":{"action":"accept","content":{"sure":true}}},`)
	done := get(b, id, "completed")
	if got := mustJSON(done["result"]); !strings.Contains(got, `"sure"`) || strings.Contains(got, "unsure") {
		t.Fatalf("the task = %s; want the tool's result with the answer given on host b", got)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
