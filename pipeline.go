package carmy

import (
	"context"
	"fmt"

	"github.com/carmy-dev/carmy/store"
)

// run is the runtime's own handler: the pipeline every call of a found
// tool passes, its stages in the order they run, the order
// [Registry.Execute] states. The [Request] carries the call from stage to
// stage: its Context and what it holds (the decoded input, which only the
// execution reads, is passed to it). A stage that
// refuses the call answers it; what the call holds is then released in one
// place, release, whether it was refused, replayed or handed to its
// execution. The audit decision is read from the outcome by call, the one
// outcome point.
//
// A panic in code of the tool's that runs on the caller's goroutine (an
// input type's UnmarshalText, a validation rule) or in the policy hook is
// an internal error, as one in the tool itself is: it never takes the host
// down.
func (r *Registry) run(ctx context.Context, t *tool, req *Request) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, r.panicked(t, "", p)
		}
		r.release(ctx, t, &req.held) // what no execution took over
	}()
	c := &req.Call

	// The request id's form, before anything reads it: a task's was
	// checked as it started (startTaskFor).
	if req.task == nil {
		if err := checkRequestID(c.RequestID); err != nil {
			return Result{}, err
		}
	}
	cc, err := r.newContext(ctx, req)
	if err != nil {
		return Result{}, r.internal(t, "", err, "cannot make an execution id")
	}

	// Permission, before the input is read: a caller that may not call
	// the tool learns nothing of its input's rules.
	if e := r.permit(cc, t); e != nil {
		return Result{}, r.refused(ctx, t, c, e)
	}
	if err := r.taskRequired(ctx, t, req); err != nil {
		return Result{}, err
	}

	// Limits, before the input is read too: a caller past them costs no
	// decoding, and learns of its limits, not of its input's mistakes.
	if err := r.limit(ctx, t, req); err != nil {
		return Result{}, err
	}

	// Decode and validate; then the request id the input carries, for a
	// call that came without one.
	in, err := t.decode(c.Input)
	if err != nil {
		return Result{}, err
	}
	if c.RequestID == "" && t.requestID != nil {
		if c.RequestID, err = t.requestIDFromInput(in); err != nil {
			return Result{}, err
		}
		cc.RequestID = c.RequestID
	}

	// Policies, on the validated input, before confirmation: a permit
	// may ask for a person's approval.
	if r.policies != nil {
		if err := r.policyCall(ctx, t, req); err != nil {
			return Result{}, err
		}
	}

	// Confirmation: a grant, or a person's approval; without either, the
	// refusal that stands unless what follows changes it.
	unconfirmed := r.confirm(ctx, t, req)

	// Reservation of the request id: owned, replay or conflict, the one
	// stage that decides replays. Only an owned call goes on to run. A
	// call not confirmed only looks, and holds nothing while a person may
	// decide: the retry of a call that ran gets its outcome; otherwise its
	// refusal stands, unless the person, asked in-band where its door can,
	// approves it. Then it takes its limits again (a task that waited gave
	// its place back) and its reservation, as any call.
	if unconfirmed != nil {
		if c.RequestID != "" {
			if answer, rec, err := r.reserve(ctx, t, req, true); err == nil && answer == reservationReplay {
				return req.replayed(rec)
			}
		}
		if err := r.askInBand(ctx, t, req, unconfirmed); err != nil {
			return Result{}, err
		}
		if err := r.limit(ctx, t, req); err != nil {
			return Result{}, err
		}
	}
	if c.RequestID != "" {
		answer, rec, err := r.reserve(ctx, t, req, false)
		switch {
		case err != nil:
			return Result{}, err
		case answer == reservationReplay:
			return req.replayed(rec)
		case answer == reservationConflict:
			return Result{}, r.refused(ctx, t, c, requestIDConflict(t, c.RequestID))
		}
		cc.Fence = req.held.resv.fence
	}
	if ctx.Err() != nil {
		return Result{}, stopError(ctx, t)
	}
	if req.task != nil {
		req.task.begin() // checked: a task waits its turn, or runs
	}

	// The tool's turn, when it is not parallel-safe; then, just before the
	// tool starts, whether the request id is still this call's.
	if !t.meta.ParallelSafe {
		var lock store.Lock
		if req.task != nil && req.task.adopt != nil {
			lock = req.task.adopt.takeTurn() // the turn of the call handed off to this task
		}
		if lock == nil {
			var err error
			if lock, err = r.awaitTurn(ctx, t, c); err != nil {
				return Result{}, err
			}
		}
		req.held.lock, cc.Fence = lock, lock.Fence()
	}
	if err := r.checkReservation(ctx, t, req); err != nil {
		return Result{}, err
	}

	// The approval the call runs by is used up before the start is
	// audited: a sink that fails then costs a new approval, never a run
	// without a record.
	if err := r.useApproval(ctx, t, req); err != nil {
		return Result{}, err
	}
	if err := r.auditStart(ctx, t, req, cc.ExecutionID); err != nil {
		return Result{}, err
	}

	// Execute under the deadline; the execution records the outcome and
	// releases what the call holds when the tool's code returns.
	return r.execute(ctx, t, req, in)
}

