package carmy

import (
	"context"
	"encoding/json"
	"time"
)

// IdempotencyKey identifies one logical call: the same principal asking the
// same tool with the same request id. "" is a principal of its own, so
// unauthenticated callers never share records with authenticated ones.
type IdempotencyKey struct {
	Principal string
	Tool      string
	RequestID string
}

// Record is the recorded outcome of an execution: an output, or an error
// that calling again would not change.
type Record struct {
	// Digest is the hex SHA-256 of the canonical input.
	Digest      string          `json:"digest"`
	ExecutionID string          `json:"execution_id"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       *Error          `json:"error,omitempty"`
}

// Reservation is what [IdempotencyStore.Begin] found or took for a key.
type Reservation struct {
	// Owned: the key was free and is now reserved for the caller, who must
	// execute and then call Complete or Release with Token.
	Owned bool
	Token string
	// Digest is the input digest of the execution that holds or held the
	// key, when the caller does not own it.
	Digest string
	// Record is the recorded outcome, when the key's execution finished.
	// A reservation that is neither owned nor recorded is in flight.
	Record *Record
}

// IdempotencyStore records executions by [IdempotencyKey], so that a
// request id runs once. The in-memory default serves one process; a shared
// store (such as the Redis one in the redisstore module) serves several.
// Implementations must be safe for concurrent use and pass the suite in
// the storetest package.
//
// A reservation is in flight from Begin until Complete or Release, or
// until its lease runs out (its holder died); in-flight reservations are
// never evicted. Records expire after their TTL; a store may evict the
// oldest records to stay within a bound.
type IdempotencyStore interface {
	// Begin reserves key for an execution of the input with this digest,
	// for at most lease, unless the key is reserved or recorded already:
	// then it reports that reservation or record and reserves nothing.
	Begin(ctx context.Context, key IdempotencyKey, digest string, lease time.Duration) (Reservation, error)
	// Wait returns once key is no longer in flight, or with ctx's error
	// when ctx is done first. It must not poll without pause.
	Wait(ctx context.Context, key IdempotencyKey) error
	// Complete replaces the reservation held by token with rec, kept for
	// ttl, and wakes the waiters.
	Complete(ctx context.Context, key IdempotencyKey, token string, rec Record, ttl time.Duration) error
	// Release drops the reservation held by token without a record, and
	// wakes the waiters.
	Release(ctx context.Context, key IdempotencyKey, token string) error
}

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

// Defaults of the idempotency records.
const (
	DefaultIdempotencyTTL   = 24 * time.Hour
	DefaultIdempotencyLimit = 100_000
)
