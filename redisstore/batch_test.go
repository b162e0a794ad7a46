package redisstore

import (
	"context"
	"fmt"
	"sync"
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

// Renewals that fall due together go in one pipeline: 500 leases renewed
// at once take a fraction of the round trips that one renewal at a time
// takes (one each), and every lease is renewed.
func TestRenewalsAreBatched(t *testing.T) {
	const held = 500
	c := newClient(t)
	prefix := testPrefix(t, c)
	s := newStore(t, c, prefix, WithLogger(quiet))
	ctx := context.Background()
	keys := make([]string, held)
	tokens := make([]string, held)
	for i := range held {
		k := store.Key{Principal: "agent", Tool: "pay", RequestID: fmt.Sprint(i)}
		r, err := s.Begin(ctx, k, "d", time.Minute)
		if err != nil || !r.Owned {
			t.Fatalf("Begin %d = %+v, %v", i, r, err)
		}
		keys[i], tokens[i] = s.idemKey(k), r.Token
		t.Cleanup(func() { _ = s.Release(context.Background(), k, r.Token) })
	}
	// As on a Redis that just started: it knows no script. Stores load
	// what they need again.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var trips roundTrips
	s.upkeep.get().AddHook(&trips)
	start := make(chan struct{})
	var wg sync.WaitGroup
	renewed := make([]int64, held)
	for i := range held {
		wg.Go(func() {
			<-start
			n, err := s.batch.run(ctx, renewScript, []string{keys[i]}, tokens[i], int64(10*time.Minute/time.Millisecond))
			if err != nil {
				t.Error(err)
			}
			renewed[i] = n
		})
	}
	close(start)
	wg.Wait()
	for i, n := range renewed {
		if n != 1 {
			t.Fatalf("renewal %d answered %d; want 1", i, n)
		}
		if ttl := c.PTTL(ctx, keys[i]).Val(); ttl < 5*time.Minute {
			t.Fatalf("lease %d has %v left; want the renewed 10 minutes", i, ttl)
		}
	}
	if n := trips.n.Load(); n > held/5 {
		t.Fatalf("%d renewals at once took %d round trips; want them batched (at most %d)", held, n, held/5)
	}
	t.Logf("%d renewals at once: %d round trips", held, trips.n.Load())
}
