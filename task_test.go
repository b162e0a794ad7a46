package carmy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

type ExportIn struct {
	Rows int `json:"rows" validate:"min=1"`
}

type ExportOut struct {
	Rows int `json:"rows"`
}

// exporter is a long-running tool: it reports progress, then waits for
// release (or its context) before it answers.
type exporter struct {
	runs    atomic.Int32
	release chan struct{}
}

func newExporter() *exporter { return &exporter{release: make(chan struct{})} }

func (e *exporter) tool(opts ...carmy.Option) *carmy.ToolDef { return e.toolOf(carmy.Read, opts...) }

// toolOf is the exporter with another effect.
func (e *exporter) toolOf(effect carmy.Effect, opts ...carmy.Option) *carmy.ToolDef {
	fn := func(ctx carmy.Context, in ExportIn) (ExportOut, error) {
		e.runs.Add(1)
		ctx.Progress(1, float64(in.Rows), "exporting")
		select {
		case <-e.release:
			return ExportOut(in), nil
		case <-ctx.Done():
			return ExportOut{}, ctx.Err()
		}
	}
	return carmy.Tool(fn, effect, append([]carmy.Option{carmy.Name("export"), carmy.ParallelSafe(), carmy.Register(false)}, opts...)...)
}

// hostsStore is one store that several registries share, as hosts share
// a Redis: idempotency records, approvals and tasks.
type hostsStore struct {
	store.IdempotencyStore
	store.ApprovalStore
	store.TaskStore
}

func newHostsStore(t *testing.T) *hostsStore {
	s := &hostsStore{store.NewMemoryStore(100, 0), store.NewMemoryApprovals(), store.NewMemoryTasks()}
	t.Cleanup(func() { _ = s.IdempotencyStore.(io.Closer).Close() })
	return s
}

func taskRegistry(t *testing.T, b *carmy.Builder, tools ...*carmy.ToolDef) *carmy.Registry {
	t.Helper()
	reg := build(t, b.Tool(tools...).Logger(quietLogger()))
	return reg
}

func wantCode(t *testing.T, err error, code carmy.Code) *carmy.Error {
	t.Helper()
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v; want %s", err, code)
	}
	return e
}

