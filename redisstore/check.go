package redisstore

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy/store"
)

var _ store.Checker = (*Store)(nil)

// Check returns nil while the reservation of token, which this store
// took, still holds key, and an error wrapping [store.ErrLostReservation]
// when it does not. It asks Redis only when the lease was last confirmed
// a third of it ago or more (a wait for the tool's turn, or a pause of the
// process): then it renews the lease, as the background renewal does, and
// restores a reservation that Redis lost with its state.
func (s *Store) Check(ctx context.Context, key store.Key, token string) error {
	r := s.renewalOf(token)
	if r == nil {
		return lost() // ended already, or never this store's
	}
	if r.fresh() {
		return nil
	}
	start := time.Now()
	n, err := r.renew(ctx)
	if err != nil {
		return failure(ctx, err)
	}
	if n != 1 {
		return lost()
	}
	r.confirm(start)
	return nil
}

var _ store.Pinger = (*Store)(nil)

// Ping returns nil when Redis answers within ctx: the hosts' health checks
// ask it (see [store.Pinger]).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return failure(ctx, err)
	}
	return nil
}
