package store_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(t *testing.T) store.IdempotencyStore {
		s := store.NewMemoryStore(0)
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
		return s
	})
}

func TestMemoryLockerConformance(t *testing.T) {
	storetest.TestLocker(t, func(*testing.T) store.Locker { return store.NewMemoryLocker() })
}

// memLen reads the number of records and reservations a memory store holds.
func memLen(s store.IdempotencyStore) int { return s.(interface{ Len() int }).Len() }

func TestMemoryStoreEvictsTheOldestRecordsButNoReservation(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryStore(2)
	defer s.(io.Closer).Close()
	key := func(id string) store.Key { return store.Key{Tool: "t", RequestID: id} }
	begin := func(id string) store.Reservation {
		t.Helper()
		r, err := s.Begin(ctx, key(id), "d", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	inFlight := begin("in-flight")
	for _, id := range []string{"1", "2", "3"} {
		r := begin(id)
		if err := s.Complete(ctx, key(id), r.Token, store.Record{Digest: "d", ExecutionID: id}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n := memLen(s); n != 3 {
		t.Fatalf("Len = %d; want 2 records and the reservation", n)
	}
	if r := begin("1"); !r.Owned {
		t.Fatalf("record 1 = %+v; want it evicted, the oldest of three over a bound of two", r)
	}
	if r := begin("3"); r.Record == nil || r.Record.ExecutionID != "3" {
		t.Fatalf("record 3 = %+v; want it kept", r)
	}
	if r := begin("in-flight"); r.Owned || r.Record != nil {
		t.Fatalf("reservation = %+v; want it still in flight", r)
	}
	if err := s.Release(ctx, key("in-flight"), inFlight.Token); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryStoreReturnsToEmptyAfterTheTTL(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryStore(0)
	defer s.(io.Closer).Close()
	for _, id := range []string{"1", "2"} {
		k := store.Key{Tool: "t", RequestID: id}
		r, err := s.Begin(ctx, k, "d", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, k, r.Token, store.Record{Digest: "d"}, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for memLen(s) != 0 { // nobody calls the store: only its sweeper can empty it
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d long after the TTL; want the sweeper to drop the expired records", memLen(s))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpen(t *testing.T) {
	mem, locker := store.NewMemoryStore(0), store.NewMemoryLocker()
	defer mem.(io.Closer).Close()
	var opened string
	store.Register("memtest", func(url string) (store.IdempotencyStore, store.Locker, error) {
		opened = url
		return mem, locker, nil
	})
	s, l, err := store.Open("memtest://somewhere/0")
	if err != nil || s != mem || l != locker || opened != "memtest://somewhere/0" {
		t.Fatalf("Open = %v, %v, %v (opener saw %q); want the registered opener's store and locker", s, l, err, opened)
	}
	for _, url := range []string{"nowhere://x", "no-scheme"} {
		if _, _, err := store.Open(url); err == nil {
			t.Errorf("Open(%q) succeeded; want an error", url)
		}
	}
}