// newContext makes the Context the call's tool will see, with a fresh
// execution id, carried by the request from here on.
func (r *Registry) newContext(ctx context.Context, req *Request) (*Context, error) {
	execID, err := newExecutionID()
	if err != nil {
		return nil, err
	}
	c := &req.Call
	req.exec = &execValue{c: Context{
		Context:     ctx,
		ExecutionID: execID,
		RequestID:   c.RequestID,
		Session:     c.Session,
		Principal:   c.Principal,
		Permissions: NewPermissions(c.Permissions...),
		Metadata:    c.Metadata,
		log:         r.logger,
		peer:        req.peer,
		task:        req.task,
	}}
	return &req.exec.c, nil
}

// taskRequired refuses the call of a tool that runs only as a task
// ([TaskRequired]) when it is not one, unless the MCP client will get the
// task once the tool's questions are answered.
func (r *Registry) taskRequired(ctx context.Context, t *tool, req *Request) error {
	if t.meta.Tasks != TaskRequired || req.task != nil || t.askFirst && req.takesTasks {
		return nil
	}
	return r.refused(ctx, t, &req.Call, &Error{Code: CodeInvalidInput, Details: map[string]any{"reason": reasonTaskRequired},
		Message: fmt.Sprintf("%s runs only as a task: start it as one (over HTTP, send Prefer: respond-async)", t.meta.Name)})
}

// holds is what a call holds on its way through the pipeline, each until
// release frees it: the call's, until its execution takes it over. An
// approval is never held: it is used up only as the execution starts
// (useApproval), so a call refused before then leaves it for the next.
type holds struct {
	resv *reservation // the request id's reservation, not yet recorded
	lock store.Lock   // the tool's turn
	slot store.Slot   // the caller's place under the tool's MaxInFlight
}

// release frees everything a call holds: its request id's reservation
// (released without a record: an outcome to keep is recorded first, by
// record), its tool's turn and its MaxInFlight place. It is the one place
// that frees them, for a call refused on the way and for an execution
// whose tool's code returned, even after its caller was answered. It runs
// whether or not ctx is done; a failure is logged, and a reservation the
// store cannot release now is released later.
func (r *Registry) release(ctx context.Context, t *tool, h *holds) {
	if h.resv != nil {
		r.settle(t, h.resv, nil)
	}
	if h.lock != nil {
		if err := h.lock.Release(context.WithoutCancel(ctx)); err != nil {
			r.logger.Error("carmy: cannot release the lock", "tool", t.meta.Name, "error", err)
		}
	}
	if h.slot != nil {
		if err := h.slot.Release(context.WithoutCancel(ctx)); err != nil {
			r.logger.Error("carmy: cannot release a MaxInFlight slot; it frees itself when its lease runs out", "tool", t.meta.Name, "error", err)
		}
	}
	*h = holds{}
}
