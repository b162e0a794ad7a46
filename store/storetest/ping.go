package storetest

import (
	"context"
	"testing"

	"github.com/carmy-dev/carmy/store"
)

// testPing checks a store that can be pinged ([store.Pinger]): it answers
// while its service is reachable, and a ping whose context is done fails
// rather than reporting a store it did not reach.
func testPing(t *testing.T, newStore func(t *testing.T, limit int) store.IdempotencyStore) {
	t.Run("Ping answers while the store is reachable", func(t *testing.T) {
		p, ok := newStore(t, 0).(store.Pinger)
		if !ok {
			t.Skip("the store does not implement store.Pinger")
		}
		ctx, cancel := context.WithTimeout(context.Background(), patient)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			t.Fatalf("Ping = %v; want nil", err)
		}
		done, stop := context.WithCancel(context.Background())
		stop()
		if err := p.Ping(done); err == nil {
			t.Fatal("Ping with a cancelled context = nil; want an error")
		}
	})
}
