package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"

	"github.com/carmy-dev/carmy"
)

type rowsInput struct {
	Rows int `json:"rows"`
}

// streamOpened signals once a GET's response starts: the client holds a
// session's standalone stream open.
type streamOpened struct {
	http.ResponseWriter
	once *sync.Once
	ch   chan struct{}
}

func (w streamOpened) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK {
		w.once.Do(func() { close(w.ch) })
	}
}

func (w streamOpened) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestMCPGoClientTasks: mcp-go's client in a session (2025-11-25) over
// streamable HTTP, listening on the session's GET stream, and carmy's
// experimental tasks. Its CallTool with a task param starts the task, but
// cannot read the answer (a CreateTaskResult has no content; it says
// "content is missing"); its ListTasks finds the task, GetTask reads it,
// its notification handler hears notifications/tasks/status as the task
// completes, and TaskResult returns the call's result.
func TestMCPGoClientTasks(t *testing.T) {
	release := make(chan struct{})
	export := carmy.Tool(func(in rowsInput) (int, error) { <-release; return in.Rows, nil }, carmy.Read, carmy.Name("export"), carmy.Register(false))
	reg, err := carmy.New().Tool(export).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	opened := make(chan struct{})
	var once sync.Once
	h := reg.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.Header.Get("Mcp-Session-Id") != "" {
			w = streamOpened{w, &once, opened}
		}
		h.ServeHTTP(w, req)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	//lint:ignore SA1019 the session generation (2025-11-25) keeps the standalone GET stream, on which its task status notifications come
	tr, err := mcpgotransport.NewStreamableHTTP(srv.URL+"/mcp", mcpgotransport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := mcpgoclient.NewClient(tr, mcpgoclient.WithProtocolVersion("2025-11-25"))
	defer c.Close()
	statuses := make(chan mcpgomcp.JSONRPCNotification, 10)
	c.OnNotification(func(n mcpgomcp.JSONRPCNotification) {
		if n.Method == "notifications/tasks/status" {
			statuses <- n
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcpgomcp.InitializeRequest{Params: mcpgomcp.InitializeParams{
		ClientInfo: mcpgomcp.Implementation{Name: "interop", Version: "1"},
	}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	ttl := int64(60000)
	if _, err := c.CallTool(ctx, mcpgomcp.CallToolRequest{Params: mcpgomcp.CallToolParams{Name: "export", Arguments: map[string]any{"rows": 3}, Task: &mcpgomcp.TaskParams{TTL: &ttl}}}); err == nil {
		t.Error("mcp-go's CallTool read a CreateTaskResult; docs/interop.md says it cannot: update it")
	}
	list, err := c.ListTasks(ctx, mcpgomcp.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 1 {
		t.Fatalf("ListTasks = %+v, %v; want the task CallTool started", list, err)
	}
	id := list.Tasks[0].TaskId
	if got, err := c.GetTask(ctx, mcpgomcp.GetTaskRequest{Params: mcpgomcp.GetTaskParams{TaskId: id}}); err != nil || got.Status != mcpgomcp.TaskStatusWorking {
		t.Fatalf("GetTask = %+v, %v; want it working", got, err)
	}
	select {
	case <-opened:
	case <-ctx.Done():
		t.Fatal("the client opened no GET stream")
	}
	close(release)
	select {
	case n := <-statuses:
		if p := n.Params.AdditionalFields; p["taskId"] != id || p["status"] != "completed" {
			t.Fatalf("notification %+v; want task %s completed", p, id)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/tasks/status came on the GET stream")
	}
	r, err := c.TaskResult(ctx, mcpgomcp.TaskResultRequest{Params: mcpgomcp.TaskResultParams{TaskId: id}})
	if err != nil || r.IsError || r.StructuredContent == nil {
		t.Fatalf("TaskResult = %+v, %v; want the call's result", r, err)
	}
}
