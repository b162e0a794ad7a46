package carmy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// HeldIn is the input of the tools that hold a call open.
type HeldIn struct {
	N int `json:"n"`
}

// waitsSeen is the in-memory store, telling on waiting of every request
// that starts to wait for a task or an approval to change: a long poll
// that the server serves, whatever shuts down after.
type waitsSeen struct {
	store.IdempotencyStore
	store.TaskStore
	store.ApprovalStore
	waiting chan string
}

func newWaitsSeen() *waitsSeen {
	return &waitsSeen{store.NewMemoryStore(0, 0), store.NewMemoryTasks(), store.NewMemoryApprovals(), make(chan string, 16)}
}

// AwaitTask tells of a request's wait: the one with a deadline, which the
// task's own watcher has not.
func (w *waitsSeen) AwaitTask(ctx context.Context, id string, version int64) (store.Task, error) {
	if _, ok := ctx.Deadline(); ok {
		w.waiting <- "task " + id
	}
	return w.TaskStore.AwaitTask(ctx, id, version)
}

// AwaitDecision tells of a request's wait, then looks at the approval
// until it is decided or ctx is done.
func (w *waitsSeen) AwaitDecision(ctx context.Context, id string) (store.Approval, error) {
	w.waiting <- "approval " + id
	for {
		a, err := w.Get(ctx, id)
		if err != nil || a.Status != store.ApprovalPending {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// servedAt is one server of a registry, on a loopback port of its own,
// that a test shuts down with stop, which returns what Serve returned.
type servedAt struct {
	url  string
	stop func() error
}

// serveAt serves reg with [carmy.Registry.Serve] on a new loopback port.
func serveAt(t *testing.T, reg *carmy.Registry) *servedAt {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &servedAt{url: "http://" + ln.Addr().String()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ctx, ln, 10*time.Second) }()
	var once sync.Once
	var serveErr error
	s.stop = func() error {
		once.Do(func() { cancel(); serveErr = <-served })
		return serveErr
	}
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// sendAsync sends a request, whose answer comes on the channel.
func sendAsync(t *testing.T, req *http.Request) <-chan *http.Response {
	answer := make(chan *http.Response, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", req.Method, req.URL, err)
		}
		answer <- res
	}()
	return answer
}

// taskStatus reads the answer of a task or an approval: the HTTP status
// and its status.
func taskStatus(t *testing.T, res *http.Response) (int, string) {
	t.Helper()
	if res == nil {
		return 0, ""
	}
	defer res.Body.Close()
	var task struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(res.Body).Decode(&task); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, task.Status
}

// within waits for an answer, failing the test after a bound far longer
// than any answer takes and far shorter than the waits the answers end.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

// startHeld starts a call of tool at s as a task and returns its id.
func startHeld(t *testing.T, s *servedAt, tool string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/tools/"+tool, strings.NewReader(`{"n":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	res := within(t, "POST /tools/"+tool, sendAsync(t, req))
	defer res.Body.Close()
	var task struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&task); err != nil || res.StatusCode != http.StatusAccepted || task.ID == "" {
		t.Fatalf("POST /tools/%s, respond-async = %d, %v; want 202 and its task", tool, res.StatusCode, err)
	}
	return task.ID
}

// longPoll asks for task id at s, waiting for its change for longer than
// the test lasts, and returns once the server waits.
func longPoll(t *testing.T, s *servedAt, w *waitsSeen, id string) <-chan *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+"/tasks/"+id+"?wait=50s", nil)
	answer := sendAsync(t, req)
	waiting(t, w, "task "+id)
	return answer
}

// waiting returns once a request waits for what.
func waiting(t *testing.T, w *waitsSeen, what string) {
	t.Helper()
	if got := within(t, "a wait for "+what, w.waiting); got != what {
		t.Fatalf("a wait for %s, want for %s", got, what)
	}
}

