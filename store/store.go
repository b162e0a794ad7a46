// Package store defines what carmy needs from the services that keep
// idempotency records and serialize tools, for those who implement them, as
// database/sql/driver does for database/sql. Hosts rarely import it: they
// name a store by URL ([Open], and the root package's Builder.StoreURL) or
// pass an implementation to Builder.Store and Builder.Locker.
//
// The package holds the interfaces ([IdempotencyStore], [Locker], [Lock],
// [ApprovalStore], [TaskStore], [ConcurrencyLimiter]'s [Slot]), the
// optional capabilities a shared store adds ([RateLimiter],
// [ConcurrencyLimiter], [KeyStore], [Checker], [Pinger], [Finder],
// [NonceStore], [ReservationAbandoner], [Windowed], [DecisionWaiter]),
// their record types, the in-memory implementations a builder uses by
// default ([NewMemoryStore], [NewMemoryLocker], [NewMemoryApprovals],
// [NewMemoryLimiter], [NewMemoryTasks]), and the registry of store
// implementations by URL scheme ([Register], [Open]). The storetest
// package checks that an implementation keeps the promises the runtime
// relies on.
//
// A store never sees the runtime's types: outputs and errors are recorded as
// JSON bytes, so that every replay decodes a copy of its own.
package store

import (
	"context"
	"errors"
	"time"
)

// Key identifies one logical call: the same principal asking the same tool
// with the same request id. "" is a principal of its own, so
// unauthenticated callers never share records with authenticated ones.
type Key struct {
	Principal string
	Tool      string
	RequestID string
}

// Record is the recorded outcome of an execution: an output, or an error
// that calling again would not change.
type Record struct {
	// Digest is the hex SHA-256 of the canonical input.
	Digest      string
	ExecutionID string
	// Output is the JSON output of a successful execution.
	Output []byte
	// Error is the JSON form of the error the execution returned, as
	// callers receive it; nil for a success.
	Error []byte
}

// Reservation is what [IdempotencyStore.Begin] found or took for a key.
type Reservation struct {
	// Owned: the key was free and is now reserved for the caller, who must
	// execute and then call Complete or Release with Token.
	Owned bool
	Token string
	// Fence, of an owned reservation, is a number that grows with every
	// new reservation of the key, on every host sharing the store and
	// through a loss of its state, for the resource the execution writes
	// to refuse the write of an execution whose reservation has since
	// passed on (its lease ran out while its host was paused or cut off).
	// The storetest package checks that it is set and grows.
	Fence uint64
	// Digest is the input digest of the execution that holds or held the
	// key, when the caller does not own it.
	Digest string
	// Record is the recorded outcome, when the key's execution finished.
	// A reservation that is neither owned nor recorded is in flight.
	Record *Record
}

// IdempotencyStore records executions by [Key], so that a request id runs
// once. The in-memory default serves one process; a shared store (such as
// the Redis one in the redisstore module) serves several. Implementations
// must be safe for concurrent use and pass the suite in the storetest
// package.
//
// A reservation is in flight from Begin until Complete or Release, and
// never lapses while its holder lives: a request id whose execution waits
// for its tool's turn, or runs for longer than anyone expected, still runs
// once. The lease only bounds how long the reservation outlives a holder
// that died without ending it (its process crashed, or its host lost the
// store): a shared store renews the lease in the background from Begin
// until Complete or Release, as it renews a lock, so that only a dead
// holder stops renewing; a store that serves one process may keep the
// reservation without expiry, since its holder cannot die without it. So
// the caller of an owned Begin must end the reservation with Complete or
// Release on every path, a panic included.
//
// In-flight reservations are never evicted. Records expire after their
// TTL, and a store is bounded per principal: the records of one principal
// beyond its limit evict that principal's oldest ones, never another
// principal's, so a caller that floods the store with fresh request ids
// cannot make a quiet caller's retry run twice. No record younger than the
// store's window ([Windowed], default [DefaultWindow]) is evicted: a
// principal at its bound with only younger records gets [ErrCapacity] from
// Begin of a new key.
type IdempotencyStore interface {
	// Begin reserves key for an execution of the input with this digest,
	// unless the key is reserved or recorded already: then it reports that
	// reservation or record and reserves nothing. lease is how long the
	// reservation outlives its holder's death; the store keeps it while
	// the holder lives.
	Begin(ctx context.Context, key Key, digest string, lease time.Duration) (Reservation, error)
	// Wait returns once key is no longer in flight, or with ctx's error
	// when ctx is done first. It must not poll without pause.
	Wait(ctx context.Context, key Key) error
	// Complete replaces the reservation held by token with rec, kept for
	// ttl, and wakes the waiters. When another reservation or a record
	// holds the key, it changes nothing and returns an error wrapping
	// [ErrLostReservation]. A store whose reservations lapse records an
	// outcome whose key nobody holds (its lease ran out and nobody took
	// it): the execution ran, and refusing its outcome would let a retry
	// run it again. Any other error (the store cannot be reached)
	// leaves the reservation held, and renewed, for the caller to call
	// Complete again: the runtime does, with backoff, until it succeeds,
	// so that an outcome is never lost while its holder lives.
	Complete(ctx context.Context, key Key, token string, rec Record, ttl time.Duration) error
	// Release drops the reservation held by token without a record, and
	// wakes the waiters. When the reservation is no longer token's, it
	// changes nothing and returns an error wrapping [ErrLostReservation].
	Release(ctx context.Context, key Key, token string) error
}

