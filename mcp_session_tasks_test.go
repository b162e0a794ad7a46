package carmy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/console"
)

// sessionTasksClient sends one request of an MCP session (2025-11-25) and
// returns its answer: the result, or the error's code.
type sessionTasksClient func(method, params string) (map[string]any, int)

// rawAnswer decodes the answer of a request.
func rawAnswer(t *testing.T, b []byte) (map[string]any, int) {
	t.Helper()
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || (msg.Result == nil) == (msg.Error == nil) {
		t.Fatalf("answer %s: %v", b, err)
	}
	if msg.Error != nil {
		return nil, msg.Error.Code
	}
	return msg.Result, 0
}

const sessionInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{},"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`

// httpTasksSession opens an MCP session over HTTP as the principal of
// token, and returns its initialize result and its client.
func httpTasksSession(t *testing.T, url, token string) (map[string]any, sessionTasksClient) {
	t.Helper()
	sid := ""
	post := func(body string) []byte {
		h := map[string]string{"Authorization": "Bearer " + token}
		if sid != "" {
			h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-11-25"
		}
		res, msg := mcpExchange(t, url, body, h)
		if sid == "" {
			sid = res.Header.Get("Mcp-Session-Id")
		}
		return msg
	}
	init, _ := rawAnswer(t, post(sessionInit))
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	n := 1
	return init, func(method, params string) (map[string]any, int) {
		n++
		return rawAnswer(t, post(`{"jsonrpc":"2.0","id":`+itoa(n)+`,"method":"`+method+`","params":`+params+`}`))
	}
}

// stdioTasksSession serves reg over stdio, and returns the session's
// initialize result, its client, the requests the server sent, and a
// writer of the client's answers to them.
func stdioTasksSession(t *testing.T, reg *carmy.Registry) (map[string]any, sessionTasksClient, chan map[string]any, func(string)) {
	t.Helper()
	inW, out := stdioPipes(t, reg)
	asked := make(chan map[string]any, 10)
	n := 0
	send := func(body string) []byte {
		if _, err := io.WriteString(inW, body+"\n"); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method == "" && string(m.ID) == itoa(n) {
				return line
			}
			var req map[string]any
			if m.Method != "" && len(m.ID) > 0 && json.Unmarshal(line, &req) == nil {
				asked <- req
			}
		}
	}
	n = 1
	init, _ := rawAnswer(t, send(sessionInit))
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	return init, func(method, params string) (map[string]any, int) {
			n++
			return rawAnswer(t, send(`{"jsonrpc":"2.0","id":`+itoa(n)+`,"method":"`+method+`","params":`+params+`}`))
		}, asked, func(line string) {
			if _, err := io.WriteString(inW, line+"\n"); err != nil {
				t.Fatal(err)
			}
		}
}

// taskStatuses are the statuses a task may have.
var taskStatuses = map[string]bool{"working": true, "input_required": true, "completed": true, "failed": true, "cancelled": true}

// startSessionTask calls tool as a task and returns the task's id.
func startSessionTask(t *testing.T, call sessionTasksClient, tool, args string) string {
	t.Helper()
	r, code := call("tools/call", `{"name":"`+tool+`","arguments":`+args+`,"task":{"ttl":60000}}`)
	task := obj(r["task"])
	id, _ := task["taskId"].(string)
	if code != 0 || id == "" || !taskStatuses[fmt.Sprint(task["status"])] || task["createdAt"] == nil || task["pollInterval"] == nil {
		t.Fatalf("task-augmented tools/call %s = %v (error %d); want a CreateTaskResult", tool, r, code)
	}
	return id
}

