package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// taskMCP is a client of the tasks extension of the sessionless MCP
// protocol, as one principal (its bearer token).
type taskMCP struct {
	t     *testing.T
	url   string
	token string
	// tasks is false for a client that does not declare the extension.
	tasks bool
}

// rpc sends one request and returns its result, or the error's code and
// data.
func (c taskMCP) rpc(method, name, params string) (map[string]any, int, json.RawMessage) {
	c.t.Helper()
	caps := `{"elicitation":{"form":{}}}`
	if c.tasks {
		caps = `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	res := mcpPostSession(c.t, c.url, "2026-07-28", "", body, map[string]string{"Mcp-Method": method, "Mcp-Name": name, "Authorization": "Bearer " + c.token})
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code int             `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(res, &msg); err != nil || (msg.Result == nil) == (msg.Error == nil) {
		c.t.Fatalf("%s answered %s: %v", method, res, err)
	}
	if msg.Error != nil {
		return nil, msg.Error.Code, msg.Error.Data
	}
	return msg.Result, 0, nil
}

// start calls tool and returns the task it answers with.
func (c taskMCP) start(tool, args string) string {
	c.t.Helper()
	r, code, _ := c.rpc("tools/call", tool, `"name":"`+tool+`","arguments":`+args+`,`)
	id, _ := r["taskId"].(string)
	if code != 0 || r["resultType"] != "task" || id == "" || r["status"] == nil || r["createdAt"] == nil || r["ttlMs"] == nil {
		c.t.Fatalf("tools/call %s = %v (error %d); want a task", tool, r, code)
	}
	return id
}

// get reads a task.
func (c taskMCP) get(id string) map[string]any {
	c.t.Helper()
	r, code, _ := c.rpc("tasks/get", id, `"taskId":"`+id+`",`)
	if code != 0 || r["taskId"] != id || r["resultType"] != "complete" {
		c.t.Fatalf("tasks/get = %v (error %d)", r, code)
	}
	return r
}

// await polls a task until its status is want, or it ended.
func (c taskMCP) await(id, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.get(id)
		switch r["status"] {
		case want:
			return r
		case "completed", "failed", "cancelled":
			c.t.Fatalf("task %s ended %v; want %s", id, r, want)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is %v; want %s", id, r, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Confirm is the question of the ask tool.
type Confirm struct {
	Sure bool `json:"sure"`
}

// mcpTaskServer serves, to alice, bob and an approver: export (works
// until released), fail (a task-required tool that fails), ask (asks a
// question), boom (panics) and delete_note (destructive, approved by a
// person).
func mcpTaskServer(t *testing.T) (url string, e *exporter, deleted *atomic.Int32) {
	t.Helper()
	e = newExporter()
	deleted = new(atomic.Int32)
	reg := taskRegistry(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob"},
		carmy.Token{SHA256: carmy.HashToken("root"), Principal: "root", Permissions: []string{"approve:*"}},
	)), e.tool(),
		carmy.Tool(func() error { return carmy.Errorf(carmy.CodeNotFound, "no such report") }, carmy.Read,
			carmy.Name("fail"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
		carmy.Tool(func(ctx carmy.Context) (string, error) {
			var c Confirm
			if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
				return "", err
			}
			if c.Sure {
				return "sure", nil
			}
			return "unsure", nil
		}, carmy.Read, carmy.Name("ask"), carmy.Register(false)),
		carmy.Tool(func() error { panic("boom") }, carmy.Read, carmy.Name("boom"), carmy.Register(false)),
		carmy.Tool(func(in DeleteNote) (uint64, error) { deleted.Add(1); return in.ID, nil }, carmy.Destructive,
			carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false)),
	)
	srv := serve(t, reg)
	return srv.URL, e, deleted
}

// TestMCPTasksSessionless: a client of the sessionless protocol that
// declares the tasks extension gets a task for a call of a tool that
// supports them, reads it (the result inlined once it ended), answers its
// questions, cancels it; another principal finds none of it.
func TestMCPTasksSessionless(t *testing.T) {
	t.Parallel()
	url, e, deleted := mcpTaskServer(t)
	alice := taskMCP{t, url, "alice", true}
	bob := taskMCP{t, url, "bob", true}

	t.Run("start, get, result", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		id := alice.start("export", `{"rows":3}`)
		if r := alice.get(id); r["status"] != "working" || r["result"] != nil {
			t.Fatalf("a working task: %v", r)
		}
		e.release <- struct{}{}
		r := alice.await(id, "completed")
		res, _ := r["result"].(map[string]any)
		if res == nil || res["isError"] == true || !strings.Contains(jsonText(res["structuredContent"]), `"rows":3`) {
			t.Fatalf("completed task: %v; want its result inlined", r)
		}
	})
	t.Run("a tool's failure is a completed task with an error result", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		r := alice.await(alice.start("fail", `{}`), "completed")
		res, _ := r["result"].(map[string]any)
		if res == nil || res["isError"] != true || !strings.Contains(jsonText(res), "no such report") || r["error"] != nil {
			t.Fatalf("failed tool's task: %v", r)
		}
	})
	t.Run("a panic is a failed task with a protocol error", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		r := alice.await(alice.start("boom", `{}`), "failed")
		if errObj, _ := r["error"].(map[string]any); errObj["code"] != float64(-32603) || r["result"] != nil {
			t.Fatalf("panicked task: %v", r)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		id := alice.start("export", `{"rows":4}`)
		for range 2 { // once running, once ended: the same acknowledgement
			if r, code, _ := alice.rpc("tasks/cancel", id, `"taskId":"`+id+`",`); code != 0 || len(r) != 1 || r["resultType"] != "complete" {
				t.Fatalf("tasks/cancel = %v (error %d); want {resultType: complete}", r, code)
			}
			alice.await(id, "cancelled")
		}
	})
	t.Run("a question waits for tasks/update", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		id := alice.start("ask", `{}`)
		r := alice.await(id, "input_required")
		q, _ := r["inputRequests"].(map[string]any)
		if len(q) != 1 || obj(q["confirm"])["method"] != "elicitation/create" {
			t.Fatalf("input_required task: %v; want the question confirm", r)
		}
		if r, code, _ := alice.rpc("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"confirm":{"action":"accept","content":{"sure":true}}},`); code != 0 || r["resultType"] != "complete" {
			t.Fatalf("tasks/update = %v (error %d)", r, code)
		}
		r = alice.await(id, "completed")
		if !strings.Contains(jsonText(r["result"]), "sure") {
			t.Fatalf("answered task: %v", r)
		}
	})
	t.Run("a destructive call waits for its person", func(t *testing.T) {
		alice := taskMCP{t, url, "alice", true}
		id := alice.start("delete_note", `{"id":9}`)
		r := alice.await(id, "input_required")
		q, _ := r["inputRequests"].(map[string]any)
		approval := obj(obj(q["approval"])["params"])
		aid, _ := approval["elicitationId"].(string)
		if aid == "" || !strings.Contains(jsonText(approval["url"]), "/console?approval="+aid) || deleted.Load() != 0 {
			t.Fatalf("waiting task: %v; want the approval's link as a URL question, nothing deleted", r)
		}
		if status, body := httpDo(t, http.DefaultClient, "POST", url+"/approvals/"+aid+"/approve", "{}", "Authorization", "Bearer root"); status != 200 {
			t.Fatalf("approve = %d %v", status, body)
		}
		r = alice.await(id, "completed")
		if !strings.Contains(jsonText(r["result"]), "9") || deleted.Load() != 1 {
			t.Fatalf("approved task: %v, deleted %d", r, deleted.Load())
		}
	})
	t.Run("another principal's task is not found", func(t *testing.T) {
		id := alice.start("export", `{"rows":5}`)
		defer func() { e.release <- struct{}{} }()
		for _, m := range []struct{ method, params string }{
			{"tasks/get", `"taskId":"` + id + `",`},
			{"tasks/cancel", `"taskId":"` + id + `",`},
			{"tasks/update", `"taskId":"` + id + `","inputResponses":{},`},
		} {
			if _, code, _ := bob.rpc(m.method, id, m.params); code != -32602 {
				t.Fatalf("bob's %s of alice's task: error %d; want -32602, as for an unknown task", m.method, code)
			}
			if _, code, _ := alice.rpc(m.method, "nope", strings.ReplaceAll(m.params, id, "nope")); code != -32602 {
				t.Fatalf("%s of an unknown task: error %d; want -32602", m.method, code)
			}
		}
		if r := alice.get(id); r["status"] != "working" {
			t.Fatalf("alice's task after bob's cancel: %v", r)
		}
	})
}

