package carmy

import (
	"context"
	"errors"
	"fmt"

	"github.com/carmy-dev/carmy/store"
)

// checkReservation asks a store whose reservations can lapse
// ([store.Checker]) whether this call's reservation still holds its
// request id, just before the tool starts: a host that was paused or cut
// off for longer than the lease, while another host took the request id
// over, refuses the call rather than run it a second time. The refusal is
// retryable: the retry waits for the execution that holds the request id
// now, and gets its outcome. The check narrows the window; the fence
// closes it, for a tool whose resource remembers fences.
func (r *Registry) checkReservation(ctx context.Context, t *tool, req *Request, resv *reservation, lock store.Lock) error {
	c, ok := r.store.(store.Checker)
	if resv == nil || !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, recordTimeout)
	err := c.Check(cctx, resv.key, resv.token)
	cancel()
	if err == nil {
		return nil
	}
	if lock != nil {
		if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
			r.logger.Error("carmy: cannot release the lock", "tool", t.meta.Name, "error", err)
		}
	}
	if errors.Is(err, store.ErrLostReservation) {
		r.logger.Warn("carmy: refused a call whose request id's reservation passed on before its tool started: its host was paused or cut off for longer than the lease", "tool", t.meta.Name, "request_id", resv.key.RequestID)
		_ = r.store.Release(context.WithoutCancel(ctx), resv.key, resv.token) // ends this host's renewal; the key is another's
		return r.refused(ctx, t, &req.Call, &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s did not run: another execution took this request id over while this server was unresponsive; try again to get its outcome", t.meta.Name),
			Retryable: true,
			Details:   map[string]any{"reason": "reservation_lost"},
			Err:       err,
		})
	}
	e := r.storeError(ctx, t, err)
	r.finish(t, resv, "", outcome{err: e}) // releases the reservation, trying again while the store is down
	return e
}