// TestMCPSessionTasks: a client of a session (2025-11-25), over HTTP and
// over stdio, finds the tasks capability in initialize, starts a task
// with a task-augmented tools/call, reads it (tasks/get), finds it in
// tasks/list, waits for its result (tasks/result), and cancels one;
// unknown ids and a cancel of a final task get -32602, a task of a tool
// that forbids them -32601.
func TestMCPSessionTasks(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			e := newExporter()
			reg := taskRegistry(t, carmy.New().Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"})), e.tool(),
				carmy.Tool(func() (string, error) { return "now", nil }, carmy.Read, carmy.Name("now"), carmy.Tasks(carmy.TaskForbidden), carmy.Register(false)))
			var init map[string]any
			var call sessionTasksClient
			if transport == "http" {
				srv := serve(t, reg)
				init, call = httpTasksSession(t, srv.URL, "alice")
			} else {
				init, call, _, _ = stdioTasksSession(t, reg)
			}
			if obj(obj(obj(obj(init["capabilities"])["tasks"])["requests"])["tools"])["call"] == nil || obj(obj(init["capabilities"])["tasks"])["list"] == nil {
				t.Fatalf("initialize = %v; want capabilities.tasks with list and requests.tools.call", init)
			}

			id := startSessionTask(t, call, "export", `{"rows":3}`)
			if r, code := call("tasks/get", `{"taskId":"`+id+`"}`); code != 0 || r["taskId"] != id || r["status"] != "working" {
				t.Fatalf("tasks/get = %v (error %d); want the working task", r, code)
			}
			r, code := call("tasks/list", `{}`)
			if list, _ := r["tasks"].([]any); code != 0 || len(list) != 1 || obj(list[0])["taskId"] != id {
				t.Fatalf("tasks/list = %v (error %d); want the task", r, code)
			}
			if _, code := call("tasks/list", `{"cursor":"nope"}`); code != -32602 {
				t.Fatalf("tasks/list with a made-up cursor: error %d; want -32602", code)
			}
			e.release <- struct{}{}
			r, code = call("tasks/result", `{"taskId":"`+id+`"}`)
			if code != 0 || r["isError"] == true || !strings.Contains(jsonText(r["structuredContent"]), `"rows":3`) ||
				obj(obj(r["_meta"])["io.modelcontextprotocol/related-task"])["taskId"] != id {
				t.Fatalf("tasks/result = %v (error %d); want the call's result, related to its task", r, code)
			}
			if r, code := call("tasks/get", `{"taskId":"`+id+`"}`); code != 0 || r["status"] != "completed" {
				t.Fatalf("tasks/get of a finished task = %v (error %d)", r, code)
			}
			if _, code := call("tasks/cancel", `{"taskId":"`+id+`"}`); code != -32602 {
				t.Fatalf("tasks/cancel of a completed task: error %d; want -32602", code)
			}

			other := startSessionTask(t, call, "export", `{"rows":4}`)
			if r, code := call("tasks/cancel", `{"taskId":"`+other+`"}`); code != 0 || r["taskId"] != other {
				t.Fatalf("tasks/cancel = %v (error %d); want the task", r, code)
			}
			if _, code := call("tasks/result", `{"taskId":"`+other+`"}`); code == 0 {
				t.Fatal("tasks/result of a cancelled task answered a result")
			}
			if _, code := call("tools/call", `{"name":"now","arguments":{},"task":{}}`); code != -32601 {
				t.Fatalf("a tool that forbids tasks called as a task: error %d; want -32601", code)
			}
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				if _, code := call(method, `{"taskId":"nope"}`); code != -32602 {
					t.Fatalf("%s of an unknown task: error %d; want -32602", method, code)
				}
			}
		})
	}
}

// TestMCPSessionTasksPrincipalAndApproval: in sessions over HTTP, a task
// is its principal's alone (another's get, result and cancel get -32602,
// as for an unknown task, and its list leaves it out), and a destructive
// call's task is input_required while its approval waits, its status
// message naming the approval's link, until a person approves it.
func TestMCPSessionTasksPrincipalAndApproval(t *testing.T) {
	t.Parallel()
	url, _, deleted := mcpTaskServer(t)
	_, alice := httpTasksSession(t, url, "alice")
	_, bob := httpTasksSession(t, url, "bob")

	id := startSessionTask(t, alice, "delete_note", `{"id":9}`)
	var r map[string]any
	waitFor(t, "the task to wait for its person", func() bool {
		r, _ = alice("tasks/get", `{"taskId":"`+id+`"}`)
		return r["status"] == "input_required"
	})
	msg, _ := r["statusMessage"].(string)
	_, link, ok := strings.Cut(msg, url+"/console?approval=")
	if !ok || link == "" || deleted.Load() != 0 {
		t.Fatalf("waiting task = %v; want a status message naming the approval's link, nothing deleted", r)
	}
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if _, code := bob(method, `{"taskId":"`+id+`"}`); code != -32602 {
			t.Fatalf("bob's %s of alice's task: error %d; want -32602", method, code)
		}
	}
	if r, code := bob("tasks/list", `{}`); code != 0 || len(r["tasks"].([]any)) != 0 {
		t.Fatalf("bob's tasks/list = %v (error %d); want none", r, code)
	}
	if status, body := httpDo(t, http.DefaultClient, "POST", url+"/approvals/"+link+"/approve", "{}", "Authorization", "Bearer root"); status != 200 {
		t.Fatalf("approve = %d %v", status, body)
	}
	r, code := alice("tasks/result", `{"taskId":"`+id+`"}`)
	if code != 0 || r["isError"] == true || !strings.Contains(jsonText(r), "9") || deleted.Load() != 1 {
		t.Fatalf("approved task's result = %v (error %d), deleted %d", r, code, deleted.Load())
	}
}