// TestMCPTasksRequired: a tool that runs only as a task, called without
// one, is refused with the protocol's missing capability error naming the
// extension in the sessionless protocol, with method not found in a
// session (whose tasks are asked for with params.task); a client that did not declare the
// extension gets that error for the tasks methods too, and a tool that
// may run as a task runs synchronously for it.
func TestMCPTasksRequired(t *testing.T) {
	t.Parallel()
	url, e, _ := mcpTaskServer(t)
	plain := taskMCP{t, url, "alice", false}
	_, code, data := plain.rpc("tools/call", "fail", `"name":"fail","arguments":{},`)
	if code != -32021 || !strings.Contains(string(data), `"io.modelcontextprotocol/tasks"`) {
		t.Fatalf("fail without tasks: error %d %s; want -32021 naming the extension", code, data)
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if _, code, _ := plain.rpc(method, "x", `"taskId":"x",`); code != -32021 {
			t.Fatalf("%s without the extension: error %d; want -32021", method, code)
		}
	}
	for _, method := range []string{"tasks/result", "tasks/list"} {
		if _, code, _ := (taskMCP{t, url, "alice", true}).rpc(method, "x", `"taskId":"x",`); code != -32601 {
			t.Fatalf("%s: error %d; want -32601 (the extension has no such method)", method, code)
		}
	}
	go func() { e.release <- struct{}{} }()
	if r, code, _ := plain.rpc("tools/call", "export", `"name":"export","arguments":{"rows":1},`); code != 0 || r["taskId"] != nil || r["resultType"] != "complete" {
		t.Fatalf("export without tasks = %v (error %d); want its result at once", r, code)
	}

	// In a session (2025-11-25), through the official SDK's client.
	s, err := mcpDial(t, bearerClient("alice"), url, "2025-11-25", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	if we := (*jsonrpc.Error)(nil); !errors.As(err, &we) || we.Code != -32601 {
		t.Fatalf("fail in a session: %v; want -32601, as a session's tasks answer it", err)
	}
}

// TestMCPTasksRequiredStdio: over stdio, a tool that runs only as a task
// is refused: with the missing capability error in the sessionless
// protocol, with method not found in a session, as its tasks say.
func TestMCPTasksRequiredStdio(t *testing.T) {
	t.Parallel()
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func() error { return nil }, carmy.Read,
		carmy.Name("long"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
		carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("secret_long"), carmy.Requires("secrets"),
			carmy.Tasks(carmy.TaskRequired), carmy.Register(false)))
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			s := singleClient(t, reg, "stdio", version, nil)
			_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "long", Arguments: map[string]any{}})
			want := int64(-32021)
			if version < "2026-07-28" { // a session's tasks answer it with method not found
				want = -32601
			}
			if we := (*jsonrpc.Error)(nil); !errors.As(err, &we) || we.Code != want {
				t.Fatalf("long over stdio: %v; want %d", err, want)
			}
			// The permission check comes first: a caller who may not call
			// the tool learns nothing of how it runs.
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "secret_long", Arguments: map[string]any{}})
			if err != nil || !r.IsError || !strings.Contains(jsonText(r.Content), "permission_denied") {
				t.Fatalf("secret_long without its permission: %+v, %v; want permission_denied", r, err)
			}
		})
	}
}

