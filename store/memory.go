package store

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// memoryStore is the in-memory [IdempotencyStore]. Every record is in two
// queues, oldest first: the store's, by which records expire, and its
// principal's, by which a principal over its limit loses its oldest. A heap
// of the principals by the records they hold finds whom the global cap
// evicts from: the largest holder, who always holds at least its fair share
// (the cap over the number of principals), so a principal under its fair
// share never loses a record to the cap. In-flight reservations are in no
// queue: they are never evicted and never lapse, since their holder cannot
// die without this process.
type memoryStore struct {
	mu            sync.Mutex
	entries       map[Key]*entry
	records       queue // every record, in completion order
	owners        map[string]*owner
	largest       owners // the principals holding records, by how many
	limit, global int
	window        time.Duration // no record younger than this is evicted
	fence         uint64        // the last reservation's fence
	sweep         time.Duration
	now           func() time.Time
	keys          sharedKeys

	sweeping, closed bool
	stop             chan struct{}
	stopOnce         sync.Once
	swept            sync.WaitGroup
}

type entry struct {
	key     Key
	digest  string
	token   string        // of the reservation; "" once recorded
	done    chan struct{} // closed when the reservation ends
	record  *Record
	kept    time.Time // when the record was made
	expires time.Time
	link    [2]struct{ prev, next *entry } // in the store's queue and its owner's
}

// The queues an entry is in, indexing entry.link.
const (
	inStore = iota
	inOwner
)

// queue is a list of records, oldest first, threaded through the entries
// themselves, so that a record costs no list node.
type queue struct {
	head, tail *entry
	n          int
	which      int // inStore or inOwner
}

func (q *queue) push(e *entry) {
	l := &e.link[q.which]
	l.prev, l.next = q.tail, nil
	if q.tail != nil {
		q.tail.link[q.which].next = e
	} else {
		q.head = e
	}
	q.tail = e
	q.n++
}

func (q *queue) remove(e *entry) {
	l := &e.link[q.which]
	if l.prev != nil {
		l.prev.link[q.which].next = l.next
	} else {
		q.head = l.next
	}
	if l.next != nil {
		l.next.link[q.which].prev = l.prev
	} else {
		q.tail = l.prev
	}
	l.prev, l.next = nil, nil
	q.n--
}

// owner is a principal that holds records.
type owner struct {
	principal string
	records   queue
	index     int // in the heap
}

// owners is a max-heap of principals by the records they hold.
type owners []*owner

func (h owners) Len() int           { return len(h) }
func (h owners) Less(i, j int) bool { return h[i].records.n > h[j].records.n }
func (h owners) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *owners) Push(x any) {
	o := x.(*owner)
	o.index = len(*h)
	*h = append(*h, o)
}
func (h *owners) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return o
}

