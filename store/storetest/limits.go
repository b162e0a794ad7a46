package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// TestRateLimiter runs the rate limit suite. newLimiter must return a
// fresh limiter each time, whose keys no other limiter shares.
func TestRateLimiter(t *testing.T, newLimiter func(t *testing.T) store.RateLimiter) {
	ctx := context.Background()
	alice := store.LimitKey{Principal: "alice", Tool: "create_order"}
	perMinute := store.Rate{Calls: 3, Per: time.Minute}

	allow := func(t *testing.T, l store.RateLimiter, key store.LimitKey, rate store.Rate) store.RateDecision {
		t.Helper()
		d, err := l.Allow(ctx, key, rate)
		if err != nil {
			t.Fatalf("Allow(%+v) = %v", key, err)
		}
		return d
	}
	burst := func(t *testing.T, l store.RateLimiter, key store.LimitKey, rate store.Rate) {
		t.Helper()
		for i := range rate.Calls {
			if d := allow(t, l, key, rate); !d.Allowed || d.RetryAfter != 0 {
				t.Fatalf("call %d of a burst of %d = %+v; want allowed", i+1, rate.Calls, d)
			}
		}
	}

	t.Run("a burst of the rate's calls is allowed, the next is refused", func(t *testing.T) {
		l := newLimiter(t)
		burst(t, l, alice, perMinute)
		d := allow(t, l, alice, perMinute)
		if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > perMinute.Per/time.Duration(perMinute.Calls) {
			t.Fatalf("call past the burst = %+v; want refused, to retry within %v", d, perMinute.Per/time.Duration(perMinute.Calls))
		}
	})

	t.Run("a refused call is not counted", func(t *testing.T) {
		l := newLimiter(t)
		burst(t, l, alice, perMinute)
		first := allow(t, l, alice, perMinute)
		for range 5 {
			d := allow(t, l, alice, perMinute)
			if d.Allowed || d.RetryAfter > first.RetryAfter {
				t.Fatalf("refused again = %+v after %+v; a refusal must not push the next call back", d, first)
			}
		}
	})

	t.Run("principals and tools are counted apart", func(t *testing.T) {
		l := newLimiter(t)
		burst(t, l, alice, perMinute)
		for _, k := range []store.LimitKey{
			{Principal: "bob", Tool: "create_order"},
			{Principal: "alice", Tool: "list_orders"},
			{Principal: "", Tool: "create_order"},
			// Parts that a naive key would join into one.
			{Principal: "alice:create", Tool: "order"},
			{Principal: "alice}", Tool: "create_order"},
		} {
			if d := allow(t, l, k, perMinute); !d.Allowed {
				t.Fatalf("first call of %+v = %+v; it shares nothing with %+v", k, d, alice)
			}
		}
	})

	t.Run("the allowance refills at the rate", func(t *testing.T) {
		l := newLimiter(t)
		fast := store.Rate{Calls: 2, Per: 4 * short}
		burst(t, l, alice, fast)
		d := allow(t, l, alice, fast)
		if d.Allowed {
			t.Fatalf("call past the burst = %+v; want refused", d)
		}
		time.Sleep(d.RetryAfter + short/5)
		if d := allow(t, l, alice, fast); !d.Allowed {
			t.Fatalf("call after RetryAfter = %+v; want allowed", d)
		}
	})

	t.Run("callers racing for a burst get the burst and no more", func(t *testing.T) {
		l := newLimiter(t)
		rate := store.Rate{Calls: 5, Per: time.Minute}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			allowed int
		)
		for range 20 {
			wg.Go(func() {
				d, err := l.Allow(ctx, alice, rate)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if allowed != rate.Calls {
			t.Fatalf("%d of 20 racing calls allowed; want %d", allowed, rate.Calls)
		}
	})
}

// TestConcurrencyLimiter runs the concurrency limit suite. newLimiter must
// return a fresh limiter each time, whose keys no other limiter shares.
// The case of a dead holder runs when the limiter's slots implement
// [Abandoner].
func TestConcurrencyLimiter(t *testing.T, newLimiter func(t *testing.T) store.ConcurrencyLimiter) {
	ctx := context.Background()
	alice := store.LimitKey{Principal: "alice", Tool: "create_order"}

	acquire := func(t *testing.T, l store.ConcurrencyLimiter, key store.LimitKey, slots int, lease time.Duration) store.Slot {
		t.Helper()
		s, err := l.AcquireSlot(ctx, key, slots, lease)
		if err != nil || s == nil {
			t.Fatalf("AcquireSlot(%+v, %d) = %v, %v; want a slot", key, slots, s, err)
		}
		return s
	}
	full := func(t *testing.T, l store.ConcurrencyLimiter, key store.LimitKey, slots int) {
		t.Helper()
		if s, err := l.AcquireSlot(ctx, key, slots, long); !errors.Is(err, store.ErrNoSlot) {
			t.Fatalf("AcquireSlot(%+v, %d) = %v, %v; want ErrNoSlot, every slot being held", key, slots, s, err)
		}
	}

	t.Run("slots are held up to their number and freed by Release", func(t *testing.T) {
		l := newLimiter(t)
		a := acquire(t, l, alice, 2, long)
		b := acquire(t, l, alice, 2, long)
		full(t, l, alice, 2)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		c := acquire(t, l, alice, 2, long)
		full(t, l, alice, 2)
		_, _ = b.Release(ctx), c.Release(ctx)
	})

	t.Run("releasing twice frees one slot", func(t *testing.T) {
		l := newLimiter(t)
		a := acquire(t, l, alice, 2, long)
		b := acquire(t, l, alice, 2, long)
		_ = a.Release(ctx)
		_ = a.Release(ctx)
		c := acquire(t, l, alice, 2, long)
		full(t, l, alice, 2)
		_, _ = b.Release(ctx), c.Release(ctx)
	})

	t.Run("principals and tools are counted apart", func(t *testing.T) {
		l := newLimiter(t)
		held := []store.Slot{acquire(t, l, alice, 1, long)}
		for _, k := range []store.LimitKey{
			{Principal: "bob", Tool: "create_order"},
			{Principal: "alice", Tool: "list_orders"},
			{Principal: "", Tool: "create_order"},
			{Principal: "alice:create", Tool: "order"},
		} {
			held = append(held, acquire(t, l, k, 1, long))
		}
		for _, s := range held {
			_ = s.Release(ctx)
		}
	})

	t.Run("a slot outlives its lease while its holder lives", func(t *testing.T) {
		l := newLimiter(t)
		const lease = 10 * short // long enough that a busy machine renews it in time
		s := acquire(t, l, alice, 1, lease)
		time.Sleep(2 * lease) // the lease is renewed meanwhile
		full(t, l, alice, 1)
		_ = s.Release(ctx)
		acquire(t, l, alice, 1, long).Release(ctx)
	})

	t.Run("the slot of a dead holder is freed when its lease lapses", func(t *testing.T) {
		l := newLimiter(t)
		dead := acquire(t, l, alice, 1, short)
		a, ok := dead.(Abandoner)
		if !ok {
			_ = dead.Release(ctx)
			t.Skip("the limiter's slots have no lease to lapse (they do not implement storetest.Abandoner)")
		}
		a.Abandon() // its host died
		deadline := time.Now().Add(patient)
		for {
			s, err := l.AcquireSlot(ctx, alice, 1, long)
			if err == nil {
				_ = s.Release(ctx)
				return
			}
			if !errors.Is(err, store.ErrNoSlot) {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the abandoned slot is still held %v after its lease of %v", patient, short)
			}
			time.Sleep(short / 5)
		}
	})

	t.Run("callers racing for slots get their number and no more", func(t *testing.T) {
		l := newLimiter(t)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			held []store.Slot
		)
		for range 20 {
			wg.Go(func() {
				s, err := l.AcquireSlot(ctx, alice, 3, long)
				if err != nil {
					if !errors.Is(err, store.ErrNoSlot) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				held = append(held, s)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(held) != 3 {
			t.Errorf("%d of 20 racing callers got a slot; want 3", len(held))
		}
		for _, s := range held {
			_ = s.Release(ctx)
		}
	})
}