// jsonText is v as JSON.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMCPTasksSessionlessOverStdio: over stdio, a sessionless request
// that declares the tasks extension in its _meta client capabilities
// starts a task for a tool that runs only as a task, as over HTTP, and
// tasks/get reads it; one that does not declare it is refused, naming the
// extension.
func TestMCPTasksSessionlessOverStdio(t *testing.T) {
	t.Parallel()
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Read,
		carmy.Name("report"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)))
	inW, out := stdioPipes(t, reg)
	n := 0
	send := func(method, params string) (map[string]any, int) {
		t.Helper()
		n++
		if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":`+itoa(n)+`,"method":"`+method+`","params":`+params+"}\n"); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return rawAnswer(t, line)
	}
	meta := func(tasks bool) string {
		caps := `{}`
		if tasks {
			caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
		}
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	}
	if _, code := send("server/discover", `{`+meta(true)+`}`); code != 0 {
		t.Fatalf("server/discover: error %d", code)
	}
	if r, code := send("tools/call", `{"name":"report","arguments":{"id":4},`+meta(false)+`}`); code != -32021 {
		t.Fatalf("a call that does not declare tasks = %v (error %d); want -32021", r, code)
	}
	r, code := send("tools/call", `{"name":"report","arguments":{"id":4},`+meta(true)+`}`)
	id, _ := r["taskId"].(string)
	if code != 0 || r["resultType"] != "task" || id == "" {
		t.Fatalf("a call that declares tasks = %v (error %d); want a task", r, code)
	}
	waitFor(t, "the task to complete", func() bool {
		r, code = send("tasks/get", `{"taskId":"`+id+`",`+meta(true)+`}`)
		return code == 0 && r["status"] == "completed"
	})
	if !strings.Contains(jsonText(r), "4") {
		t.Fatalf("tasks/get of the completed task = %v; want its result inlined", r)
	}
	if _, code := send("tasks/get", `{"taskId":"`+id+`",`+meta(false)+`}`); code != -32021 {
		t.Fatalf("tasks/get without declaring tasks: error %d; want -32021", code)
	}
}

