// Package memstore holds carmy's in-memory idempotency store and locker,
// for a single process.
package memstore

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Store is the in-memory idempotency store, keyed by K with records of
// type R: at most limit records, the oldest evicted first, and a sweeper
// that drops expired records so that memory returns to its baseline when
// traffic stops. Its methods follow carmy.IdempotencyStore.
type Store[K comparable, R any] struct {
	mu      sync.Mutex
	entries map[K]*entry[K, R]
	records list.List // of *entry, oldest first
	limit   int
	sweep   time.Duration
	now     func() time.Time

	sweeping, closed bool
	stop             chan struct{}
	stopOnce         sync.Once
	swept            sync.WaitGroup
}

// Reservation is what Begin found or took.
type Reservation[R any] struct {
	Owned  bool
	Token  string
	Digest string
	Record *R
}

// ErrLostReservation reports a Complete or Release whose reservation is
// gone: its lease ran out and another execution took the key.
var ErrLostReservation = errors.New("the idempotency reservation was lost: its lease ran out before the execution finished")

type entry[K comparable, R any] struct {
	key     K
	digest  string
	token   string        // of the reservation; "" once recorded
	lease   time.Time     // when an in-flight reservation lapses
	done    chan struct{} // closed when the reservation ends
	record  *R
	expires time.Time
	elem    *list.Element // in records
}

// NewStore returns a store holding at most limit records. While it holds
// records, a sweeper drops the expired ones, every quarter of the shortest
// TTL seen (at least every minute); it stops when the store is empty or
// closed, so an idle store holds no goroutine.
func NewStore[K comparable, R any](limit int) *Store[K, R] {
	return &Store[K, R]{entries: map[K]*entry[K, R]{}, limit: limit, sweep: time.Minute, now: time.Now, stop: make(chan struct{})}
}

func (s *Store[K, R]) sweeper(every time.Duration) {
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
func (s *Store[K, R]) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopOnce.Do(func() { close(s.stop) })
	s.swept.Wait()
	return nil
}

// Len returns the number of records and reservations held.
func (s *Store[K, R]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// expire drops expired records. Records are kept in completion order and,
// with one TTL, expire in that order; a record with a shorter TTL behind a
// longer one waits for it, which only delays its removal.
func (s *Store[K, R]) expire(now time.Time) {
	for e := s.records.Front(); e != nil; e = s.records.Front() {
		en := e.Value.(*entry[K, R])
		if now.Before(en.expires) {
			return
		}
		s.drop(en)
	}
}

func (s *Store[K, R]) drop(en *entry[K, R]) {
	if en.elem != nil {
		s.records.Remove(en.elem)
		en.elem = nil
	}
	if s.entries[en.key] == en {
		delete(s.entries, en.key)
	}
}

// Begin reserves key unless it is in flight or recorded.
func (s *Store[K, R]) Begin(key K, digest string, lease time.Duration) Reservation[R] {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if en, ok := s.entries[key]; ok {
		switch {
		case en.record != nil && now.Before(en.expires):
			return Reservation[R]{Digest: en.digest, Record: en.record}
		case en.record == nil && now.Before(en.lease):
			return Reservation[R]{Digest: en.digest}
		}
		// An expired record, or a reservation whose holder vanished.
		if en.record == nil {
			close(en.done)
		}
		s.drop(en)
	}
	en := &entry[K, R]{key: key, digest: digest, token: newToken(), lease: now.Add(lease), done: make(chan struct{})}
	s.entries[key] = en
	return Reservation[R]{Owned: true, Token: en.token}
}

// Wait returns once key is not in flight, or ctx is done.
func (s *Store[K, R]) Wait(ctx context.Context, key K) error {
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
func (s *Store[K, R]) Complete(key K, token string, rec R, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.entries[key]
	if !ok || en.token != token || en.record != nil {
		return ErrLostReservation
	}
	now := s.now()
	s.expire(now)
	r := rec
	en.record, en.token, en.expires = &r, "", now.Add(ttl)
	en.elem = s.records.PushBack(en)
	close(en.done)
	for s.records.Len() > s.limit {
		s.drop(s.records.Front().Value.(*entry[K, R]))
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
func (s *Store[K, R]) Release(key K, token string) error {
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

// Locker is the in-memory lock service: one lock per name, with a fence
// counter. Its methods follow carmy.Locker.
type Locker struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	turn  chan struct{} // holds one token while the lock is held
	fence uint64
}

// NewLocker returns an empty locker.
func NewLocker() *Locker { return &Locker{locks: map[string]*lock{}} }

// Acquire waits for the lock of that name. In one process a holder cannot
// vanish without returning, so there is no lease to free the lock.
func (l *Locker) Acquire(ctx context.Context, name string) (*Held, error) {
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
	h := &Held{lk: lk, fence: lk.fence}
	l.mu.Unlock()
	return h, nil
}

// Held is a held lock.
type Held struct {
	lk    *lock
	fence uint64
	once  sync.Once
}

// Fence returns the acquisition's number.
func (h *Held) Fence() uint64 { return h.fence }

// Release gives the lock up; a second call does nothing.
func (h *Held) Release(context.Context) error {
	h.once.Do(func() { <-h.lk.turn })
	return nil
}
