package carmy_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// sseSession is a client of an MCP session (2025-11-25) over HTTP that
// holds the session's GET stream open, as clients do to hear what the
// server sends outside a request.
type sseSession struct {
	t    *testing.T
	url  string
	sid  string
	n    int
	msgs chan map[string]any // what the GET stream carries
}

func (c *sseSession) post(body string) map[string]any {
	c.t.Helper()
	h := map[string]string{}
	if c.sid != "" {
		h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = c.sid, "2025-11-25"
	}
	resp, b := mcpExchange(c.t, strings.TrimSuffix(c.url, "/mcp"), body, h)
	if c.sid == "" {
		c.sid = resp.Header.Get("Mcp-Session-Id")
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// call sends a request of the session and returns its answer.
func (c *sseSession) call(method, params string) map[string]any {
	c.n++
	return c.post(`{"jsonrpc":"2.0","id":` + itoa(c.n) + `,"method":"` + method + `","params":` + params + `}`)
}

// openSSESession initializes a session and opens its GET stream.
func openSSESession(t *testing.T, url string) *sseSession {
	t.Helper()
	c := &sseSession{t: t, url: url + "/mcp", n: 1, msgs: make(chan map[string]any, 100)}
	if init := c.post(sessionInit); init["result"] == nil || c.sid == "" {
		t.Fatalf("initialize answered %v", init)
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(c.msgs)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					c.msgs <- m
				}
			}
		}
	}()
	return c
}

// TestMCPSessionTaskStatusOverHTTP: a client of a session over streamable
// HTTP that holds the session's GET stream open hears of its task's
// changes of status there (notifications/tasks/status, with the task), in
// order: input_required while the tool's question waits, working once
// answered, then completed, and nothing of the task after that; the
// question itself comes on the same stream, between the SDK's events.
func TestMCPSessionTaskStatusOverHTTP(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func(ctx carmy.Context) (string, error) {
		var c Confirm
		if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
			return "", err
		}
		<-release
		return "done", nil
	}, carmy.Read, carmy.Name("ask"), carmy.Register(false)))
	srv := serve(t, reg)
	c := openSSESession(t, srv.URL)

	ans := c.call("tools/call", `{"name":"ask","arguments":{},"task":{"ttl":60000}}`)
	task := obj(obj(ans["result"])["task"])
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("the task-augmented tools/call was answered %v", ans)
	}
	want := []string{"input_required", "working", "completed"}
	if task["status"] == "input_required" {
		want = want[1:]
	}
	var statuses []string
	asked := false
	for !asked || len(statuses) == 0 || statuses[len(statuses)-1] != "working" {
		m := nextMessage(t, c.msgs)
		if st := statusOf(t, m, id); st != "" {
			statuses = append(statuses, st)
			continue
		}
		if m["method"] != "elicitation/create" || asked {
			t.Fatalf("unexpected message on the GET stream %v", m)
		}
		asked = true
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"action": "accept", "content": map[string]any{"sure": true}}})
		c.post(string(b))
	}
	close(release)
	statuses = append(statuses, statusOf(t, nextMessage(t, c.msgs), id))
	if jsonText(statuses) != jsonText(want) {
		t.Fatalf("status notifications %v; want %v", statuses, want)
	}
	// A later task's notification is the next message: nothing more came
	// of the first.
	if r := c.call("tasks/get", `{"taskId":"`+id+`"}`); obj(r["result"])["status"] != "completed" {
		t.Fatalf("tasks/get = %v; want completed", r)
	}
	other := obj(obj(c.call("tools/call", `{"name":"ask","arguments":{},"task":{}}`)["result"])["task"])["taskId"]
	m := nextMessage(t, c.msgs)
	for m["method"] == "elicitation/create" {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"action": "decline"}})
		c.post(string(b))
		m = nextMessage(t, c.msgs)
	}
	if p := obj(m["params"]); m["method"] != "notifications/tasks/status" || p["taskId"] != other {
		t.Fatalf("after the first task completed the stream carried %v; want only the second task's notifications", m)
	}
}
