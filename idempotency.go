package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// recordError is the form in which an error is recorded for replay: the
// error as callers receive it, without its cause.
func recordError(e *Error) []byte {
	public := *e
	public.Err = nil
	data, err := json.Marshal(&public)
	if err != nil {
		// Details that do not encode are dropped rather than the record, so
		// that the request id still runs once.
		public.Details = nil
		data, _ = json.Marshal(&public)
	}
	return data
}

// replayError decodes a recorded error; each replay gets its own copy.
func replayError(data []byte) *Error {
	e := new(Error)
	if err := json.Unmarshal(data, e); err != nil {
		return &Error{Code: CodeInternal, Message: "the recorded outcome of this request id cannot be read", Retryable: true, Err: err}
	}
	return e
}

// recordTimeout bounds one attempt to record an outcome, so that a store
// that hangs does not hold the caller's answer for long.
const recordTimeout = 2 * time.Second

// Backoff of recordLater between two attempts.
const (
	recordRetryFirst = 50 * time.Millisecond
	recordRetryMax   = 2 * time.Second
)

// record completes the reservation with rec, or releases it when rec is
// nil (an outcome that calling again could change).
func (r *Registry) record(resv *reservation, rec *store.Record) error {
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
		case <-r.streams.Done():
			r.logger.Error("carmy: the registry closed before the outcome of a request id could be recorded; its reservation lapses with its lease", "tool", t.meta.Name, "request_id", resv.key.RequestID)
			if a, ok := r.store.(interface{ AbandonReservation(store.Key, string) }); ok {
				a.AbandonReservation(resv.key, resv.token)
			}
			return
		case <-time.After(delay):
		}
		err := r.record(resv, rec)
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