// TestTaskServerProcess is the stdio server that
// TestInspectorCLITaskOverStdio runs in a process of its own: report,
// which runs only as a task.
func TestTaskServerProcess(t *testing.T) {
	if os.Getenv("CARMY_TEST_TASK_SERVER") != "1" {
		t.Skip("run by TestInspectorCLITaskOverStdio in a process of its own")
	}
	report := carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Read, carmy.Name("report"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false))
	if err := carmy.New().Tool(report).Logger(quietLogger()).RunStdio(context.Background()); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestInspectorCLITaskOverStdio: the MCP Inspector's CLI, in the protocol
// era it calls modern (2026-07-28), declares the tasks extension in each
// request's _meta; over stdio, its call of a tool that runs only as a task
// starts the task, as over HTTP, instead of being refused for not
// declaring the extension. The Inspector needs Node 22.19 or later (the
// one .ci/run installs in .ci/node22).
func TestInspectorCLITaskOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	node := filepath.Join(".ci", "node22", "node_modules", "node", "bin", "node")
	launcher := filepath.Join("interop", "inspector", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(node); err != nil {
		t.Skip("skipping: .ci/node22 does not hold Node 22, which the Inspector needs (.ci/run installs it)")
	}
	if _, err := os.Stat(launcher); err != nil {
		t.Skip("skipping: interop/inspector/node_modules does not hold the Inspector (run: npm ci --prefix interop/inspector)")
	}
	cmd := exec.Command(node, launcher, "--cli", "-e", "CARMY_TEST_TASK_SERVER=1", os.Args[0], "-test.run=^TestTaskServerProcess$", "-test.count=1",
		"--protocol-era", "modern", "--method", "tools/call", "--tool-name", "report", "--tool-args-json", `{"id":4}`, "--format", "json", "--quiet")
	out, err := cmd.Output()
	var res struct {
		Result struct {
			StructuredContent struct {
				Result int `json:"result"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err != nil || json.Unmarshal(out, &res) != nil || res.Result.StructuredContent.Result != 4 {
		t.Fatalf("inspector --cli: %v\n%s\nwant the task's result, 4", err, out)
	}
}

// TestMCPTasksRequiredMessage: a tool that runs only as a task, called
// without one in a 2025-11-25 session, answers carmy's message on every
// path: over HTTP and stdio, with a progress token (the SDK's path) and
// without (the fast path).
func TestMCPTasksRequiredMessage(t *testing.T) {
	t.Parallel()
	url, _, _ := mcpTaskServer(t)
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func() error { return nil }, carmy.Read,
		carmy.Name("fail"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)))
	sessions := map[string]func(t *testing.T) *mcp.ClientSession{
		"HTTP": func(t *testing.T) *mcp.ClientSession {
			s, err := mcpDial(t, bearerClient("alice"), url, "2025-11-25", nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"stdio": func(t *testing.T) *mcp.ClientSession { return singleClient(t, reg, "stdio", "2025-11-25", nil) },
	}
	for door, open := range sessions {
		for _, progress := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, progress token %v", door, progress), func(t *testing.T) {
				p := &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}}
				if progress {
					p.Meta = mcp.Meta{"progressToken": "p1"}
				}
				_, err := open(t).CallTool(context.Background(), p)
				if we := (*jsonrpc.Error)(nil); !errors.As(err, &we) || we.Code != -32601 || !strings.Contains(we.Message, "fail runs only as a task: call it with params.task") {
					t.Fatalf("fail in a session: %v; want -32601 with carmy's message", err)
				}
			})
		}
	}
}
