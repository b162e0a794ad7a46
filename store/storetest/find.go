package storetest

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// testFind checks the lookup of a key ([store.Finder]): it reports what
// Begin would, and reserves nothing.
func testFind(t *testing.T, newStore func(t *testing.T, limit int) store.IdempotencyStore, key func(string) store.Key) {
	ctx := context.Background()
	finder := func(t *testing.T) (store.IdempotencyStore, store.Finder) {
		s := newStore(t, 0)
		f, ok := s.(store.Finder)
		if !ok {
			t.Skip("the store does not implement store.Finder")
		}
		return s, f
	}
	find := func(t *testing.T, f store.Finder, k store.Key) (store.Reservation, bool) {
		t.Helper()
		r, found, err := f.Find(ctx, k)
		if err != nil {
			t.Fatalf("Find(%+v) = %v", k, err)
		}
		if r.Owned || r.Token != "" {
			t.Fatalf("Find(%+v) = %+v; a lookup owns nothing", k, r)
		}
		return r, found
	}

	t.Run("Find of a free key finds nothing and reserves nothing", func(t *testing.T) {
		s, f := finder(t)
		if r, found := find(t, f, key("1")); found || r.Record != nil {
			t.Fatalf("Find of a free key = %+v, %v; want nothing", r, found)
		}
		mustOwn(t, s, key("1"), "d1", long)
	})

	t.Run("Find sees an execution in flight without taking it", func(t *testing.T) {
		s, f := finder(t)
		token := mustOwn(t, s, key("1"), "d1", long)
		if r, found := find(t, f, key("1")); !found || r.Digest != "d1" || r.Record != nil {
			t.Fatalf("Find in flight = %+v, %v; want its digest and no record", r, found)
		}
		if err := s.Release(ctx, key("1"), token); err != nil {
			t.Fatalf("Release after Find = %v; the reservation must still be the holder's", err)
		}
		if r, found := find(t, f, key("1")); found {
			t.Fatalf("Find after Release = %+v; want nothing", r)
		}
	})

	t.Run("Find returns a copy of the record", func(t *testing.T) {
		s, f := finder(t)
		token := mustOwn(t, s, key("1"), "d1", long)
		rec := store.Record{Digest: "d1", ExecutionID: "e1", Output: []byte(`{"id":1}`)}
		if err := s.Complete(ctx, key("1"), token, rec, long); err != nil {
			t.Fatal(err)
		}
		r, found := find(t, f, key("1"))
		if !found || r.Digest != "d1" || r.Record == nil || r.Record.ExecutionID != "e1" || !bytes.Equal(r.Record.Output, rec.Output) {
			t.Fatalf("Find of a record = %+v, %v; want the record of e1", r, found)
		}
		r.Record.Output[0] = 'x'
		if again, _ := find(t, f, key("1")); again.Record == nil || !bytes.Equal(again.Record.Output, rec.Output) {
			t.Fatalf("changing what Find returned changed the record: %+v", again.Record)
		}
		if b, err := s.Begin(ctx, key("1"), "d1", long); err != nil || b.Owned || b.Record == nil {
			t.Fatalf("Begin after Find = %+v, %v; want the record", b, err)
		}
	})

	t.Run("Find does not find an expired record", func(t *testing.T) {
		s, f := finder(t)
		token := mustOwn(t, s, key("1"), "d1", long)
		if err := s.Complete(ctx, key("1"), token, store.Record{Digest: "d1", ExecutionID: "e1"}, short); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(patient)
		for {
			if _, found := find(t, f, key("1")); !found {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("Find still finds the record after its TTL")
			}
			time.Sleep(short / 2)
		}
	})
}

// testNonces checks one-time nonces ([store.NonceStore]).
func testNonces(t *testing.T, newStore func(t *testing.T, limit int) store.IdempotencyStore) {
	ctx := context.Background()
	nonces := func(t *testing.T) store.NonceStore {
		n, ok := newStore(t, 0).(store.NonceStore)
		if !ok {
			t.Skip("the store does not implement store.NonceStore")
		}
		return n
	}
	use := func(t *testing.T, n store.NonceStore, principal, nonce string, ttl time.Duration) bool {
		t.Helper()
		first, err := n.UseNonce(ctx, principal, nonce, ttl)
		if err != nil {
			t.Fatalf("UseNonce(%q, %q) = %v", principal, nonce, err)
		}
		return first
	}

	t.Run("a nonce is used once, per principal", func(t *testing.T) {
		n := nonces(t)
		if !use(t, n, "alice", "n1", long) {
			t.Fatal("the first use of a nonce = false; want true")
		}
		if use(t, n, "alice", "n1", long) {
			t.Fatal("the second use of a nonce = true; want false")
		}
		if !use(t, n, "alice", "n2", long) {
			t.Fatal("another nonce = false; want true")
		}
		if !use(t, n, "bob", "n1", long) {
			t.Fatal("another principal's use of the nonce = false; a nonce of alice is not bob's")
		}
	})

	t.Run("one of many concurrent uses of a nonce is the first", func(t *testing.T) {
		n := nonces(t)
		var firsts atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if ok, err := n.UseNonce(ctx, "alice", "n1", long); err == nil && ok {
					firsts.Add(1)
				}
			})
		}
		wg.Wait()
		if got := firsts.Load(); got != 1 {
			t.Fatalf("%d of 16 concurrent uses were the first; want exactly 1", got)
		}
	})

	t.Run("a used nonce is kept for its TTL, then forgotten", func(t *testing.T) {
		n := nonces(t)
		start := time.Now()
		if !use(t, n, "alice", "n1", short) {
			t.Fatal("the first use of a nonce = false; want true")
		}
		deadline := start.Add(patient)
		for !use(t, n, "alice", "n1", short) {
			if time.Now().After(deadline) {
				t.Fatal("the nonce is still kept long after its TTL")
			}
			time.Sleep(short / 4)
		}
		if took := time.Since(start); took < short {
			t.Fatalf("the nonce was forgotten after %v, before its TTL of %v", took, short)
		}
	})
}