// awaitStatus reads a task until it has status want.
func awaitStatus(t *testing.T, reg *carmy.Registry, id, principal string, want carmy.TaskStatus) *carmy.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task, err := reg.Task(context.Background(), id, carmy.WithPrincipal(principal))
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == want {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s; want %s", id, task.Status, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTaskOutlivesItsRequestAndKeepsProgress(t *testing.T) {
	t.Parallel()
	e := newExporter()
	reg := taskRegistry(t, carmy.New(), e.tool())
	ctx, cancel := context.WithCancel(context.Background())
	task, err := reg.Start(ctx, carmy.Call{Tool: "export", Input: []byte(`{"rows":40}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the request that started it is gone; the task is not
	if task.ID == "" || task.Tool != "export" || task.Status != carmy.TaskWorking {
		t.Fatalf("Start = %+v; want a working task of export", task)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := reg.Task(context.Background(), task.ID, carmy.WithPrincipal("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Progress; p != nil {
			if p.Done != 1 || p.Total != 40 || p.Message != "exporting" {
				t.Fatalf("Progress = %+v; want 1 of 40, exporting", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool's progress never reached its task")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(e.release)
	res, err := task.Wait(context.Background())
	if err != nil || string(res.Output) != `{"rows":40}` || res.ExecutionID == "" {
		t.Fatalf("Wait = %+v, %v; want the output", res, err)
	}
	if task.Status != carmy.TaskCompleted {
		t.Fatalf("Status after Wait = %s; want completed", task.Status)
	}
}

func TestTaskStartedAgainWithItsRequestIDIsThatTask(t *testing.T) {
	t.Parallel()
	e := newExporter()
	reg := taskRegistry(t, carmy.New(), e.tool())
	c := carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "export-1"}
	first, err := reg.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reg.Start(context.Background(), c)
	if err != nil || again.ID != first.ID {
		t.Fatalf("Start again = %v, %v; want task %s", again, err, first.ID)
	}
	close(e.release)
	if _, err := first.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	third, err := reg.Start(context.Background(), c)
	if err != nil || third.ID != first.ID || third.Status != carmy.TaskCompleted {
		t.Fatalf("Start after it ended = %+v, %v; want the completed task %s", third, err, first.ID)
	}
	if n := e.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
	// Another principal's request id is its own.
	other, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "bob", RequestID: "export-1"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("bob's Start = %v, %v; want a task of his own", other, err)
	}
}

func TestTaskOfAnotherPrincipalIsNotFound(t *testing.T) {
	t.Parallel()
	e := newExporter()
	close(e.release)
	reg := taskRegistry(t, carmy.New(), e.tool())
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	_, errOther := reg.Task(context.Background(), task.ID, carmy.WithPrincipal("bob"))
	_, errUnknown := reg.Task(context.Background(), "no-such-task", carmy.WithPrincipal("alice"))
	eo, eu := wantCode(t, errOther, carmy.CodeNotFound), wantCode(t, errUnknown, carmy.CodeNotFound)
	if eo.Message != fmt.Sprintf("no task %q is visible to you", task.ID) || len(eo.Details) != 0 || len(eu.Details) != 0 {
		t.Fatalf("another principal's id = %+v; want the answer an unknown id gets", eo)
	}
	if _, err := reg.Task(context.Background(), task.ID); err == nil {
		t.Fatal("the anonymous principal read alice's task")
	}
}

func TestTaskCancel(t *testing.T) {
	t.Parallel()
	e := newExporter()
	reg := taskRegistry(t, carmy.New(), e.tool())
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	if task.Status != carmy.TaskCancelled {
		t.Fatalf("Status after Cancel = %s; want cancelled", task.Status)
	}
	_, err = task.Wait(context.Background())
	wantCode(t, err, carmy.CodeCancelled)
	wantCode(t, task.Cancel(context.Background()), carmy.CodeConflict)
	got, _ := reg.Task(context.Background(), task.ID, carmy.WithPrincipal("alice"))
	if got.Status != carmy.TaskCancelled {
		t.Fatalf("a second cancel changed the task to %s", got.Status)
	}
	// Nobody else cancels it.
	other, _ := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice"})
	foreign := *other
	if _, err := reg.Task(context.Background(), other.ID, carmy.WithPrincipal("bob")); err == nil {
		t.Fatal("bob read alice's task")
	}
	close(e.release)
	if _, err := foreign.Wait(context.Background()); err != nil {
		t.Fatalf("alice's second task = %v; want it completed", err)
	}
}

func TestTaskRefusedBeforeItStarts(t *testing.T) {
	t.Parallel()
	e := newExporter()
	close(e.release)
	reg := taskRegistry(t, carmy.New(), e.tool())
	c := carmy.Call{Tool: "export", Input: []byte(`{"rows":0}`), Principal: "alice", RequestID: "r1"}
	task, err := reg.Start(context.Background(), c)
	if task != nil {
		t.Fatalf("Start of an invalid input = %+v; want no task", task)
	}
	wantCode(t, err, carmy.CodeInvalidInput)
	_, err = reg.Start(context.Background(), carmy.Call{Tool: "exprot", Principal: "alice"})
	wantCode(t, err, carmy.CodeUnknownTool)
	// The refused call's request id is free for the fixed call.
	c.Input = []byte(`{"rows":3}`)
	task, err = reg.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := task.Wait(context.Background()); err != nil || string(res.Output) != `{"rows":3}` {
		t.Fatalf("Wait = %s, %v", res.Output, err)
	}
}

func TestTaskSupportModes(t *testing.T) {
	t.Parallel()
	e := newExporter()
	close(e.release)
	sync := carmy.Tool(func(in ExportIn) (ExportOut, error) { return ExportOut(in), nil }, carmy.Read,
		carmy.Name("count"), carmy.Tasks(carmy.TaskForbidden), carmy.Register(false))
	reg := taskRegistry(t, carmy.New(), e.tool(carmy.Tasks(carmy.TaskRequired)), sync)
	in := []byte(`{"rows":2}`)
	_, err := reg.Start(context.Background(), carmy.Call{Tool: "count", Input: in})
	wantCode(t, err, carmy.CodeInvalidInput)
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "count", Input: in}); err != nil {
		t.Fatalf("a synchronous call of a tool that forbids tasks = %v", err)
	}
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "export", Input: in})
	wantCode(t, err, carmy.CodeInvalidInput)
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, _ := reg.Lookup("export"); m.Tasks != carmy.TaskRequired {
		t.Fatalf("metadata Tasks = %v; want required", m.Tasks)
	}
	if _, err := carmy.New().Tool(carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("x"), carmy.Tasks(9), carmy.Register(false))).Build(); err == nil {
		t.Fatal("Build took Tasks(9)")
	}
}

func TestTaskRunsUnderItsToolsTimeout(t *testing.T) {
	t.Parallel()
	e := newExporter()
	reg := taskRegistry(t, carmy.New(), e.tool(carmy.Timeout(50*time.Millisecond)))
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.Wait(context.Background())
	wantCode(t, err, carmy.CodeTimeout)
	if task.Status != carmy.TaskFailed {
		t.Fatalf("Status = %s; want failed", task.Status)
	}
}

// TestTaskHostLost: a host that stops (its registry closes with the tool
// still running) stops renewing its tasks' leases; once a lease lapses,
// every host reads the task as failed, host_lost, and its request id
// answers that task: it never runs again.
func TestTaskHostLost(t *testing.T) {
	t.Parallel()
	s := newHostsStore(t)
	e := newExporter()
	defer close(e.release)
	// A lease long enough that a loaded machine (the race detector, every
	// test at once) still renews it in time, and short enough to lapse soon.
	a := taskRegistry(t, carmy.SetTaskLease(carmy.New().Store(s), time.Second), e.tool())
	b := taskRegistry(t, carmy.New().Store(s), e.tool())
	c := carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "r1"}
	task, err := a.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // past the lease: renewed meanwhile
	if got := awaitStatus(t, b, task.ID, "alice", carmy.TaskWorking); got.Status != carmy.TaskWorking {
		t.Fatal("unreachable")
	}
	_ = a.Close()
	lost := awaitStatus(t, b, task.ID, "alice", carmy.TaskFailed)
	_, err = lost.Wait(context.Background())
	if e := wantCode(t, err, carmy.CodeUnavailable); e.Details["reason"] != "host_lost" {
		t.Fatalf("details = %v; want reason host_lost", e.Details)
	}
	again, err := b.Start(context.Background(), c)
	if err != nil || again.ID != task.ID || again.Status != carmy.TaskFailed {
		t.Fatalf("Start with its request id on another host = %+v, %v; want the lost task", again, err)
	}
	if n := e.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
}

type capacityTasks struct{ store.TaskStore }

func (capacityTasks) CreateTask(context.Context, store.Task, time.Duration) (store.Task, bool, error) {
	return store.Task{}, false, fmt.Errorf("%w: 1000 tasks kept", store.ErrTaskCapacity)
}

func TestTaskCapacity(t *testing.T) {
	t.Parallel()
	e := newExporter()
	s := newHostsStore(t)
	s.TaskStore = capacityTasks{s.TaskStore}
	reg := taskRegistry(t, carmy.New().Store(s), e.tool())
	_, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`)})
	if e := wantCode(t, err, carmy.CodeUnavailable); e.Details["reason"] != "capacity" || !e.Retryable {
		t.Fatalf("Start at capacity = %+v; want retryable, reason capacity", e)
	}
	if n := e.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times at capacity", n)
	}
}

