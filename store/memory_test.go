package store_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(t *testing.T, limit int) store.IdempotencyStore {
		s := store.NewMemoryStore(limit, 0)
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
		return s
	})
}

func TestMemoryLockerConformance(t *testing.T) {
	storetest.TestLocker(t, func(*testing.T) store.Locker { return store.NewMemoryLocker() })
}

// memLen reads the number of records and reservations a memory store holds.
func memLen(s store.IdempotencyStore) int { return s.(interface{ Len() int }).Len() }

// memStore is a memory store with its helpers.
type memStore struct {
	t *testing.T
	store.IdempotencyStore
}

// newMem returns a memory store whose bounds evict records of any age
// (window 0), for the tests of eviction; the window has its own.
func newMem(t *testing.T, limit, global int) memStore {
	s := store.NewMemoryStore(limit, global)
	s.(store.Windowed).SetWindow(0)
	t.Cleanup(func() { _ = s.(io.Closer).Close() })
	return memStore{t, s}
}

func (m memStore) begin(k store.Key) store.Reservation {
	m.t.Helper()
	r, err := m.Begin(context.Background(), k, "d", time.Minute)
	if err != nil {
		m.t.Fatal(err)
	}
	return r
}

// record runs and records key, which must be free.
func (m memStore) record(k store.Key) {
	m.t.Helper()
	r := m.begin(k)
	if !r.Owned {
		m.t.Fatalf("Begin(%+v) = %+v; want it free", k, r)
	}
	if err := m.Complete(context.Background(), k, r.Token, store.Record{Digest: "d", ExecutionID: k.Principal + "/" + k.RequestID}, time.Minute); err != nil {
		m.t.Fatal(err)
	}
}

// recorded reports whether key holds its record.
func (m memStore) recorded(k store.Key) bool {
	m.t.Helper()
	r := m.begin(k)
	if r.Owned {
		_ = m.Release(context.Background(), k, r.Token)
	}
	return r.Record != nil && r.Record.ExecutionID == k.Principal+"/"+k.RequestID
}

func key(principal string, i int) store.Key {
	return store.Key{Principal: principal, Tool: "t", RequestID: strconv.Itoa(i)}
}

func TestMemoryStoreEvictsAPrincipalsOldestRecordsButNoReservation(t *testing.T) {
	s := newMem(t, 2, 0)
	inFlight := s.begin(key("a", -1))
	for i := range 3 {
		s.record(key("a", i))
	}
	s.record(key("b", 0))
	if n := memLen(s.IdempotencyStore); n != 4 {
		t.Fatalf("Len = %d; want a's 2 records, b's and a's reservation", n)
	}
	for k, want := range map[store.Key]bool{key("a", 0): false, key("a", 1): true, key("a", 2): true, key("b", 0): true} {
		if got := s.recorded(k); got != want {
			t.Errorf("%+v recorded = %v; want %v (a's oldest evicted by a's bound of 2, nobody else's)", k, got, want)
		}
	}
	if r := s.begin(key("a", -1)); r.Owned || r.Record != nil {
		t.Fatalf("reservation = %+v; want it still in flight", r)
	}
	if err := s.Release(context.Background(), key("a", -1), inFlight.Token); err != nil {
		t.Fatal(err)
	}
}

// At the global cap, the records go from whoever holds the most: a
// principal that floods the store loses its own, however many principals
// flood it, and the quiet ones keep theirs.
func TestMemoryStoreGlobalCapEvictsTheLargestHolder(t *testing.T) {
	const global = 100
	s := newMem(t, 1_000, global)
	for i := range 10 {
		s.record(key("quiet", i))
	}
	for i := range 5 * global {
		s.record(key("flood-1", i))
		s.record(key("flood-2", i))
	}
	if n := memLen(s.IdempotencyStore); n != global {
		t.Fatalf("Len = %d; want the global cap, %d", n, global)
	}
	for i := range 10 {
		if !s.recorded(key("quiet", i)) {
			t.Errorf("the quiet principal's record %d was evicted by the others' flood", i)
		}
	}
	for _, p := range []string{"flood-1", "flood-2"} {
		if !s.recorded(key(p, 5*global-1)) {
			t.Errorf("%s's newest record was evicted; the oldest go first", p)
		}
		if s.recorded(key(p, 0)) {
			t.Errorf("%s's oldest record outlived the cap", p)
		}
	}
}

// A reservation has no lease in memory: its holder lives as long as the
// store, so it waits as long as it needs for its tool's turn and runs.
func TestMemoryStoreReservationIgnoresItsLease(t *testing.T) {
	s := newMem(t, 0, 0)
	r, err := s.Begin(context.Background(), key("a", 1), "d", time.Nanosecond)
	if err != nil || !r.Owned {
		t.Fatal(r, err)
	}
	time.Sleep(time.Millisecond)
	if again := s.begin(key("a", 1)); again.Owned {
		t.Fatal("a reservation lapsed with its holder alive")
	}
}

func TestMemoryStoreReturnsToEmptyAfterTheTTL(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryStore(0, 0)
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
	mem, locker := store.NewMemoryStore(0, 0), store.NewMemoryLocker()
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

// TestOpenErrors: a URL that no store serves gets an error that says what
// to do and never repeats the URL, which may hold a password.
func TestOpenErrors(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"user:secret@cache:6379", "has no scheme"},
		{"nosuch://user:secret@cache", `no store is registered for "nosuch" URLs`},
	} {
		_, _, err := store.Open(tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) = %v; want %q, without the password", tt.url, err, tt.want)
		}
	}
}

// At the global cap with only records younger than the window, the
// principals holding their fair share or more are refused, and a quiet
// principal is still served, past the cap: nobody's young record is
// evicted.
func TestMemoryStoreGlobalCapKeepsTheWindow(t *testing.T) {
	const global = 20
	s := newMem(t, 1_000, global)
	s.IdempotencyStore.(store.Windowed).SetWindow(time.Hour)
	for i := range global {
		s.record(key("flood", i))
	}
	_, err := s.Begin(context.Background(), key("flood", global), "d", time.Minute)
	if !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("Begin of the flooding principal at the cap = %v; want ErrCapacity", err)
	}
	s.record(key("quiet", 0))
	for i := range global {
		if !s.recorded(key("flood", i)) {
			t.Errorf("record %d, younger than the window, was evicted", i)
		}
	}
	if n := memLen(s.IdempotencyStore); n != global+1 {
		t.Fatalf("Len = %d; want %d: the quiet principal's record past the cap", n, global+1)
	}
}
