// Package storetest checks that a [store.IdempotencyStore] (with the
// optional capabilities it implements), a [store.Locker], a
// [store.ApprovalStore], a [store.TaskStore], a [store.RateLimiter], a
// [store.ConcurrencyLimiter] or a [store.KeyStore] keeps the promises the
// runtime relies on, in the manner of testing/slogtest: call its functions
// ([TestIdempotencyStore], [TestLocker], [TestApprovalStore],
// [TestTaskStore], [TestRateLimiter], [TestConcurrencyLimiter],
// [TestKeyStore]) from a test of your store.
//
//	func TestMyStore(t *testing.T) {
//		storetest.TestIdempotencyStore(t, func(t *testing.T, limit int) store.IdempotencyStore {
//			return mystore.New(limit) // a fresh, empty store
//		})
//	}
//
// The suites use short leases and TTLs (tens of milliseconds) and bounded
// waits; a store whose clock granularity is coarser than that fails them.
package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

const (
	long    = time.Minute            // a lease or TTL that does not run out during a test
	short   = 50 * time.Millisecond  // one that does
	patient = 5 * time.Second        // the longest a test waits for something that must happen
	brief   = 100 * time.Millisecond // how long a test waits for something that must not happen
)

// TestIdempotencyStore runs the store suite. newStore must return a fresh
// store each time, whose keys no other store shares, keeping at most limit
// records per principal (its default when limit is 0). The optional
// capabilities the store implements ([store.Checker], [store.Pinger],
// [store.Finder], [store.NonceStore], [store.ReservationAbandoner]) are
// checked too; the cases of those it lacks are skipped.
func TestIdempotencyStore(t *testing.T, newStore func(t *testing.T, limit int) store.IdempotencyStore) {
	ctx := context.Background()
	key := func(id string) store.Key {
		return store.Key{Principal: "alice", Tool: "create_order", RequestID: id}
	}

	t.Run("first Begin owns the key", func(t *testing.T) {
		s := newStore(t, 0)
		r, err := s.Begin(ctx, key("1"), "d1", long)
		if err != nil || !r.Owned || r.Token == "" || r.Record != nil {
			t.Fatalf("Begin = %+v, %v; want owned with a token", r, err)
		}
	})

	t.Run("second Begin sees the execution in flight", func(t *testing.T) {
		s := newStore(t, 0)
		mustOwn(t, s, key("1"), "d1", long)
		r, err := s.Begin(ctx, key("1"), "d2", long)
		if err != nil || r.Owned || r.Record != nil || r.Digest != "d1" {
			t.Fatalf("Begin = %+v, %v; want in flight with digest d1", r, err)
		}
	})

	t.Run("Complete records the outcome", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		rec := store.Record{Digest: "d1", ExecutionID: "e1", Output: []byte(`{"order_id":7}`)}
		if err := s.Complete(ctx, key("1"), tok, rec, long); err != nil {
			t.Fatal(err)
		}
		r, err := s.Begin(ctx, key("1"), "d1", long)
		if err != nil || r.Owned || r.Record == nil || r.Digest != "d1" {
			t.Fatalf("Begin = %+v, %v; want the record", r, err)
		}
		if r.Record.ExecutionID != "e1" || string(r.Record.Output) != `{"order_id":7}` {
			t.Fatalf("record = %+v; want execution e1 and the output", r.Record)
		}
	})

	t.Run("errors round-trip", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		want := `{"code":"invalid_input","message":"bad","fields":[{"path":"items[0].sku","message":"is required"}],"details":{"k":"v"},"retryable":false}`
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1", Error: []byte(want)}, long); err != nil {
			t.Fatal(err)
		}
		r, _ := s.Begin(ctx, key("1"), "d1", long)
		if r.Record == nil || string(r.Record.Error) != want || r.Record.Output != nil {
			t.Fatalf("Begin = %+v; want the recorded error, byte for byte, and no output", r)
		}
	})

	t.Run("a replay is a copy", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		out, x := []byte(`{"order_id":7}`), []byte(`{"code":"not_found"}`)
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1", Output: out, Error: x}, long); err != nil {
			t.Fatal(err)
		}
		out[0], x[0] = 'X', 'X' // the caller reuses its buffers
		r, _ := s.Begin(ctx, key("1"), "d1", long)
		if r.Record == nil {
			t.Fatalf("Begin = %+v; want the record", r)
		}
		r.Record.Output[0], r.Record.Error[0] = 'Y', 'Y' // a replay changes its copy
		r, _ = s.Begin(ctx, key("1"), "d1", long)
		if string(r.Record.Output) != `{"order_id":7}` || string(r.Record.Error) != `{"code":"not_found"}` {
			t.Fatalf("record = %q, %q; want the bytes as completed, untouched by the callers", r.Record.Output, r.Record.Error)
		}
	})

	t.Run("Release frees the key", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Release(ctx, key("1"), tok); err != nil {
			t.Fatal(err)
		}
		mustOwn(t, s, key("1"), "d2", long)
	})

	t.Run("a wrong token changes nothing", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Complete(ctx, key("1"), tok+"x", store.Record{Digest: "d1"}, long); !errors.Is(err, store.ErrLostReservation) {
			t.Errorf("Complete with a wrong token = %v; want ErrLostReservation", err)
		}
		if err := s.Release(ctx, key("1"), tok+"x"); !errors.Is(err, store.ErrLostReservation) {
			t.Errorf("Release with a wrong token = %v; want ErrLostReservation", err)
		}
		if r, _ := s.Begin(ctx, key("1"), "d1", long); r.Owned || r.Record != nil {
			t.Fatalf("Begin = %+v; want still in flight", r)
		}
	})

	t.Run("keys are independent", func(t *testing.T) {
		s := newStore(t, 0)
		mustOwn(t, s, key("1"), "d1", long)
		mustOwn(t, s, store.Key{Principal: "bob", Tool: "create_order", RequestID: "1"}, "d1", long)
		mustOwn(t, s, store.Key{Principal: "", Tool: "create_order", RequestID: "1"}, "d1", long)
		mustOwn(t, s, store.Key{Principal: "alice", Tool: "cancel_order", RequestID: "1"}, "d1", long)
		mustOwn(t, s, key("2"), "d1", long)
	})

	t.Run("exactly one of many concurrent Begins owns the key", func(t *testing.T) {
		s := newStore(t, 0)
		var owners atomic.Int32
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				r, err := s.Begin(ctx, key("1"), "d1", long)
				if err != nil {
					t.Error(err)
				}
				if r.Owned {
					owners.Add(1)
				}
			})
		}
		wg.Wait()
		if n := owners.Load(); n != 1 {
			t.Fatalf("%d owners; want 1", n)
		}
	})

	t.Run("Wait returns when the execution completes", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		waited := make(chan error, 1)
		go func() { waited <- s.Wait(ctx, key("1")) }()
		select {
		case err := <-waited:
			t.Fatalf("Wait returned %v while the execution was in flight", err)
		case <-time.After(brief):
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1"}, long); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waited:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(patient):
			t.Fatal("Wait did not return after Complete")
		}
	})

	t.Run("Wait returns when the reservation is released", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		waited := make(chan error, 1)
		go func() { waited <- s.Wait(ctx, key("1")) }()
		if err := s.Release(ctx, key("1"), tok); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waited:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(patient):
			t.Fatal("Wait did not return after Release")
		}
	})

	t.Run("Wait respects cancellation", func(t *testing.T) {
		s := newStore(t, 0)
		mustOwn(t, s, key("1"), "d1", long)
		cctx, cancel := context.WithTimeout(ctx, short)
		defer cancel()
		if err := s.Wait(cctx, key("1")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v; want the context's error", err)
		}
	})

	t.Run("Wait on a free or recorded key returns at once", func(t *testing.T) {
		s := newStore(t, 0)
		cctx, cancel := context.WithTimeout(ctx, patient)
		defer cancel()
		if err := s.Wait(cctx, key("free")); err != nil {
			t.Fatal(err)
		}
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1"}, long); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(cctx, key("1")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a token works once", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1"}, long); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e2"}, long); !errors.Is(err, store.ErrLostReservation) {
			t.Errorf("a second Complete with the same token = %v; want ErrLostReservation", err)
		}
		if err := s.Release(ctx, key("1"), tok); !errors.Is(err, store.ErrLostReservation) {
			t.Errorf("Release after Complete = %v; want ErrLostReservation", err)
		}
		if r, _ := s.Begin(ctx, key("1"), "d1", long); r.Record == nil || r.Record.ExecutionID != "e1" {
			t.Fatalf("Begin = %+v; want the first record, untouched", r)
		}
	})

	t.Run("a reservation outlives its lease while its holder lives", func(t *testing.T) {
		s := newStore(t, 0)
		const lease = 10 * short // long enough that a busy machine renews it in time
		tok := mustOwn(t, s, key("1"), "d1", lease)
		time.Sleep(2 * lease) // the execution waits for its turn, then runs
		if r, err := s.Begin(ctx, key("1"), "d1", long); err != nil || r.Owned || r.Record != nil {
			t.Fatalf("Begin = %+v, %v; want the reservation still in flight: its holder lives", r, err)
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1"}, long); err != nil {
			t.Fatalf("Complete of a reservation older than its lease = %v", err)
		}
	})

	t.Run("Wait returns when the lease of a dead holder lapses", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", short)
		abandon(t, s, key("1"), tok) // its holder never comes back
		cctx, cancel := context.WithTimeout(ctx, patient)
		defer cancel()
		if err := s.Wait(cctx, key("1")); err != nil {
			t.Fatalf("Wait = %v; want it to return once the lease lapsed", err)
		}
		mustOwn(t, s, key("1"), "d1", long)
	})

	t.Run("the lapsed lease of a dead holder frees the key", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", short)
		abandon(t, s, key("1"), tok)
		deadline := time.Now().Add(patient)
		for {
			r, err := s.Begin(ctx, key("1"), "d2", long)
			if err != nil {
				t.Fatal(err)
			}
			if r.Owned {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the key was still held long after its lease")
			}
			time.Sleep(short / 2)
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1"}, long); !errors.Is(err, store.ErrLostReservation) {
			t.Fatalf("Complete by the holder whose lease lapsed = %v; want ErrLostReservation", err)
		}
	})

	t.Run("one principal's keys never evict another's records", func(t *testing.T) {
		const limit = 3
		s := newStore(t, limit)
		if w, ok := s.(store.Windowed); ok {
			w.SetWindow(0) // records of any age may go
		}
		quiet := func(id string) store.Key { return store.Key{Principal: "bob", Tool: "create_order", RequestID: id} }
		for _, id := range []string{"1", "2"} {
			tok := mustOwn(t, s, quiet(id), "d1", long)
			if err := s.Complete(ctx, quiet(id), tok, store.Record{Digest: "d1", ExecutionID: "bob-" + id}, long); err != nil {
				t.Fatal(err)
			}
		}
		inFlight := mustOwn(t, s, key("in-flight"), "d1", long)
		const flood = 10 * limit
		for i := range flood {
			id := strconv.Itoa(i)
			tok := mustOwn(t, s, key(id), "d1", long)
			if err := s.Complete(ctx, key(id), tok, store.Record{Digest: "d1", ExecutionID: "alice-" + id}, long); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"1", "2"} {
			if r, err := s.Begin(ctx, quiet(id), "d1", long); err != nil || r.Record == nil || r.Record.ExecutionID != "bob-"+id {
				t.Errorf("bob's record %s = %+v, %v after alice's %d records; want it kept", id, r, err, flood)
			}
		}
		if r, err := s.Begin(ctx, key("0"), "d1", long); err != nil || !r.Owned {
			t.Errorf("alice's oldest record = %+v, %v; want it evicted by her own records beyond her limit of %d", r, err, limit)
		}
		last := strconv.Itoa(flood - 1)
		if r, err := s.Begin(ctx, key(last), "d1", long); err != nil || r.Record == nil {
			t.Errorf("alice's newest record = %+v, %v; want it kept", r, err)
		}
		if r, err := s.Begin(ctx, key("in-flight"), "d1", long); err != nil || r.Owned || r.Record != nil {
			t.Errorf("alice's reservation = %+v, %v; want it still in flight: reservations are never evicted", r, err)
		}
		if err := s.Complete(ctx, key("in-flight"), inFlight, store.Record{Digest: "d1"}, long); err != nil {
			t.Errorf("Complete of the reservation = %v", err)
		}
	})

	t.Run("no record younger than the window is evicted", func(t *testing.T) {
		const limit = 3
		s := newStore(t, limit)
		w, ok := s.(store.Windowed)
		if !ok {
			t.Skip("the store has no window (it does not implement store.Windowed)")
		}
		w.SetWindow(long)
		for i := range limit {
			id := strconv.Itoa(i)
			tok := mustOwn(t, s, key(id), "d1", long)
			if err := s.Complete(ctx, key(id), tok, store.Record{Digest: "d1", ExecutionID: "alice-" + id}, long); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := s.Begin(ctx, key("new"), "d1", long); !errors.Is(err, store.ErrCapacity) {
			t.Fatalf("Begin of a new key at the bound, every record young = %+v, %v; want ErrCapacity", r, err)
		}
		for i := range limit {
			if r, err := s.Begin(ctx, key(strconv.Itoa(i)), "d1", long); err != nil || r.Record == nil {
				t.Errorf("record %d = %+v, %v; want it kept and replayed", i, r, err)
			}
		}
		mustOwn(t, s, store.Key{Principal: "bob", Tool: "create_order", RequestID: "new"}, "d1", long)
		w.SetWindow(short)
		time.Sleep(2 * short) // the records age past the window
		tok := mustOwn(t, s, key("new"), "d1", long)
		if err := s.Complete(ctx, key("new"), tok, store.Record{Digest: "d1", ExecutionID: "alice-new"}, long); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Begin(ctx, key("0"), "d1", long); err != nil || !r.Owned {
			t.Errorf("the oldest record, past the window = %+v, %v; want it evicted for the new one", r, err)
		}
	})

	t.Run("a record expires after its TTL", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1"}, short); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(patient)
		for {
			r, err := s.Begin(ctx, key("1"), "d1", long)
			if err != nil {
				t.Fatal(err)
			}
			if r.Owned {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the record outlived its TTL")
			}
			time.Sleep(short / 2)
		}
	})

	testFences(t, newStore, key)
	testPing(t, newStore)
	testFind(t, newStore, key)
	testNonces(t, newStore)
}

