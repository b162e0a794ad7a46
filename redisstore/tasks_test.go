package redisstore

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestTaskStoreConformance(t *testing.T) {
	c := newClient(t)
	storetest.TestTaskStore(t, func(t *testing.T) store.TaskStore {
		return newStore(t, c, testPrefix(t, c))
	})
}

type ExportIn struct {
	Rows int `json:"rows"`
}

type DeleteNote struct {
	ID int `json:"id"`
}

// TestTasksAcrossHosts: two registries on one Redis. A task started on one
// is read, cancelled and approved on the other; the cancel reaches the
// host running the tool, and wakes the one waiting for the task, through
// the store's notifications: the hosts poll once an hour, and a task's
// lease (which a waiter also looks at) lasts longer than the test waits.
func TestTasksAcrossHosts(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	var deleted atomic.Int32
	tools := func() []*carmy.ToolDef {
		export := carmy.Tool(func(ctx carmy.Context, in ExportIn) (int, error) {
			ctx.Progress(1, float64(in.Rows), "exporting")
			<-ctx.Done()
			return 0, ctx.Err()
		}, carmy.Read, carmy.Name("export"), carmy.ParallelSafe(), carmy.Register(false))
		del := carmy.Tool(func(in DeleteNote) (int, error) { deleted.Add(1); return in.ID, nil }, carmy.Destructive,
			carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
		return []*carmy.ToolDef{export, del}
	}
	host := func(b *carmy.Builder) *carmy.Registry {
		reg := build(t, b.Store(newStore(t, c, prefix, WithPollInterval(time.Hour))).Tool(tools()...).Logger(quiet))
		return reg
	}
	a := host(carmy.New())
	b := host(carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent"},
		carmy.Token{SHA256: carmy.HashToken("root"), Principal: "root", Permissions: []string{"approve:*"}},
	)))
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	post := func(path, tok string) int {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	ctx := context.Background()

	task, err := a.Start(ctx, carmy.Call{Tool: "export", Input: []byte(`{"rows":9}`), Principal: "agent", RequestID: "exp-1"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		onB, err := b.Task(ctx, task.ID, carmy.WithPrincipal("agent"))
		if err != nil {
			t.Fatal(err)
		}
		if onB.Progress != nil && onB.Progress.Total == 9 && onB.Status == carmy.TaskWorking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host b reads %+v; want the working task with its progress", onB)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Task(ctx, task.ID, carmy.WithPrincipal("other")); carmy.CodeOf(err) != carmy.CodeNotFound {
		t.Fatalf("another principal's read on host b = %v; want not_found", err)
	}
	again, err := b.Start(ctx, carmy.Call{Tool: "export", Input: []byte(`{"rows":9}`), Principal: "agent", RequestID: "exp-1"})
	if err != nil || again.ID != task.ID {
		t.Fatalf("Start with its request id on host b = %v, %v; want task %s", again, err, task.ID)
	}
	if status := post("/tasks/"+task.ID+"/cancel", "agent"); status != 200 {
		t.Fatalf("cancel on host b = %d", status)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := task.Wait(wctx); carmy.CodeOf(err) != carmy.CodeCancelled {
		t.Fatalf("the task after a cancel on host b = %v; want cancelled", err)
	}

	// A person approves on host b the call a task waits for on host a.
	del, err := a.Start(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":4}`), Principal: "agent"})
	if err != nil || del.Status != carmy.TaskInputRequired {
		t.Fatalf("Start = %+v, %v; want input_required", del, err)
	}
	if status := post("/approvals/"+del.ApprovalID+"/approve", "root"); status != 200 {
		t.Fatalf("approve on host b = %d", status)
	}
	onB, err := b.Task(ctx, del.ID, carmy.WithPrincipal("agent"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := onB.Wait(wctx)
	if err != nil || string(res.Output) != "4" || deleted.Load() != 1 {
		t.Fatalf("the approved task = %s, %v, runs %d; want it run once", res.Output, err, deleted.Load())
	}
}

// Every host sees the tasks of the others, and wakes at their changes.
func TestTaskStoreAcrossHosts(t *testing.T) {
	c := newClient(t)
	storetest.TestTaskStore(t, func(t *testing.T) store.TaskStore {
		return &tasksRoundRobin{hosts: hosts(t, c, testPrefix(t, c), 3)}
	})
}

// tasksRoundRobin sends each task call to the next host.
type tasksRoundRobin struct {
	hosts []*Store
	next  atomic.Uint32
}

func (r *tasksRoundRobin) host() *Store { return r.hosts[int(r.next.Add(1))%len(r.hosts)] }

func (r *tasksRoundRobin) CreateTask(ctx context.Context, t store.Task, lease time.Duration) (store.Task, bool, error) {
	return r.host().CreateTask(ctx, t, lease)
}
func (r *tasksRoundRobin) GetTask(ctx context.Context, id string) (store.Task, error) {
	return r.host().GetTask(ctx, id)
}
func (r *tasksRoundRobin) ListTasks(ctx context.Context, principal, before string, limit int) ([]store.Task, error) {
	return r.host().ListTasks(ctx, principal, before, limit)
}
func (r *tasksRoundRobin) UpdateTask(ctx context.Context, id string, u store.TaskUpdate) (store.Task, error) {
	return r.host().UpdateTask(ctx, id, u)
}
func (r *tasksRoundRobin) CancelTask(ctx context.Context, id string) (store.Task, error) {
	return r.host().CancelTask(ctx, id)
}
func (r *tasksRoundRobin) AwaitTask(ctx context.Context, id string, version int64) (store.Task, error) {
	return r.host().AwaitTask(ctx, id, version)
}
