package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LimitKey names whose calls of what a limit counts: one principal's calls
// of one tool. "" is a principal of its own, as in [Key].
type LimitKey struct {
	Principal string
	Tool      string
}

// Rate is a rate limit: Calls calls per Per, with a burst of Calls. It is
// enforced as the generic cell rate algorithm (GCRA): one call is allowed
// every Per/Calls on average, and a key that made no call for Per may make
// Calls at once.
type Rate struct {
	Calls int
	Per   time.Duration
}

// interval is the time one call uses up of its key's allowance.
func (r Rate) interval() time.Duration { return max(r.Per/time.Duration(r.Calls), 1) }

// RateDecision is what [RateLimiter.Allow] decided about one call.
type RateDecision struct {
	// Allowed: the call was counted and may run.
	Allowed bool
	// RetryAfter is, for a call refused, how long until the key may make
	// its next call; 0 for a call allowed.
	RetryAfter time.Duration
}

// RateLimiter is an optional capability of an [IdempotencyStore] that
// counts calls against rate limits. A store that several hosts share
// implements it so that a limit holds across them: three hosts behind a
// balancer let a principal make the limit's calls, not three times as
// many. A registry without one counts in its own process.
//
// Implementations must be safe for concurrent use, decide each call
// atomically (two calls racing for the last one of a burst get one
// allowance between them), and pass the suite TestRateLimiter in the
// storetest package.
type RateLimiter interface {
	// Allow counts one call of key against rate if rate allows it now,
	// and reports whether it did and, if not, how long until it would. A
	// refused call is not counted. rate.Calls and rate.Per are positive.
	// An error means the limiter cannot answer: the caller must not take
	// it for an allowance.
	Allow(ctx context.Context, key LimitKey, rate Rate) (RateDecision, error)
}

// ErrNoSlot is returned, wrapped, by [ConcurrencyLimiter.AcquireSlot] when
// every slot of the key is held.
var ErrNoSlot = errors.New("every slot of the key is held")

// ConcurrencyLimiter is an optional capability of an [IdempotencyStore]
// that bounds how many calls of one key run at once, across every host
// that shares it. A registry without one bounds them in its own process.
//
// A slot is held from AcquireSlot until its Release, and never lapses
// while its holder lives: a shared store renews its lease in the
// background, as it renews a lock's, so that the lease only frees the
// slots of a host that died. Implementations must be safe for concurrent
// use and pass the suite TestConcurrencyLimiter in the storetest package.
type ConcurrencyLimiter interface {
	// AcquireSlot takes one of the slots of key, of which there are
	// slots, held for lease unless renewed, without waiting: when every
	// slot is held it returns an error wrapping [ErrNoSlot].
	AcquireSlot(ctx context.Context, key LimitKey, slots int, lease time.Duration) (Slot, error)
}

// Slot is a held slot of a [ConcurrencyLimiter].
type Slot interface {
	// Release gives the slot up. Releasing twice is harmless.
	Release(ctx context.Context) error
}

// MemoryLimiter is the in-memory [RateLimiter] and [ConcurrencyLimiter]
// that a registry uses when its store is neither: the limits of this
// process only. It is safe for concurrent use. Its slots have no lease, as
// their holder cannot vanish without this process: AcquireSlot ignores its
// lease argument.
type MemoryLimiter struct {
	now func() time.Time

	mu    sync.Mutex
	tats  map[LimitKey]time.Time // theoretical arrival times, GCRA's state
	swept time.Time
	held  map[LimitKey]int
}

var (
	_ RateLimiter        = (*MemoryLimiter)(nil)
	_ ConcurrencyLimiter = (*MemoryLimiter)(nil)
)

// limiterSweep is how often a MemoryLimiter forgets the keys whose
// allowance is full again, which are the same as keys never seen.
const limiterSweep = time.Minute

// NewMemoryLimiter returns an empty [MemoryLimiter] that reads the time
// from now, or from [time.Now] when now is nil; a test passes a clock of
// its own to see bursts and refills without waiting.
func NewMemoryLimiter(now func() time.Time) *MemoryLimiter {
	if now == nil {
		now = time.Now
	}
	return &MemoryLimiter{now: now, tats: map[LimitKey]time.Time{}, held: map[LimitKey]int{}}
}

// Allow counts one call of key against rate if rate allows it now. Its
// memory is bounded by the keys that called within their last period.
func (m *MemoryLimiter) Allow(_ context.Context, key LimitKey, rate Rate) (RateDecision, error) {
	if rate.Calls <= 0 || rate.Per <= 0 {
		return RateDecision{}, errors.New("store: a rate needs a positive number of calls and a positive period")
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	t := now
	if tat := m.tats[key]; tat.After(now) {
		t = tat
	}
	step := rate.interval()
	next := t.Add(step)
	if at := next.Add(-step * time.Duration(rate.Calls)); at.After(now) {
		return RateDecision{RetryAfter: at.Sub(now)}, nil
	}
	m.tats[key] = next
	return RateDecision{Allowed: true}, nil
}

// sweep forgets, once a minute, every key whose allowance is full again.
func (m *MemoryLimiter) sweep(now time.Time) {
	if now.Sub(m.swept) < limiterSweep {
		return
	}
	m.swept = now
	for k, t := range m.tats {
		if !t.After(now) {
			delete(m.tats, k)
		}
	}
}

// AcquireSlot takes one of the slots of key, or returns an error wrapping
// [ErrNoSlot] when every one is held.
func (m *MemoryLimiter) AcquireSlot(_ context.Context, key LimitKey, slots int, _ time.Duration) (Slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[key] >= slots {
		return nil, ErrNoSlot
	}
	m.held[key]++
	return &memorySlot{m: m, key: key}, nil
}

// memorySlot is a held slot of a MemoryLimiter.
type memorySlot struct {
	m    *MemoryLimiter
	key  LimitKey
	once sync.Once
}

// Release gives the slot up; a second call does nothing.
func (s *memorySlot) Release(context.Context) error {
	s.once.Do(func() {
		s.m.mu.Lock()
		defer s.m.mu.Unlock()
		if s.m.held[s.key]--; s.m.held[s.key] <= 0 {
			delete(s.m.held, s.key)
		}
	})
	return nil
}
