package carmy

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// find reports what holds a request id's key without running anything:
// through the store's lookup ([store.Finder]) when it has one, and
// otherwise with a Begin whose reservation, if it gets one, is released at
// once.
func (r *Registry) find(ctx context.Context, t *tool, key store.Key, digest string) (store.Reservation, error) {
	if f, ok := r.store.(store.Finder); ok {
		res, _, err := f.Find(ctx, key)
		return res, err
	}
	res, err := r.store.Begin(ctx, key, digest, t.reservationLease())
	if err == nil && res.Owned {
		if err := r.store.Release(context.WithoutCancel(ctx), key, res.Token); err != nil {
			r.logger.Error("carmy: cannot release a request id's reservation", "tool", t.meta.Name, "request_id", key.RequestID, "error", err)
		}
		res = store.Reservation{}
	}
	return res, err
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
