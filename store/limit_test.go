package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryLimiterConformance(t *testing.T) {
	storetest.TestRateLimiter(t, func(*testing.T) store.RateLimiter { return store.NewMemoryLimiter(nil) })
	storetest.TestConcurrencyLimiter(t, func(*testing.T) store.ConcurrencyLimiter { return store.NewMemoryLimiter(nil) })
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// GCRA with a burst of n: n calls at once, then one every period/n, and a
// key left alone for a period has its whole burst again.
func TestMemoryLimiterBurstAndRefill(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := store.NewMemoryLimiter(clock.Now)
	key := store.LimitKey{Principal: "alice", Tool: "create_order"}
	rate := store.Rate{Calls: 4, Per: time.Minute} // one every 15s

	calls := func(want ...bool) {
		t.Helper()
		for i, w := range want {
			d, err := l.Allow(ctx, key, rate)
			if err != nil || d.Allowed != w {
				t.Fatalf("call %d at %v = %+v, %v; want allowed %v", i+1, clock.Now().Format(time.TimeOnly), d, err, w)
			}
		}
	}
	retryAfter := func(want time.Duration) {
		t.Helper()
		if d, _ := l.Allow(ctx, key, rate); d.Allowed || d.RetryAfter != want {
			t.Fatalf("call at %v = %+v; want refused with RetryAfter %v", clock.Now().Format(time.TimeOnly), d, want)
		}
	}

	calls(true, true, true, true, false)
	retryAfter(15 * time.Second)
	clock.Advance(10 * time.Second)
	retryAfter(5 * time.Second)
	clock.Advance(5 * time.Second)
	calls(true, false) // one call refilled
	clock.Advance(45 * time.Second)
	calls(true, true, true, false) // three more
	clock.Advance(time.Hour)
	calls(true, true, true, true, false) // never more than the burst
}

// A key whose allowance is full again is forgotten: the limiter's memory
// is bounded by the keys that called within their period.
func TestMemoryLimiterForgetsRefilledKeys(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := store.NewMemoryLimiter(clock.Now)
	rate := store.Rate{Calls: 1, Per: time.Second}
	for i := range 1000 {
		if _, err := l.Allow(ctx, store.LimitKey{Principal: string(rune('a' + i%26)), Tool: string(rune(i))}, rate); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	if _, err := l.Allow(ctx, store.LimitKey{Principal: "z", Tool: "t"}, rate); err != nil {
		t.Fatal(err)
	}
	if n := store.LimiterKeys(l); n != 1 {
		t.Fatalf("the limiter remembers %d keys after every allowance refilled; want 1", n)
	}
}

// BenchmarkMemoryLimiter measures one decision of the in-process limiter,
// the whole cost a limit adds to a call without a shared store:
//
//	go test -run '^$' -bench BenchmarkMemoryLimiter -benchmem ./store
func BenchmarkMemoryLimiter(b *testing.B) {
	ctx := context.Background()
	l := store.NewMemoryLimiter(nil)
	key := store.LimitKey{Principal: "alice", Tool: "create_order"}
	b.Run("allow", func(b *testing.B) {
		rate := store.Rate{Calls: 1_000_000_000, Per: time.Hour}
		for b.Loop() {
			if d, err := l.Allow(ctx, key, rate); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
	})
	b.Run("slot", func(b *testing.B) {
		for b.Loop() {
			s, err := l.AcquireSlot(ctx, key, 1, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			_ = s.Release(ctx)
		}
	})
}