// TestTaskApprovedOnAnotherHost: a destructive call started as a task
// waits for a person (input_required, naming its approval); a person
// approves it on another host, and the task runs, once. A denial fails it
// with the refusal a call gets.
func TestTaskApprovedOnAnotherHost(t *testing.T) {
	t.Parallel()
	s := newHostsStore(t)
	var runs atomic.Int32
	del := func() *carmy.ToolDef {
		return carmy.Tool(func(in DeleteNote) (uint64, error) { runs.Add(1); return in.ID, nil }, carmy.Destructive,
			carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	}
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("root"), Principal: "root", Permissions: []string{"approve:*"}})
	a := taskRegistry(t, carmy.New().Store(s), del())
	b := taskRegistry(t, carmy.New().Store(s).Authenticate(tokens), del())
	srv := serve(t, b)
	decide := func(id, decision string) {
		t.Helper()
		if status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/approvals/"+id+"/"+decision, "{}", "Authorization", "Bearer root"); status != 200 {
			t.Fatalf("%s = %d %v", decision, status, body)
		}
	}
	for _, tc := range []struct {
		decision string
		note     string
	}{{"approve", `{"id":7}`}, {"deny", `{"id":8}`}} {
		t.Run(tc.decision, func(t *testing.T) {
			task, err := a.Start(context.Background(), carmy.Call{Tool: "delete_note", Input: []byte(tc.note), Principal: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != carmy.TaskInputRequired || task.ApprovalID == "" {
				t.Fatalf("Start = %+v; want input_required with an approval", task)
			}
			onB := awaitStatus(t, b, task.ID, "agent", carmy.TaskInputRequired)
			before := runs.Load()
			decide(onB.ApprovalID, tc.decision)
			res, err := onB.Wait(context.Background())
			if tc.decision == "approve" {
				if err != nil || string(res.Output) != "7" || runs.Load() != before+1 {
					t.Fatalf("Wait = %s, %v, runs %d; want the approved call run once", res.Output, err, runs.Load()-before)
				}
				return
			}
			e := wantCode(t, err, carmy.CodePermissionDenied)
			if e.Details["approval_id"] != task.ApprovalID || runs.Load() != before || onB.Status != carmy.TaskFailed {
				t.Fatalf("denied task = %s, %+v, runs %d; want failed with the refusal, not run", onB.Status, e, runs.Load()-before)
			}
			_, callErr := a.Execute(context.Background(), carmy.Call{Tool: "delete_note", Input: []byte(tc.note), Principal: "agent"})
			if ce := wantCode(t, callErr, carmy.CodePermissionDenied); ce.Message != e.Message {
				t.Fatalf("the task's refusal %q is not a call's %q", e.Message, ce.Message)
			}
		})
	}
}

func TestTaskTTL(t *testing.T) {
	t.Parallel()
	e := newExporter()
	close(e.release)
	reg := taskRegistry(t, carmy.New().TaskTTL(100*time.Millisecond), e.tool())
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	_, err = reg.Task(context.Background(), task.ID)
	wantCode(t, err, carmy.CodeNotFound)
	if _, err := carmy.New().TaskTTL(0).Build(); err == nil {
		t.Fatal("Build took TaskTTL(0)")
	}
}

func TestTaskRequestIDWithAnotherInputIsAConflict(t *testing.T) {
	t.Parallel()
	e := newExporter()
	close(e.release)
	reg := taskRegistry(t, carmy.New(), e.tool())
	c := carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "r1"}
	first, err := reg.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// The same input, written otherwise, is the same call.
	c.Input = []byte(`{ "rows" : 2.0 }`)
	if same, err := reg.Start(context.Background(), c); err != nil || same.ID != first.ID {
		t.Fatalf("Start with the same input written otherwise = %v, %v; want task %s", same, err, first.ID)
	}
	c.Input = []byte(`{"rows":3}`)
	_, err = reg.Start(context.Background(), c)
	wantCode(t, err, carmy.CodeConflict)
	// As a synchronous call with that request id is.
	_, err = reg.Execute(context.Background(), c)
	wantCode(t, err, carmy.CodeConflict)
}

