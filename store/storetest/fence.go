package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/carmy-dev/carmy/store"
)

// testFences checks the fences of reservations, the check of a
// reservation ([store.Checker]) and the record of an outcome whose key
// nobody took.
func testFences(t *testing.T, newStore func(t *testing.T, limit int) store.IdempotencyStore, key func(string) store.Key) {
	ctx := context.Background()

	t.Run("fences grow with every reservation of a key", func(t *testing.T) {
		s := newStore(t, 0)
		var last uint64
		for i := range 3 {
			r, err := s.Begin(ctx, key("1"), "d1", long)
			if err != nil || !r.Owned {
				t.Fatalf("Begin = %+v, %v; want owned", r, err)
			}
			if r.Fence <= last {
				t.Fatalf("reservation %d has fence %d after %d; want it to grow", i, r.Fence, last)
			}
			last = r.Fence
			if err := s.Release(ctx, key("1"), r.Token); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("a lapsed reservation's successor has a higher fence and the holder's check fails", func(t *testing.T) {
		s := newStore(t, 0)
		first, err := s.Begin(ctx, key("1"), "d1", short)
		if err != nil || !first.Owned {
			t.Fatalf("Begin = %+v, %v", first, err)
		}
		abandon(t, s, key("1"), first.Token)
		next := ownAfterLapse(t, s, key("1"))
		if next.Fence <= first.Fence {
			t.Fatalf("the successor's fence %d is not above the lapsed reservation's %d", next.Fence, first.Fence)
		}
		c, ok := s.(store.Checker)
		if !ok {
			return
		}
		if err := c.Check(ctx, key("1"), first.Token); !errors.Is(err, store.ErrLostReservation) {
			t.Fatalf("Check by the holder whose lease lapsed = %v; want ErrLostReservation", err)
		}
		if err := c.Check(ctx, key("1"), next.Token); err != nil {
			t.Fatalf("Check by the holder = %v; want nil", err)
		}
	})

	t.Run("Check holds until the reservation ends", func(t *testing.T) {
		s := newStore(t, 0)
		c, ok := s.(store.Checker)
		if !ok {
			t.Skip("the store does not implement store.Checker")
		}
		tok := mustOwn(t, s, key("1"), "d1", long)
		if err := c.Check(ctx, key("1"), tok); err != nil {
			t.Fatalf("Check of a held reservation = %v", err)
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1"}, long); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(ctx, key("1"), tok); !errors.Is(err, store.ErrLostReservation) {
			t.Fatalf("Check after Complete = %v; want ErrLostReservation", err)
		}
	})

	t.Run("an outcome whose key nobody took is recorded", func(t *testing.T) {
		s := newStore(t, 0)
		tok := mustOwn(t, s, key("1"), "d1", short)
		abandon(t, s, key("1"), tok) // its host stops, past its lease
		wctx, cancel := context.WithTimeout(ctx, patient)
		defer cancel()
		if err := s.Wait(wctx, key("1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, key("1"), tok, store.Record{Digest: "d1", ExecutionID: "e1"}, long); err != nil {
			t.Fatalf("Complete of a lapsed reservation whose key nobody took = %v; want it recorded", err)
		}
		if r, err := s.Begin(ctx, key("1"), "d1", long); err != nil || r.Record == nil || r.Record.ExecutionID != "e1" {
			t.Fatalf("Begin = %+v, %v; want the outcome recorded", r, err)
		}
	})
}

// ownAfterLapse reserves key once the lease of its holder has lapsed.
func ownAfterLapse(t *testing.T, s store.IdempotencyStore, k store.Key) store.Reservation {
	t.Helper()
	wctx, cancel := context.WithTimeout(context.Background(), patient)
	defer cancel()
	for {
		if err := s.Wait(wctx, k); err != nil {
			t.Fatalf("the key was still held long after its lease: %v", err)
		}
		r, err := s.Begin(wctx, k, "d2", long)
		if err != nil {
			t.Fatal(err)
		}
		if r.Owned {
			return r
		}
	}
}
