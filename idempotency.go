package carmy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// reservation is an idempotency key this call holds.
type reservation struct {
	key    store.Key
	token  string
	digest string
	fence  uint64
}

// reservationAnswer is the reservation stage's answer for a call with a
// request id.
type reservationAnswer uint8

const (
	// reservationOwned: the call holds the request id's reservation
	// (holds.resv), and runs.
	reservationOwned reservationAnswer = iota
	// reservationReplay: an outcome is recorded for this request id and
	// input; the call gets it.
	reservationReplay
	// reservationConflict: the request id was used with another input.
	reservationConflict
	// reservationVacant: nothing holds the request id, which a call that
	// only looks leaves free.
	reservationVacant
)

// reserve is the reservation stage of a call with a request id, the one
// stage that decides replays: it asks the store for the key (principal,
// tool, request id) until the answer is owned, replay (with the record) or
// conflict, waiting for an execution in flight with the key to end and
// asking again. A call that only looks (look: one not confirmed, which
// must hold no key while a person may decide on it) never owns the key:
// where nothing holds it, the answer is vacant. It never runs the tool:
// the pipeline decides what each answer means.
func (r *Registry) reserve(ctx context.Context, t *tool, req *Request, look bool) (reservationAnswer, *store.Record, error) {
	c := &req.Call
	_, digest, err := req.canonical(t)
	if err != nil {
		return 0, nil, r.internal(t, "", err, "cannot digest a validated input")
	}
	key := store.Key{Principal: c.Principal, Tool: t.meta.Name, RequestID: c.RequestID}
	for {
		var res store.Reservation
		vacant := false
		if look {
			res, vacant, err = r.find(ctx, t, key, digest)
		} else {
			res, err = r.store.Begin(ctx, key, digest, t.reservationLease())
		}
		switch {
		case err != nil:
			return 0, nil, r.storeError(ctx, t, err)
		case vacant:
			return reservationVacant, nil, nil
		case res.Owned:
			req.held.resv = &reservation{key: key, token: res.Token, digest: digest, fence: res.Fence}
			return reservationOwned, nil, nil
		case res.Digest != digest:
			return reservationConflict, nil, nil
		case res.Record != nil:
			return reservationReplay, res.Record, nil
		}
		if req.task != nil {
			req.task.begin() // a task waits for the execution in flight
		}
		if err := r.store.Wait(ctx, key); err != nil {
			return 0, nil, r.storeError(ctx, t, err)
		}
	}
}

// replay returns a recorded outcome to one caller. Stores hand every
// caller its own copy of the record's bytes, and the error is decoded anew
// for each, so a caller may change what it gets without changing what the
// next one gets; a replayed error says that it is a replay, and of which
// execution.
func replay(rec *store.Record) (Result, error) {
	if rec.Error != nil {
		e := replayError(rec.Error)
		if e.Details == nil {
			e.Details = make(map[string]any, 2)
		}
		e.Details["replayed"] = true
		e.Details["execution_id"] = rec.ExecutionID
		return Result{}, e
	}
	return Result{ExecutionID: rec.ExecutionID, Output: rec.Output, Replayed: true}, nil
}

// record is the record stage of an execution: its outcome is kept for
// replays of its request id, or, when calling again could change it, the
// reservation is released. It takes the reservation from h. The record is
// a copy: the caller that gets the outcome may change it.
func (r *Registry) record(t *tool, h *holds, execID string, o outcome) {
	resv := h.resv
	if resv == nil {
		return
	}
	h.resv = nil
	var rec *store.Record
	var e *Error
	switch {
	case o.err == nil:
		rec = &store.Record{Digest: resv.digest, ExecutionID: execID, Output: o.res.Output}
	case errors.As(o.err, &e) && !e.Retryable:
		rec = &store.Record{Digest: resv.digest, ExecutionID: execID, Error: recordError(e)}
	}
	r.settle(t, resv, rec)
}

// settle completes reservation resv with rec, or releases it when rec is
// nil. An outcome or release the store cannot take now is tried again
// later (recordLater), while the store keeps the reservation: the caller
// is answered meanwhile. A reservation that is no longer this call's is
// another's to settle.
func (r *Registry) settle(t *tool, resv *reservation, rec *store.Record) {
	err := r.complete(resv, rec)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLostReservation):
		if rec != nil {
			r.logger.Error("carmy: cannot record the outcome for its request id", "tool", t.meta.Name, "request_id", resv.key.RequestID, "error", err)
		}
	default:
		r.logger.Warn("carmy: cannot record the outcome for its request id yet; trying again while its reservation is held", "tool", t.meta.Name, "request_id", resv.key.RequestID, "error", err)
		go r.recordLater(t, resv, rec)
	}
}