// The audit records a task's call like any call, and its cancellation.
func TestTaskCancelAudited(t *testing.T) {
	t.Parallel()
	e := newExporter()
	var mu sync.Mutex
	var recs []carmy.AuditRecord
	sink := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, rec)
		return nil
	})
	reg := taskRegistry(t, carmy.New().Audit(sink), e.toolOf(carmy.Write))
	task, err := reg.Start(context.Background(), carmy.Call{Tool: "export", Input: []byte(`{"rows":2}`), Principal: "alice", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, r := range recs {
		if r.Principal != "alice" || r.RequestID != "r1" || r.Tool != "export" || r.Digest == "" {
			t.Errorf("record %+v; want alice's call of export with r1 and its digest", r)
		}
		got = append(got, string(r.Decision)+":"+string(r.Code))
	}
	if strings.Join(got, ",") != "cancel_requested:,executed:cancelled" {
		t.Fatalf("audit = %v; want the cancel request, then the call cancelled", got)
	}
}

// A task of a tool that is not parallel-safe waits for its turn as a
// working task: Start does not wait for the turn.
func TestTaskWaitsItsTurnAsWorking(t *testing.T) {
	t.Parallel()
	e := newExporter()
	fn := func(ctx carmy.Context, in ExportIn) (ExportOut, error) {
		e.runs.Add(1)
		select {
		case <-e.release:
			return ExportOut(in), nil
		case <-ctx.Done():
			return ExportOut{}, ctx.Err()
		}
	}
	reg := taskRegistry(t, carmy.New(), carmy.Tool(fn, carmy.Write, carmy.Name("serial_export"), carmy.Timeout(5*time.Second), carmy.Register(false)))
	start := func() *carmy.Task {
		t.Helper()
		task, err := reg.Start(context.Background(), carmy.Call{Tool: "serial_export", Input: []byte(`{"rows":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	first := start()
	awaitStatus(t, reg, first.ID, "", carmy.TaskWorking)
	for e.runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	second := start()
	if second.Status != carmy.TaskWorking || e.runs.Load() != 1 {
		t.Fatalf("the second task = %s, runs %d; want it working, waiting for its turn", second.Status, e.runs.Load())
	}
	close(e.release)
	for _, task := range []*carmy.Task{first, second} {
		if _, err := task.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.runs.Load(); n != 2 {
		t.Fatalf("runs = %d; want 2", n)
	}
}

// A task's call takes its input's digest once, as it starts: the task
// keeps the digest its call's records name, for a mounted tool too, whose
// digest binds its definition. Starting it again with its request id and
// another input is a conflict; with the same input, the same task.
func TestTaskDigestIsTheCallsDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newHostsStore(t)
	sink := &auditLog{}
	reg := build(t, carmy.New().Store(s).Audit(sink).Logger(quietLogger()).Mount("fs", carmy.Endpoint(newUpstream().serveHTTP(t).URL)))
	call := carmy.Call{Tool: "fs_write", Principal: "alice", RequestID: "r1", Input: []byte(`{ "text" : "hi", "path" : "a.txt" }`)}
	task, err := reg.Start(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetTask(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var digest string
	for _, r := range sink.take() {
		if r.Decision == carmy.AuditExecuted {
			digest = r.Digest
		}
	}
	if digest == "" || rec.Digest != digest {
		t.Fatalf("the task's digest = %q, its call's = %q; want one digest", rec.Digest, digest)
	}
	same, err := reg.Start(ctx, carmy.Call{Tool: "fs_write", Principal: "alice", RequestID: "r1", Input: []byte(`{"path":"a.txt","text":"hi"}`)})
	if err != nil || same.ID != task.ID {
		t.Fatalf("Start again with the request id = %+v, %v; want the same task", same, err)
	}
	_, err = reg.Start(ctx, carmy.Call{Tool: "fs_write", Principal: "alice", RequestID: "r1", Input: []byte(`{"path":"b.txt","text":"hi"}`)})
	wantCode(t, err, carmy.CodeConflict)
}