// abandon makes the holder of a reservation die, or skips the test.
func abandon(t *testing.T, s store.IdempotencyStore, key store.Key, token string) {
	t.Helper()
	a, ok := s.(store.ReservationAbandoner)
	if !ok {
		t.Skip("the store's reservations have no lease to lapse (it does not implement store.ReservationAbandoner)")
	}
	a.AbandonReservation(key, token)
}

func mustOwn(t *testing.T, s store.IdempotencyStore, key store.Key, digest string, lease time.Duration) string {
	t.Helper()
	r, err := s.Begin(context.Background(), key, digest, lease)
	if err != nil || !r.Owned {
		t.Fatalf("Begin(%+v) = %+v, %v; want owned", key, r, err)
	}
	return r.Token
}

// Abandoner is an optional capability of a [store.Lock] or a [store.Slot]
// with a lease: Abandon stops renewing it without releasing it, as the
// death of its host would. TestLocker and TestConcurrencyLimiter use it to
// check that the lock or slot of a host that died frees itself when its
// lease runs out; those without it (in-process locks and slots, whose
// holder cannot vanish without returning) skip that case.
type Abandoner interface {
	Abandon()
}

// TestLocker runs the locker suite. newLocker must return a fresh locker
// each time, whose lock names no other locker shares.
func TestLocker(t *testing.T, newLocker func(t *testing.T) store.Locker) {
	ctx := context.Background()

	t.Run("a held lock blocks others until released", func(t *testing.T) {
		l := newLocker(t)
		first, err := l.Acquire(ctx, "tool", long)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, short)
		defer cancel()
		if _, err := l.Acquire(cctx, "tool", long); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Acquire = %v; want the context's error", err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second, err := l.Acquire(ctx, "tool", long)
		if err != nil {
			t.Fatal(err)
		}
		if second.Fence() <= first.Fence() {
			t.Fatalf("fence went from %d to %d; it must grow", first.Fence(), second.Fence())
		}
		_ = second.Release(ctx)
	})

	t.Run("releasing twice is harmless", func(t *testing.T) {
		l := newLocker(t)
		h, err := l.Acquire(ctx, "tool", long)
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Release(ctx)
		_ = h.Release(ctx)
		h2, err := l.Acquire(ctx, "tool", long)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, short)
		defer cancel()
		if _, err := l.Acquire(cctx, "tool", long); err == nil {
			t.Fatal("a double release let two holders in")
		}
		_ = h2.Release(ctx)
	})

	t.Run("names are independent", func(t *testing.T) {
		l := newLocker(t)
		a, err := l.Acquire(ctx, "a", long)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, patient)
		defer cancel()
		b, err := l.Acquire(cctx, "b", long)
		if err != nil {
			t.Fatalf("lock b waited for lock a: %v", err)
		}
		_ = a.Release(ctx)
		_ = b.Release(ctx)
	})

	t.Run("mutual exclusion under contention", func(t *testing.T) {
		l := newLocker(t)
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 8 {
					h, err := l.Acquire(ctx, "tool", long)
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(100 * time.Microsecond)
					inside.Add(-1)
					_ = h.Release(ctx)
				}
			})
		}
		wg.Wait()
		if m := most.Load(); m != 1 {
			t.Fatalf("%d holders at once; want 1", m)
		}
	})

	t.Run("a release wakes a waiter", func(t *testing.T) {
		l := newLocker(t)
		first, err := l.Acquire(ctx, "tool", long)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan store.Lock, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, patient)
			defer cancel()
			h, err := l.Acquire(cctx, "tool", long)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		time.Sleep(short) // let it wait
		released := time.Now()
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h := <-got
		if h == nil {
			return
		}
		if d := time.Since(released); d > patient/2 {
			t.Errorf("the waiter got the lock %v after its release", d)
		}
		_ = h.Release(ctx)
	})

	t.Run("a held lock outlives its lease while its holder lives", func(t *testing.T) {
		l := newLocker(t)
		const lease = 10 * short // long enough that a busy machine renews it in time
		h, err := l.Acquire(ctx, "tool", lease)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * lease) // the lease is renewed meanwhile
		cctx, cancel := context.WithTimeout(ctx, brief)
		defer cancel()
		if other, err := l.Acquire(cctx, "tool", long); err == nil {
			_ = other.Release(ctx)
			t.Fatal("a second holder got the lock while the first was alive")
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release of a renewed lock = %v", err)
		}
	})

	t.Run("a lapsed lease frees the lock", func(t *testing.T) {
		l := newLocker(t)
		dead, err := l.Acquire(ctx, "tool", short)
		if err != nil {
			t.Fatal(err)
		}
		a, ok := dead.(Abandoner)
		if !ok {
			_ = dead.Release(ctx)
			t.Skip("the locker's locks have no lease to lapse (they do not implement storetest.Abandoner)")
		}
		a.Abandon() // its host died
		cctx, cancel := context.WithTimeout(ctx, patient)
		defer cancel()
		next, err := l.Acquire(cctx, "tool", long)
		if err != nil {
			t.Fatalf("the lock of a dead holder was not freed by its lease: %v", err)
		}
		if next.Fence() <= dead.Fence() {
			t.Errorf("fence went from %d to %d; it must grow", dead.Fence(), next.Fence())
		}
		if err := dead.Release(ctx); err == nil {
			t.Error("Release by the holder whose lease lapsed succeeded")
		}
		bctx, bcancel := context.WithTimeout(ctx, brief)
		defer bcancel()
		if other, err := l.Acquire(bctx, "tool", long); err == nil {
			_ = other.Release(ctx)
			t.Fatal("the late Release of the dead holder freed the new holder's lock")
		}
		_ = next.Release(ctx)
	})
}
