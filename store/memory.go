package store

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// memoryStore is the in-memory [IdempotencyStore]: at most limit records,
// the oldest evicted first, and a sweeper that drops expired records so
// that memory returns to its baseline when traffic stops. The records list
// and the entries map are the only bookkeeping, so a bound per principal
// is one more map from principal to its own list.
type memoryStore struct {
	mu      sync.Mutex
	entries map[Key]*entry
	records list.List // of *entry, oldest first
	limit   int
	sweep   time.Duration
	now     func() time.Time

	sweeping, closed bool
	stop             chan struct{}
	stopOnce         sync.Once
	swept            sync.WaitGroup
}

type entry struct {
	key     Key
	digest  string
	token   string        // of the reservation; "" once recorded
	lease   time.Time     // when an in-flight reservation lapses
	done    chan struct{} // closed when the reservation ends
	record  *Record
	expires time.Time
	elem    *list.Element // in records
}

// NewMemoryStore returns the in-memory [IdempotencyStore] that a builder
// uses by default: records of this process only, at most limit of them
// (limit <= 0 means [DefaultLimit]), the oldest evicted first. It keeps
// copies of the records it is given and hands out copies, as a store that
// serializes them does. While it holds records, a goroutine drops the
// expired ones, every quarter of the shortest TTL seen (at least every
// minute); it stops when the store is empty or closed, so an idle store
// holds no goroutine. The store implements io.Closer, to stop it, and
// Len() int, the records and reservations it holds, for load tests that
// check its bound.
func NewMemoryStore(limit int) IdempotencyStore {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &memoryStore{entries: map[Key]*entry{}, limit: limit, sweep: time.Minute, now: time.Now, stop: make(chan struct{})}
}

func (s *memoryStore) sweeper(every time.Duration) {
	defer s.swept.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		s.expire(s.now())
		if s.records.Len() == 0 {
			s.sweeping = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// Close stops the sweeper. The store keeps working, expiring records as
// it is used.
func (s *memoryStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopOnce.Do(func() { close(s.stop) })
	s.swept.Wait()
	return nil
}

// Len returns the number of records and reservations held.
func (s *memoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// expire drops expired records. Records are kept in completion order and,
// with one TTL, expire in that order; a record with a shorter TTL behind a
// longer one waits for it, which only delays its removal.
func (s *memoryStore) expire(now time.Time) {
	for e := s.records.Front(); e != nil; e = s.records.Front() {
		en := e.Value.(*entry)
		if now.Before(en.expires) {
			return
		}
		s.drop(en)
	}
}

func (s *memoryStore) drop(en *entry) {
	if en.elem != nil {
		s.records.Remove(en.elem)
		en.elem = nil
	}
	if s.entries[en.key] == en {
		delete(s.entries, en.key)
	}
}

// Begin reserves key unless it is in flight or recorded.
func (s *memoryStore) Begin(_ context.Context, key Key, digest string, lease time.Duration) (Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if en, ok := s.entries[key]; ok {
		switch {
		case en.record != nil && now.Before(en.expires):
			return Reservation{Digest: en.digest, Record: en.record.clone()}, nil
		case en.record == nil && now.Before(en.lease):
			return Reservation{Digest: en.digest}, nil
		}
		// An expired record, or a reservation whose holder vanished.
		if en.record == nil {
			close(en.done)
		}
		s.drop(en)
	}
	en := &entry{key: key, digest: digest, token: newToken(), lease: now.Add(lease), done: make(chan struct{})}
	s.entries[key] = en
	return Reservation{Owned: true, Token: en.token}, nil
}

// Wait returns once key is not in flight, or ctx is done.
func (s *memoryStore) Wait(ctx context.Context, key Key) error {
	s.mu.Lock()
	en, ok := s.entries[key]
	if !ok || en.record != nil {
		s.mu.Unlock()
		return nil
	}
	done, lapse := en.done, en.lease.Sub(s.now())
	s.mu.Unlock()
	timer := time.NewTimer(max(lapse, 0))
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C: // the holder's lease ran out; Begin will take over
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Complete replaces the reservation held by token with rec, for ttl.
func (s *memoryStore) Complete(_ context.Context, key Key, token string, rec Record, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.entries[key]
	if !ok || en.token != token || en.record != nil {
		return ErrLostReservation
	}
	now := s.now()
	s.expire(now)
	en.record, en.token, en.expires = rec.clone(), "", now.Add(ttl)
	en.elem = s.records.PushBack(en)
	close(en.done)
	for s.records.Len() > s.limit {
		s.drop(s.records.Front().Value.(*entry))
	}
	s.sweep = min(s.sweep, max(ttl/4, 10*time.Millisecond))
	if !s.sweeping && !s.closed {
		s.sweeping = true
		s.swept.Add(1)
		go s.sweeper(s.sweep)
	}
	return nil
}

// Release drops the reservation held by token.
func (s *memoryStore) Release(_ context.Context, key Key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.entries[key]
	if !ok || en.token != token || en.record != nil {
		return ErrLostReservation
	}
	close(en.done)
	s.drop(en)
	return nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clone returns a copy of r that shares no memory with it.
func (r *Record) clone() *Record {
	c := *r
	c.Output, c.Error = bytes.Clone(r.Output), bytes.Clone(r.Error)
	return &c
}

// memoryLocker is the in-memory [Locker]: one lock per name, with a fence
// counter.
type memoryLocker struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	turn  chan struct{} // holds one token while the lock is held
	fence uint64
}

// NewMemoryLocker returns the in-memory [Locker] that a builder uses by
// default: locks of this process only. In one process a holder cannot
// vanish without returning, so its locks have no lease: Acquire ignores
// its lease argument.
func NewMemoryLocker() Locker { return &memoryLocker{locks: map[string]*lock{}} }

// Acquire waits for the lock of that name.
func (l *memoryLocker) Acquire(ctx context.Context, name string, _ time.Duration) (Lock, error) {
	l.mu.Lock()
	lk, ok := l.locks[name]
	if !ok {
		lk = &lock{turn: make(chan struct{}, 1)}
		l.locks[name] = lk
	}
	l.mu.Unlock()
	select {
	case lk.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	lk.fence++
	h := &held{lk: lk, fence: lk.fence}
	l.mu.Unlock()
	return h, nil
}

// held is a held in-memory lock.
type held struct {
	lk    *lock
	fence uint64
	once  sync.Once
}

// Fence returns the acquisition's number.
func (h *held) Fence() uint64 { return h.fence }

// Release gives the lock up; a second call does nothing.
func (h *held) Release(context.Context) error {
	h.once.Do(func() { <-h.lk.turn })
	return nil
}