// recordTimeout bounds one attempt to record an outcome, so that a store
// that hangs does not hold the caller's answer for long.
const recordTimeout = 2 * time.Second

// Backoff of recordLater between two attempts.
const (
	recordRetryFirst = 50 * time.Millisecond
	recordRetryMax   = 2 * time.Second
)

// complete completes the reservation with rec, or releases it when rec is
// nil (an outcome that calling again could change).
func (r *Registry) complete(resv *reservation, rec *store.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if rec == nil {
		return r.store.Release(ctx, resv.key, resv.token)
	}
	return r.store.Complete(ctx, resv.key, resv.token, *rec, r.ttl)
}

// recordLater records an outcome that the store could not take when the
// execution ended, trying again with backoff until the store takes it,
// says the reservation is no longer this execution's, or the registry
// closes. Meanwhile the store keeps the reservation (a shared store renews
// its lease), so no retry of the request runs it again: it waits, or is
// told to try later, and gets this outcome once recorded.
func (r *Registry) recordLater(t *tool, resv *reservation, rec *store.Record) {
	delay := recordRetryFirst
	for attempt := 2; ; attempt++ {
		select {
		case <-r.life.Done():
			r.logger.Error("carmy: the registry closed before the outcome of a request id could be recorded; its reservation lapses with its lease", "tool", t.meta.Name, "request_id", resv.key.RequestID)
			if a, ok := r.store.(store.ReservationAbandoner); ok {
				a.AbandonReservation(resv.key, resv.token)
			}
			return
		case <-time.After(delay):
		}
		err := r.complete(resv, rec)
		switch {
		case err == nil:
			r.logger.Info("carmy: recorded the outcome of a request id after the store came back", "tool", t.meta.Name, "request_id", resv.key.RequestID, "attempts", attempt)
			return
		case errors.Is(err, store.ErrLostReservation):
			r.logger.Error("carmy: cannot record the outcome for its request id", "tool", t.meta.Name, "request_id", resv.key.RequestID, "error", err)
			return
		}
		delay = min(2*delay, recordRetryMax)
	}
}

// storeRefusal turns what a store refuses by design (capacity, recovery)
// into the error callers see, or returns nil for another failure.
func storeRefusal(t *tool, err error) *Error {
	switch {
	case errors.Is(err, store.ErrCapacity):
		return &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s cannot take a new request id now: this caller made as many calls with request ids as the server keeps within its idempotency window; try again later", t.meta.Name),
			Retryable: true,
			Details:   map[string]any{"reason": "capacity"},
			Err:       err,
		}
	case errors.Is(err, store.ErrApprovalCapacity):
		return &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s cannot ask for another approval now: this caller's calls already wait for approvals holding as much input as the server keeps; tell the user, and try again once those are decided or expired", t.meta.Name),
			Retryable: true,
			Details:   map[string]any{"reason": "capacity"},
			Err:       err,
		}
	case errors.Is(err, store.ErrRecovering):
		return &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s cannot run a new request id now: the idempotency store is recovering from a restart; try again shortly", t.meta.Name),
			Retryable: true,
			Details:   map[string]any{"reason": "recovering"},
			Err:       err,
		}
	}
	return nil
}

// requestIDConflict refuses a call whose request id was used with another
// input.
func requestIDConflict(t *tool, requestID string) *Error {
	return Errorf(CodeConflict, "request id %q was already used with a different input for %s; send a new request id for a new call", requestID, t.meta.Name)
}

// leaseMargin is added to a tool's timeout to make the leases of its
// idempotency reservations and locks. A shared store renews them while the
// execution lives, so the lease only decides how soon the key of a host
// that died is freed.
const leaseMargin = 30 * time.Second

// reservationLease is how long a call's idempotency reservation lasts
// unless renewed: the longest a healthy call holds it. That is the wait
// for the tool's turn, which is bounded by the tool's timeout, then the
// execution under that timeout, then the margin.
func (t *tool) reservationLease() time.Duration {
	if t.meta.ParallelSafe {
		return t.meta.Timeout + leaseMargin
	}
	return 2*t.meta.Timeout + leaseMargin
}

