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