// NewMemoryStore returns the in-memory [IdempotencyStore] that a builder
// uses by default: records of this process only, at most limit per
// principal (limit <= 0 means [DefaultLimit]) and at most globalLimit in
// all (globalLimit <= 0 means the larger of [DefaultGlobalLimit] and
// limit). A principal over its limit loses its own oldest record; at the
// global cap, the principal holding the most records loses its oldest, so
// that no principal's traffic evicts the records of one that holds fewer.
// No record younger than the window ([DefaultWindow]; see [Windowed]) is
// evicted: a principal at its limit with only younger records gets
// [ErrCapacity] for a new key; at the global cap with only younger records
// at the largest holder, the principals holding at least their fair share
// (the cap over the number of principals) get it, and those under it are
// still served, past the cap. In-flight reservations are never evicted and
// have no lease: the lease given to Begin is ignored, since their holder
// lives as long as this process.
//
// The store keeps copies of the records it is given and hands out copies,
// as a store that serializes them does. While it holds records, a
// goroutine drops the expired ones, every quarter of the shortest TTL seen
// (at least every minute); it stops when the store is empty or closed, so
// an idle store holds no goroutine. The store implements io.Closer, to stop
// it, and Len() int, the records and reservations it holds, for load tests
// that check its bound.
func NewMemoryStore(limit, globalLimit int) IdempotencyStore {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if globalLimit <= 0 {
		globalLimit = max(DefaultGlobalLimit, limit)
	}
	return &memoryStore{
		entries: map[Key]*entry{}, records: queue{which: inStore}, owners: map[string]*owner{},
		limit: limit, global: globalLimit, window: DefaultWindow, sweep: time.Minute, now: time.Now, stop: make(chan struct{}),
	}
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
		if s.records.n == 0 {
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

// SetWindow sets the age below which no record is evicted.
func (s *memoryStore) SetWindow(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = max(d, 0)
}

// young reports whether a principal's oldest record, en, is too young to
// be evicted.
func (s *memoryStore) young(en *entry, now time.Time) bool {
	return en != nil && now.Sub(en.kept) < s.window
}

// room reports [ErrCapacity] when a new record of principal would have to
// evict a record younger than the window.
func (s *memoryStore) room(principal string, now time.Time) error {
	s.expire(now)
	n := 0
	o := s.owners[principal]
	if o != nil {
		n = o.records.n
		if n >= s.limit && s.young(o.records.head, now) {
			return ErrCapacity
		}
	}
	if s.records.n >= s.global && s.young(s.largest[0].records.head, now) && n >= s.global/len(s.largest) {
		return ErrCapacity
	}
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
	for en := s.records.head; en != nil && !now.Before(en.expires); en = s.records.head {
		s.drop(en)
	}
}

// drop forgets a record, or a reservation whose record it is replaced by.
func (s *memoryStore) drop(en *entry) {
	if en.record != nil {
		s.records.remove(en)
		o := s.owners[en.key.Principal]
		o.records.remove(en)
		if o.records.n == 0 {
			heap.Remove(&s.largest, o.index)
			delete(s.owners, o.principal)
		} else {
			heap.Fix(&s.largest, o.index)
		}
	}
	if s.entries[en.key] == en {
		delete(s.entries, en.key)
	}
}

// keep queues a new record and evicts what its bounds no longer allow:
// its principal's oldest record beyond the principal's limit, then the
// largest holder's oldest beyond the global cap, each only once older
// than the window.
func (s *memoryStore) keep(en *entry, now time.Time) {
	s.records.push(en)
	o := s.owners[en.key.Principal]
	if o == nil {
		o = &owner{principal: en.key.Principal, records: queue{which: inOwner}}
		s.owners[o.principal] = o
		heap.Push(&s.largest, o)
	}
	o.records.push(en)
	heap.Fix(&s.largest, o.index)
	for o.records.n > s.limit && !s.young(o.records.head, now) {
		s.drop(o.records.head)
	}
	for s.records.n > s.global && !s.young(s.largest[0].records.head, now) {
		s.drop(s.largest[0].records.head)
	}
}

// Begin reserves key unless it is in flight or recorded. The lease is
// ignored: a reservation lasts until Complete or Release. Its fence is
// more than every fence before, and at least the clock in microseconds.
func (s *memoryStore) Begin(_ context.Context, key Key, digest string, _ time.Duration) (Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if en, ok := s.entries[key]; ok {
		switch {
		case en.record == nil:
			return Reservation{Digest: en.digest}, nil
		case s.now().Before(en.expires):
			return Reservation{Digest: en.digest, Record: en.record.clone()}, nil
		}
		s.drop(en) // an expired record
	}
	if err := s.room(key.Principal, s.now()); err != nil {
		return Reservation{}, err
	}
	en := &entry{key: key, digest: digest, token: newToken(), done: make(chan struct{})}
	s.entries[key] = en
	// The clock floor keeps fences growing across a restart of the
	// process, for a resource that remembers them longer than this store.
	s.fence = max(s.fence+1, uint64(max(time.Now().UnixMicro(), 0)))
	return Reservation{Owned: true, Token: en.token, Fence: s.fence}, nil
}

// Wait returns once key is not in flight, or ctx is done.
func (s *memoryStore) Wait(ctx context.Context, key Key) error {
	s.mu.Lock()
	en, ok := s.entries[key]
	if !ok || en.record != nil {
		s.mu.Unlock()
		return nil
	}
	done := en.done
	s.mu.Unlock()
	select {
	case <-done:
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
	en.record, en.token, en.kept, en.expires = rec.clone(), "", now, now.Add(ttl)
	close(en.done)
	en.done = nil // a record has no waiters
	s.keep(en, now)
	s.sweepWithin(ttl)
	return nil
}

// sweepWithin starts the sweeper, unless it runs, for a record kept for
// ttl. The caller holds mu.
func (s *memoryStore) sweepWithin(ttl time.Duration) {
	s.sweep = min(s.sweep, max(ttl/4, 10*time.Millisecond))
	if !s.sweeping && !s.closed {
		s.sweeping = true
		s.swept.Add(1)
		go s.sweeper(s.sweep)
	}
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
