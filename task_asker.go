package carmy

import (
	"context"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// taskAsker lets a task wait for a person's approval within its call's one
// pass through the pipeline (a [personAsker]): the task is input_required,
// naming the approval, until a person decides it on any host; approved,
// the call goes on from the confirmation stage, so that the middleware and
// the audit see it once; denied, the task fails with the denial, as the
// call would be refused. Nobody deciding before the approval expires
// leaves the refusal that stands. While it waits, it holds no place under
// the tool's MaxInFlight (askInBand).
type taskAsker struct{ run *taskRun } // one pointer: held in an interface without an allocation

// confirmedBefore is never true: a task's call comes in one request.
func (taskAsker) confirmedBefore(context.Context, Call, string) (store.Approval, bool) {
	return store.Approval{}, false
}

func (a taskAsker) ask(ctx context.Context, t *tool, c Call, _ []byte, _ string, refusal *Error, pending *approve.Pending) (store.Approval, error) {
	run, r := a.run, a.run.r
	if pending.URL == "" && c.Principal == r.stdioIdentity.Principal {
		// No served console shows this approval: the person of a
		// single-client process decides it on the loopback console, which
		// exists from now on, its file where `carmy approvals` finds it.
		if _, _, err := r.http.localConsole(ctx); err != nil {
			r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
		}
	}
	if err := run.update(ctx, store.TaskUpdate{Status: store.TaskInputRequired, ApprovalID: pending.ID}); err != nil {
		return store.Approval{}, err
	}
	run.waited = true
	run.begin() // Start returns: the task waits for a person
	r.approvals.tasks.Store(pending.ID, struct{}{})
	got, err := r.awaitDecision(ctx, pending.ID)
	r.approvals.tasks.Delete(pending.ID)
	switch {
	case err != nil && ctx.Err() != nil:
		return store.Approval{}, stopError(ctx, t)
	case err != nil:
		return store.Approval{}, r.approvalStoreError(err)
	case got.Status == store.ApprovalExpired || got.Status == store.ApprovalPending:
		return store.Approval{}, refusal // nobody decided in time
	}
	if err := run.update(ctx, store.TaskUpdate{Status: store.TaskWorking}); err != nil {
		return store.Approval{}, err
	}
	return got, decided(t, got, refusal)
}

// freeSlot gives up the call's place under its tool's MaxInFlight.
func (r *Registry) freeSlot(ctx context.Context, t *tool, req *Request) {
	held := holds{slot: req.held.slot}
	req.held.slot = nil
	r.release(ctx, t, &held)
}
