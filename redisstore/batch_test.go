package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// roundTrips counts what a client sends to Redis: commands alone, and
// pipelines.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// A host holding many leases renews them in pipelines, not one round trip
// each: 500 reservations with a lease of 600 ms stay held for three
// leases, renewed every 200 ms, in a fraction of the round trips that one
// renewal at a time takes (one each).
func TestRenewalsAreBatched(t *testing.T) {
	const (
		held  = 500
		lease = 600 * time.Millisecond
	)
	c := newClient(t)
	prefix := testPrefix(t, c)
	s := newStore(t, c, prefix, WithLogger(quiet))
	var trips roundTrips
	s.upkeep.get().AddHook(&trips)
	ctx := context.Background()
	tokens := make([]string, held)
	for i := range held {
		r, err := s.Begin(ctx, store.Key{Principal: "agent", Tool: "pay", RequestID: fmt.Sprint(i)}, "d", lease)
		if err != nil || !r.Owned {
			t.Fatalf("Begin %d = %+v, %v", i, r, err)
		}
		tokens[i] = r.Token
	}
	time.Sleep(3 * lease)
	for i := range held {
		k := store.Key{Principal: "agent", Tool: "pay", RequestID: fmt.Sprint(i)}
		if tok := c.HGet(ctx, s.idemKey(k), "t").Val(); tok != tokens[i] {
			t.Fatalf("reservation %d holds %q after three leases; want its token", i, tok)
		}
		if err := s.Release(ctx, k, tokens[i]); err != nil {
			t.Fatal(err)
		}
	}
	renewals := held * 3 * 3 // about three renewals a lease, for three leases
	if n := trips.n.Load(); n > int64(renewals/4) {
		t.Fatalf("about %d renewals took %d round trips; want them batched (at most a quarter)", renewals, n)
	}
}
