package carmy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// serveUntil serves reg on a loopback port as a host does (Listen, Run)
// until the returned stop is called, and stop returns once Serve did, with
// its error.
func serveUntil(t *testing.T, reg *carmy.Registry, drain time.Duration) (stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- carmy.ServeAsHost(ctx, reg, ln, drain) }()
	return func() error {
		cancel()
		return <-served
	}
}

// TestTaskShutdownDrains: a server that shuts down lets a running task
// finish within its drain timeout, and returns once it did: the task is
// completed, not lost.
func TestTaskShutdownDrains(t *testing.T) {
	t.Parallel()
	e := newExporter()
	reg := taskRegistry(t, carmy.New(), e.tool())
	stop := serveUntil(t, reg, 10*time.Second)
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond) // the shutdown has begun
		close(e.release)
	}()
	if err := stop(); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	got, err := reg.Task(context.Background(), task.ID, carmy.WithPrincipal("alice"))
	if err != nil || got.Status != carmy.TaskCompleted {
		t.Fatalf("once Serve returned the task is %+v, %v; want completed: the shutdown waits for it", got, err)
	}
}

// TestTaskShutdownFailsWhatOutlastsTheDrain: a task still running when a
// shutdown's drain timeout passes is failed at once, reason shutdown (not
// left for its lease to lapse as host_lost), and its tool is stopped; one
// still waiting for a person never ran, is retryable, and its request id
// starts a new task.
func TestTaskShutdownFailsWhatOutlastsTheDrain(t *testing.T) {
	t.Parallel()
	e := newExporter()
	defer close(e.release)
	s := newHostsStore(t)
	reg := taskRegistry(t, carmy.New().Store(s), e.tool(),
		carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false)))
	other := taskRegistry(t, carmy.New().Store(s).Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"})), e.tool(),
		carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false)))
	stop := serveUntil(t, reg, 200*time.Millisecond)
	ctx := context.Background()
	running, err := reg.Start(ctx, carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "exp-1"})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := reg.Start(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":4}`), Principal: "alice", RequestID: "del-1"})
	if err != nil || waiting.Status != carmy.TaskInputRequired {
		t.Fatalf("Start(delete_note) = %+v, %v; want input_required", waiting, err)
	}
	begun := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if took := time.Since(begun); took > 5*time.Second {
		t.Fatalf("Serve took %v to shut down; want about its drain timeout", took)
	}

	// Read on another host: the outcome is in the store, at once.
	r, err := other.Task(ctx, running.ID, carmy.WithPrincipal("alice"))
	if err != nil || r.Status != carmy.TaskFailed {
		t.Fatalf("the running task after the shutdown = %+v, %v; want failed", r, err)
	}
	_, err = r.Wait(ctx)
	if e := wantCode(t, err, carmy.CodeUnavailable); e.Details["reason"] != "shutdown" || e.Retryable {
		t.Fatalf("its error = %+v; want reason shutdown, not retryable (whether it took effect is unknown)", e)
	}
	// Over MCP it is the server's failure, a JSON-RPC error, not the tool's.
	srv := serve(t, other)
	got := taskMCP{t: t, url: srv.URL, token: "alice", tasks: true}.get(running.ID)
	if rpcErr := obj(got["error"]); got["status"] != "failed" || got["result"] != nil || !strings.Contains(jsonText(rpcErr["data"]), `"shutdown"`) {
		t.Fatalf("tasks/get of the stopped task = %v; want failed, with an error whose data says shutdown", got)
	}
	if again, err := other.Start(ctx, carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "exp-1"}); err != nil || again.ID != running.ID {
		t.Fatalf("Start with the stopped task's request id = %+v, %v; want that task: it may have taken effect", again, err)
	}

	w, err := other.Task(ctx, waiting.ID, carmy.WithPrincipal("alice"))
	if err != nil || w.Status != carmy.TaskFailed {
		t.Fatalf("the waiting task after the shutdown = %+v, %v; want failed", w, err)
	}
	_, err = w.Wait(ctx)
	if e := wantCode(t, err, carmy.CodeUnavailable); e.Details["reason"] != "shutdown" || !e.Retryable {
		t.Fatalf("its error = %+v; want reason shutdown, retryable: it never ran", e)
	}
	again, err := other.Start(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":4}`), Principal: "alice", RequestID: "del-1"})
	if err != nil || again.ID == waiting.ID || again.Status != carmy.TaskInputRequired {
		t.Fatalf("Start with its request id = %+v, %v; want a new task, waiting for a person", again, err)
	}
	if n := e.runs.Load(); n != 1 {
		t.Fatalf("export ran %d times; want once", n)
	}
}