// storeError explains a failure of the store (idempotency, limits) or the
// locker.
func (r *Registry) storeError(ctx context.Context, t *tool, err error) error {
	if ctx.Err() != nil {
		return stopError(ctx, t)
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if e := storeRefusal(t, err); e != nil {
		r.logger.Warn("carmy: call refused by the idempotency store", "tool", t.meta.Name, "reason", e.Details["reason"])
		return e
	}
	r.logger.Error("carmy: the store or locker failed", "tool", t.meta.Name, "error", err)
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s cannot run now: a service it depends on is unavailable; try again", t.meta.Name), Retryable: true, Err: err}
}

// replayed answers the call with a recorded outcome, under the execution
// id of the call that ran.
func (req *Request) replayed(rec *store.Record) (Result, error) {
	req.ExecutionID, req.Replayed = rec.ExecutionID, true
	return replay(rec)
}

// checkReservation asks a store whose reservations can lapse
// ([store.Checker]) whether this call's reservation still holds its
// request id, just before the tool starts: a host that was paused or cut
// off for longer than the lease, while another host took the request id
// over, refuses the call rather than run it a second time. The refusal is
// retryable: the retry waits for the execution that holds the request id
// now, and gets its outcome. The check narrows the window; the fence
// closes it, for a tool whose resource remembers fences. What the call
// holds is released by the pipeline (release): the reservation ends this
// host's renewal of a key that is another's now.
func (r *Registry) checkReservation(ctx context.Context, t *tool, req *Request) error {
	c, ok := r.store.(store.Checker)
	resv := req.held.resv
	if resv == nil || !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, recordTimeout)
	err := c.Check(cctx, resv.key, resv.token)
	cancel()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLostReservation):
		r.logger.Warn("carmy: refused a call whose request id's reservation passed on before its tool started: its host was paused or cut off for longer than the lease", "tool", t.meta.Name, "request_id", resv.key.RequestID)
		return r.refused(ctx, t, &req.Call, &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s did not run: another execution took this request id over while this server was unresponsive; try again to get its outcome", t.meta.Name),
			Retryable: true,
			Details:   map[string]any{"reason": "reservation_lost"},
			Err:       err,
		})
	}
	return r.storeError(ctx, t, err)
}

// find reports what holds a request id's key without holding it (vacant:
// nothing does): through the store's lookup ([store.Finder]) when it has
// one, and otherwise with a Begin whose reservation, if it gets one, is
// released at once.
func (r *Registry) find(ctx context.Context, t *tool, key store.Key, digest string) (res store.Reservation, vacant bool, err error) {
	if f, ok := r.store.(store.Finder); ok {
		res, found, err := f.Find(ctx, key)
		return res, !found, err
	}
	res, err = r.store.Begin(ctx, key, digest, t.reservationLease())
	if err == nil && res.Owned {
		if err := r.store.Release(context.WithoutCancel(ctx), key, res.Token); err != nil {
			r.logger.Error("carmy: cannot release a request id's reservation", "tool", t.meta.Name, "request_id", key.RequestID, "error", err)
		}
		return store.Reservation{}, true, nil
	}
	return res, false, err
}

// useOnce records the nonce of a request state as used, in the
// idempotency store so that every host sees it, and reports whether this
// was its first use: through the store's nonces ([store.NonceStore]) when
// it has them, and otherwise as a record under a request id with a space,
// which no call's request id has.
func (r *Registry) useOnce(ctx context.Context, c Call, nonce string, ttl time.Duration) bool {
	ttl = max(ttl, time.Second)
	if n, ok := r.store.(store.NonceStore); ok {
		first, err := n.UseNonce(ctx, c.Principal, nonce, ttl)
		return err == nil && first // a store that cannot tell refuses the state
	}
	key := store.Key{Principal: c.Principal, Tool: c.Tool, RequestID: "confirmed " + nonce}
	res, err := r.store.Begin(ctx, key, "", time.Minute)
	if err != nil || !res.Owned {
		return false
	}
	if err := r.store.Complete(ctx, key, res.Token, store.Record{}, ttl); err != nil {
		r.logger.Error("carmy: cannot record a confirmation's use", "tool", c.Tool, "error", err)
		return false
	}
	return true
}