// awaitApproval asks for an approval at s, which a call of the guarded
// tool without a grant makes, waiting for its decision for longer than the
// test lasts, and returns once the server waits.
func awaitApproval(t *testing.T, s *servedAt, w *waitsSeen) <-chan *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/tools/guarded", strings.NewReader(`{"n":1}`))
	req.Header.Set("Content-Type", "application/json")
	res := within(t, "POST /tools/guarded", sendAsync(t, req))
	defer res.Body.Close()
	var refusal struct {
		Error struct {
			Details struct {
				ApprovalID string `json:"approval_id"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&refusal); err != nil || res.StatusCode != http.StatusForbidden || refusal.Error.Details.ApprovalID == "" {
		t.Fatalf("POST /tools/guarded = %d, %v; want 403 and a pending approval", res.StatusCode, err)
	}
	id := refusal.Error.Details.ApprovalID
	req, _ = http.NewRequest(http.MethodGet, s.url+"/approvals/"+id+"?wait=50s", nil)
	answer := sendAsync(t, req)
	waiting(t, w, "approval "+id)
	return answer
}

// mcpMessage posts one MCP message to s, in session (if not ""), and returns
// the answer, read.
func mcpMessage(t *testing.T, s *servedAt, body, session string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res := within(t, "POST /mcp", sendAsync(t, req))
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// mcpStream opens an MCP session at s and its GET stream, and returns the
// session's id and a channel closed when the stream ends.
func mcpStream(t *testing.T, s *servedAt) (string, <-chan struct{}) {
	t.Helper()
	res := mcpMessage(t, s, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %s, session %q", res.Status, session)
	}
	if res := mcpMessage(t, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); res.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s", res.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	res = within(t, "GET /mcp", sendAsync(t, req))
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("GET /mcp: %s", res.Status)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
	}()
	return session, ended
}

// TestServerShutdownLeavesTheRegistry: two servers of one registry; one
// shuts down, which ends its own MCP stream and long polls at once (its
// Serve returns nil, not cut off after the drain timeout), while the
// other keeps serving: the MCP session opened at the first goes on there,
// its own stream stays open, its long poll sees the task finish, and the
// task, the registry's, runs to its end. Closing the
// registry then ends the other server's stream and long poll too.
func TestServerShutdownLeavesTheRegistry(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hold := carmy.Tool(func(ctx context.Context, in HeldIn) (HeldIn, error) {
		select {
		case <-release:
			return in, nil
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}, carmy.Write, carmy.Name("hold"), carmy.ParallelSafe(), carmy.Register(false))
	stall := carmy.Tool(func(ctx context.Context, in HeldIn) (HeldIn, error) {
		<-ctx.Done()
		return in, ctx.Err()
	}, carmy.Write, carmy.Name("stall"), carmy.ParallelSafe(), carmy.Register(false))
	guarded := carmy.Tool(func(in HeldIn) (HeldIn, error) { return in, nil }, carmy.Destructive,
		carmy.Name("guarded"), carmy.RequireConfirmation(), carmy.Register(false))
	w := newWaitsSeen()
	reg, err := carmy.New().Store(w).Logger(slog.New(slog.DiscardHandler)).Tool(hold, stall, guarded).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	a, b := serveAt(t, reg), serveAt(t, reg)

	id := startHeld(t, a, "hold")
	sessionA, streamA := mcpStream(t, a)
	_, streamB := mcpStream(t, b)
	pollA, pollB := longPoll(t, a, w, id), longPoll(t, b, w, id)
	approvalA := awaitApproval(t, a, w)

	if err := a.stop(); err != nil {
		t.Fatalf("Serve = %v; want nil: the shutdown ends its server's streams and long polls", err)
	}
	if status, task := taskStatus(t, within(t, "the long poll of the server shut down", pollA)); status != http.StatusOK || task != "working" {
		t.Fatalf("the long poll of the server shut down = %d, task %q; want 200 and the task as it stands", status, task)
	}
	within(t, "the MCP stream of the server shut down", streamA)
	if res := mcpMessage(t, b, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, sessionA); res.StatusCode != http.StatusOK {
		t.Fatalf("a ping in the session opened at the server shut down, at the other = %s; want 200: the session is the registry's", res.Status)
	}
	if status, approval := taskStatus(t, within(t, "the approval long poll of the server shut down", approvalA)); status != http.StatusOK || approval != "pending" {
		t.Fatalf("the approval long poll of the server shut down = %d, approval %q; want 200 and the approval as it stands", status, approval)
	}

	close(release)
	if status, task := taskStatus(t, within(t, "the other server's long poll", pollB)); status != http.StatusOK || task != "completed" {
		t.Fatalf("the other server's long poll = %d, task %q; want 200 and the task completed", status, task)
	}
	select {
	case <-streamB:
		t.Fatal("the other server's MCP stream ended with the first server's shutdown")
	default:
	}

	stalled := startHeld(t, b, "stall")
	pollB = longPoll(t, b, w, stalled)
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if status, _ := taskStatus(t, within(t, "the long poll at Close", pollB)); status != http.StatusOK {
		t.Fatalf("the long poll at Close = %d; want 200 and the task as it stands", status)
	}
	within(t, "the MCP stream at Close", streamB)
	if err := b.stop(); err != nil {
		t.Fatalf("Serve = %v after Close; want nil", err)
	}
}

// TestCloseEndsLongPollsOfHandler: on a server of the host's own that
// serves [carmy.Registry.Handler], a long poll waits until the registry
// closes, and no longer.
func TestCloseEndsLongPollsOfHandler(t *testing.T) {
	t.Parallel()
	stall := carmy.Tool(func(ctx context.Context, in HeldIn) (HeldIn, error) {
		<-ctx.Done()
		return in, ctx.Err()
	}, carmy.Write, carmy.Name("stall"), carmy.ParallelSafe(), carmy.Register(false))
	w := newWaitsSeen()
	reg, err := carmy.New().Store(w).Logger(slog.New(slog.DiscardHandler)).Tool(stall).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := serve(t, reg)
	s := &servedAt{url: srv.URL}
	poll := longPoll(t, s, w, startHeld(t, s, "stall"))
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if status, task := taskStatus(t, within(t, "the long poll at Close", poll)); status != http.StatusOK || task != "working" {
		t.Fatalf("the long poll at Close = %d, task %q; want 200 and the task as it stands", status, task)
	}
}