// ErrCapacity is returned, wrapped, by Begin of a new key whose principal
// holds as many records as its bound allows, none of them older than the
// store's window ([Windowed]): keeping the new record would evict one that
// a retry may still need, so the call must wait until the oldest record
// ages past the window. Other principals are not affected.
var ErrCapacity = errors.New("the principal holds as many idempotency records as its bound allows, all younger than the idempotency window")

// ErrRecovering is returned, wrapped, by Begin while the store holds keyed
// executions after finding that it lost its state (a restart without
// persistence, a failover to a replica that lagged): meanwhile the holders
// of reservations made before the loss restore them and record their
// outcomes, so that no call in flight runs again elsewhere. A store that
// lost everything holds them for one lease; one that kept most (a
// promoted replica, a restart with AOF) may hold them for less, as long as
// its holders restore what it lacks within that time.
var ErrRecovering = errors.New("the idempotency store lost its state recently and holds new executions until reservations made before are restored")

// Windowed is an optional capability of an [IdempotencyStore] that bounds
// its records: SetWindow sets the minimum age below which no record is
// evicted to make room. A store at a principal's bound whose records are
// all younger refuses that principal's new keys with [ErrCapacity]. A
// builder calls SetWindow at Build when the host set a window; 0 lets the
// bound evict records of any age.
type Windowed interface {
	SetWindow(d time.Duration)
}

// ErrLostReservation reports a Complete or Release whose reservation is no
// longer the caller's: its holder was taken for dead (its lease ran out
// unrenewed) and another execution took the key, or the token is not the
// holder's.
var ErrLostReservation = errors.New("the idempotency reservation was lost: its lease ran out before the execution finished, or the token is not the holder's")

// Locker serializes the executions of tools that are not parallel-safe.
// The in-memory default serves one process; a shared one serves several.
// Implementations must be safe for concurrent use and pass the suite in
// the storetest package.
type Locker interface {
	// Acquire blocks until it holds the lock of that name, for at most
	// lease unless renewed, or returns ctx's error when ctx is done first.
	Acquire(ctx context.Context, name string, lease time.Duration) (Lock, error)
}

// Lock is a held lock.
type Lock interface {
	// Fence returns a number that grows with every acquisition of the
	// lock, for the resource the tool writes to reject stale holders.
	Fence() uint64
	// Release gives the lock up. Releasing twice is harmless.
	Release(ctx context.Context) error
}

// Defaults of the idempotency records, which a builder uses unless told
// otherwise.
const (
	// DefaultTTL is how long a record is kept for replay.
	DefaultTTL = 24 * time.Hour
	// DefaultWindow is the age below which no record is evicted to make
	// room: a retry within it gets the recorded outcome, or, when the
	// principal's bound is full of such records, a refusal, never a second
	// execution.
	DefaultWindow = 10 * time.Minute
	// DefaultLimit is how many records the in-memory store keeps per
	// principal: the principal's oldest are evicted beyond it, once older
	// than the window. It keeps a full window of 10 minutes for a
	// principal making up to 16 keyed calls a second; the Redis store's
	// default is larger.
	DefaultLimit = 10_000
	// DefaultGlobalLimit is how many records the in-memory store keeps in
	// all: past it, the principal holding the most records loses its
	// oldest one. With request ids of the longest kind (255 bytes) and
	// small outputs, a full store holds about 65 MiB.
	DefaultGlobalLimit = 100_000
)
