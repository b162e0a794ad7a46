package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// After a failover to a replica that kept the store's marker, new
// executions are held for one renewal interval (a third of their lease),
// not a lease: the hosts restore their reservations at once, whatever
// their own leases. A Redis that lost everything, the marker included,
// keeps the hold of a whole lease. Either way a reservation in flight
// before is restored by its holder, so no retry takes its key.
func TestFailoverHoldsNewCallsOneRenewal(t *testing.T) {
	const lease = 900 * time.Millisecond
	for _, tc := range []struct {
		name     string
		lose     func(t *testing.T, s *Store, prefix string, inFlight string)
		min, max time.Duration
	}{
		{"a promoted replica with the marker", func(t *testing.T, s *Store, prefix, inFlight string) {
			// It lagged: the newest reservation never reached it.
			c := s.client
			if err := c.Del(context.Background(), inFlight).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(context.Background(), prefix+"marker", "run", "the-promoted-replica").Err(); err != nil {
				t.Fatal(err)
			}
		}, lease / 6, lease / 2},
		{"a Redis that lost everything", func(t *testing.T, s *Store, prefix, _ string) {
			deleteKeys(s.client, prefix)
		}, lease * 9 / 10, 3 * lease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			prefix := testPrefix(t, c)
			holder := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond))
			other := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond))
			ctx := context.Background()
			inFlight := store.Key{Principal: "agent", Tool: "slow", RequestID: "in-flight"}
			// The holder's tool has a long lease: its regular renewal
			// would come long after the hold ends.
			if r, err := holder.Begin(ctx, inFlight, "d", 30*time.Second); err != nil || !r.Owned {
				t.Fatalf("Begin = %+v, %v", r, err)
			}
			if _, err := other.Begin(ctx, store.Key{Principal: "agent", Tool: "pay", RequestID: "before"}, "d", lease); err != nil {
				t.Fatal(err)
			}

			tc.lose(t, holder, prefix, holder.idemKey(inFlight))

			start := time.Now()
			var held time.Duration
			for i := 0; ; i++ {
				r, err := other.Begin(ctx, store.Key{Principal: "agent", Tool: "pay", RequestID: "after"}, "d", lease)
				if errors.Is(err, store.ErrRecovering) {
					if time.Since(start) > 10*lease {
						t.Fatal("still held after ten leases")
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				held = time.Since(start)
				if err != nil || !r.Owned {
					t.Fatalf("Begin after the hold = %+v, %v", r, err)
				}
				if i == 0 {
					t.Fatal("the first Begin after the loss was not held")
				}
				break
			}
			if held < tc.min || held > tc.max {
				t.Errorf("new executions were held for %v; want between %v and %v", held, tc.min, tc.max)
			}
			t.Logf("held %v (lease %v)", held, lease)
			r, err := other.Begin(ctx, inFlight, "d", lease)
			if err != nil || r.Owned || r.Record != nil {
				t.Fatalf("Begin of the key in flight after the hold = %+v, %v; want it in flight, restored by its holder", r, err)
			}
		})
	}
}