// TestMCPSessionTasksElicit: over stdio, a task's tool asks its question
// through the session's own elicitation request; the task is
// input_required until the client answers, then completes with the
// answer.
func TestMCPSessionTasksElicit(t *testing.T) {
	t.Parallel()
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func(ctx carmy.Context) (string, error) {
		var c Confirm
		if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
			return "", err
		}
		if c.Sure {
			return "sure", nil
		}
		return "unsure", nil
	}, carmy.Read, carmy.Name("ask"), carmy.Register(false)))
	_, call, asked, answer := stdioTasksSession(t, reg)
	id := startSessionTask(t, call, "ask", `{}`)
	var r map[string]any
	waitFor(t, "the task to ask", func() bool {
		r, _ = call("tasks/get", `{"taskId":"`+id+`"}`)
		return r["status"] == "input_required"
	})
	var req map[string]any
	waitFor(t, "the session's elicitation", func() bool { // read as the client reads its answers
		call("tasks/get", `{"taskId":"`+id+`"}`)
		select {
		case req = <-asked:
			return true
		default:
			return false
		}
	})
	if req["method"] != "elicitation/create" {
		t.Fatalf("the task asked %v; want an elicitation", req)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req["id"], "result": map[string]any{"action": "accept", "content": map[string]any{"sure": true}}})
	answer(string(b))
	r, code := call("tasks/result", `{"taskId":"`+id+`"}`)
	if code != 0 || !strings.Contains(jsonText(r["structuredContent"]), "sure") || strings.Contains(jsonText(r["structuredContent"]), "unsure") {
		t.Fatalf("tasks/result = %v (error %d); want the answer's result", r, code)
	}
}

// TestMCPSessionTasksListPages: tasks/list pages a session's caller's
// tasks with nextCursor, each task once, until a page without one.
func TestMCPSessionTasksListPages(t *testing.T) {
	t.Parallel()
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func() (string, error) { return "pong", nil }, carmy.Read, carmy.Name("ping"), carmy.Register(false)))
	_, call, _, _ := stdioTasksSession(t, reg)
	started := map[string]bool{}
	for range 51 {
		started[startSessionTask(t, call, "ping", `{}`)] = true
	}
	listed := map[string]bool{}
	cursor, pages := "", 0
	for {
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		r, code := call("tasks/list", params)
		list, _ := r["tasks"].([]any)
		if code != 0 || len(list) == 0 || len(list) > 50 {
			t.Fatalf("tasks/list %s = %v (error %d); want a page of 1 to 50 tasks", params, r, code)
		}
		for _, task := range list {
			id, _ := obj(task)["taskId"].(string)
			if !started[id] || listed[id] {
				t.Fatalf("tasks/list listed %q: not started, or listed twice", id)
			}
			listed[id] = true
		}
		pages++
		cursor, _ = r["nextCursor"].(string)
		if cursor == "" {
			break
		}
	}
	if pages != 2 || len(listed) != len(started) {
		t.Fatalf("tasks/list gave %d tasks in %d pages; want all %d in 2", len(listed), pages, len(started))
	}
}

// TestStdioTaskWaitsForThePerson: over stdio, a destructive call started
// as a task, the first thing of the process that needs a person, can be
// approved: the loopback console and its owner-only file exist at once;
// the task's status message ends with the console's page for the
// approval, which carries neither the secret nor a one-time code and
// reads nothing without the secret; the approvals API behind the file's
// secret says a task waits for it; approved there, the task resumes and
// completes.
func TestStdioTaskWaitsForThePerson(t *testing.T) {
	t.Parallel()
	_, reg, runs := approvalServer(t, carmy.New())
	_, call, _, _ := stdioTasksSession(t, reg)
	id := startSessionTask(t, call, "delete_note", `{"id":9}`)
	var r map[string]any
	waitFor(t, "the task to wait for its person", func() bool {
		r, _ = call("tasks/get", `{"taskId":"`+id+`"}`)
		return r["status"] == "input_required"
	})
	msg, _ := r["statusMessage"].(string)
	link := regexp.MustCompile(`http://127\.0\.0\.1:\d+/console\?approval=([0-9a-f-]{36})$`).FindStringSubmatch(msg)
	if link == nil || runs.Load() != 0 {
		t.Fatalf("waiting task = %v; want a status message that ends with the loopback console's page for the approval", r)
	}
	if strings.Contains(msg, "token=") || strings.Contains(msg, "code=") || !strings.Contains(msg, "carmy approvals") {
		t.Fatalf("status message %q; want `carmy approvals` named, and no secret nor one-time code", msg)
	}
	u, _ := url.Parse(link[0])
	base, approval := u.Scheme+"://"+u.Host, link[1]
	if status, _ := httpDo(t, http.DefaultClient, "GET", base+"/approvals/"+approval, ""); status != http.StatusForbidden {
		t.Fatalf("the approval read without the console's secret: %d; want 403", status)
	}
	var local *console.Local
	found, _ := console.Find()
	for i := range found {
		if found[i].Base == base {
			local = &found[i]
		}
	}
	if local == nil {
		t.Fatalf("no console file for %s among %v; want one written when the task began to wait", base, found)
	}
	person := headerClient(carmy.ConsoleHeader, local.Secret)
	if status, body := httpDo(t, person, "GET", base+"/approvals/"+approval, ""); status != http.StatusOK || obj(body)["task_waits"] != true {
		t.Fatalf("the approval through the file's secret: %d %v; want it, saying a task waits for it", status, body)
	}
	if status, body := httpDo(t, person, "POST", base+"/approvals/"+approval+"/approve", "{}"); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, body)
	}
	r, code := call("tasks/result", `{"taskId":"`+id+`"}`)
	if code != 0 || r["isError"] == true || runs.Load() != 1 {
		t.Fatalf("the approved task's result = %v (error %d), runs %d; want it run once", r, code, runs.Load())
	}
}
