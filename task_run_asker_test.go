package carmy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

// A task of a tool that needs a person's approval waits for it inside its
// call's one pass: the middleware sees the call once, and the audit holds
// no refusal for a call that then runs, only its execution, naming the
// approval and who gave it; a denial is the call's one refusal. The
// person decides on another host that shares the store.
func TestTaskWaitsForApprovalInOnePass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		approve bool
		note    string
		want    []carmy.AuditDecision
	}{
		{true, `{"id":7}`, []carmy.AuditDecision{carmy.AuditStarted, carmy.AuditExecuted}},
		{false, `{"id":8}`, []carmy.AuditDecision{carmy.AuditRefused}},
	} {
		name := map[bool]string{true: "approved", false: "denied"}[tc.approve]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newHostsStore(t)
			var runs, passes atomic.Int32
			del := func() *carmy.ToolDef {
				return carmy.Tool(func(in DeleteNote) (uint64, error) { runs.Add(1); return in.ID, nil }, carmy.Destructive,
					carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
			}
			count := func(next carmy.CallFunc) carmy.CallFunc {
				return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
					passes.Add(1)
					return next(ctx, req)
				}
			}
			var mu sync.Mutex
			var recs []carmy.AuditRecord
			sink := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
				mu.Lock()
				defer mu.Unlock()
				recs = append(recs, rec)
				return nil
			})
			a := taskRegistry(t, carmy.New().Store(s).Use(count).Audit(sink), del())
			b := taskRegistry(t, carmy.New().Store(s), del())

			task, err := a.Start(context.Background(), carmy.Call{Tool: "delete_note", Input: []byte(tc.note), Principal: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != carmy.TaskInputRequired || task.ApprovalID == "" {
				t.Fatalf("Start = %+v; want input_required with an approval", task)
			}
			approval := task.ApprovalID
			if err := b.Decide(context.Background(), approval, tc.approve, "person:alice"); err != nil {
				t.Fatal(err)
			}
			_, err = task.Wait(context.Background())
			if tc.approve && (err != nil || runs.Load() != 1) {
				t.Fatalf("Wait = %v, runs %d; want the approved call run once", err, runs.Load())
			}
			if !tc.approve {
				if e := wantCode(t, err, carmy.CodePermissionDenied); e.Details["approval_id"] != approval || runs.Load() != 0 {
					t.Fatalf("denied task = %+v, runs %d; want the denial, not run", e, runs.Load())
				}
			}
			if n := passes.Load(); n != 1 {
				t.Errorf("the middleware saw the call %d times; want once", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(recs) != len(tc.want) {
				t.Fatalf("audit = %+v; want %v", recs, tc.want)
			}
			for i, rec := range recs {
				if rec.Decision != tc.want[i] || rec.ApprovalID != approval {
					t.Errorf("record %d = %+v; want %s naming approval %s", i, rec, tc.want[i], approval)
				}
				if tc.approve && rec.Approver != "person:alice" {
					t.Errorf("record %d names approver %q; want person:alice", i, rec.Approver)
				}
			}
		})
	}
}

// A task waiting for a person's approval is not running: it holds no
// place under its tool's MaxInFlight, so the caller's other calls of the
// tool run meanwhile; once approved it takes its place again, and is
// refused, as its call would be, if every place is taken by then.
func TestTaskWaitingForApprovalHoldsNoInFlightPlace(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	del := carmy.Tool(func(in DeleteNote) (uint64, error) {
		started <- struct{}{}
		if in.ID == 2 {
			<-release
		}
		return in.ID, nil
	}, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.ParallelSafe(), carmy.MaxInFlight(1), carmy.Register(false))
	reg := taskRegistry(t, carmy.New(), del)
	ctx := context.Background()
	granted := func(id string) carmy.Call {
		return carmy.Call{Tool: "delete_note", Input: []byte(`{"id":` + id + `}`), Principal: "agent", Permissions: []string{"confirm:delete_note"}}
	}

	task, err := reg.Start(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":1}`), Principal: "agent"})
	if err != nil || task.Status != carmy.TaskInputRequired {
		t.Fatalf("Start = %+v, %v; want input_required", task, err)
	}
	approval := task.ApprovalID
	if res, err := reg.Execute(ctx, granted("3")); err != nil || string(res.Output) != "3" {
		t.Fatalf("a call while the task waits = %s, %v; want it run", res.Output, err)
	}

	// Approved while another call holds the one place: the task is
	// refused as that call would be, its approval left for a retry.
	done := make(chan error, 1)
	go func() { _, err := reg.Execute(ctx, granted("2")); done <- err }()
	<-started // 3
	<-started // 2, holding the place
	if err := reg.Decide(ctx, approval, true, "person:alice"); err != nil {
		t.Fatal(err)
	}
	_, err = task.Wait(ctx)
	wantCode(t, err, carmy.CodeRateLimited)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res, err := reg.Execute(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":1}`), Principal: "agent"}); err != nil || string(res.Output) != "1" {
		t.Fatalf("the retry = %s, %v; want it run by the approval", res.Output, err)
	}
}

// A task that waited for a person's approval runs on the permissions of
// when its tool starts, not of when it was started: a caller whose
// permission was withdrawn meanwhile (by the Authorize policy) is refused
// once the person approves, and the tool never runs.
func TestTaskWaitingForApprovalChecksPermissionAgain(t *testing.T) {
	t.Parallel()
	var revoked atomic.Bool
	var runs atomic.Int32
	del := carmy.Tool(func(in DeleteNote) (uint64, error) { runs.Add(1); return in.ID, nil },
		carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	reg := taskRegistry(t, carmy.New().Authorize(func(c carmy.Context, _ carmy.ToolMetadata) error {
		if revoked.Load() {
			return errors.New("this agent's access was withdrawn")
		}
		return nil
	}), del)
	ctx := context.Background()
	task, err := reg.Start(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":1}`), Principal: "agent"})
	if err != nil || task.Status != carmy.TaskInputRequired {
		t.Fatalf("Start = %+v, %v; want input_required", task, err)
	}
	revoked.Store(true)
	if err := reg.Decide(ctx, task.ApprovalID, true, "person:alice"); err != nil {
		t.Fatal(err)
	}
	_, err = task.Wait(ctx)
	wantCode(t, err, carmy.CodePermissionDenied)
	if runs.Load() != 0 {
		t.Fatalf("the tool ran %d times after its caller lost the permission", runs.Load())
	}
}
