package carmy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/memstore"
)

// memoryStore adapts the in-memory store to IdempotencyStore.
type memoryStore struct {
	s *memstore.Store[IdempotencyKey, Record]
}

// NewMemoryStore returns the in-memory [IdempotencyStore] that a builder
// uses by default: records of this process only, at most limit of them
// (limit <= 0 means [DefaultIdempotencyLimit]), the oldest evicted first.
// While it holds records a goroutine sweeps the expired ones; the store
// also implements io.Closer, to stop it.
func NewMemoryStore(limit int) IdempotencyStore {
	return newMemoryStore(limit)
}

func newMemoryStore(limit int) *memoryStore {
	if limit <= 0 {
		limit = DefaultIdempotencyLimit
	}
	return &memoryStore{s: memstore.NewStore[IdempotencyKey, Record](limit)}
}

// NewMemoryLocker returns the in-memory [Locker] that a builder uses by
// default: locks of this process only.
func NewMemoryLocker() Locker { return memoryLocker{memstore.NewLocker()} }

func (m *memoryStore) Begin(_ context.Context, key IdempotencyKey, digest string, lease time.Duration) (Reservation, error) {
	r := m.s.Begin(key, digest, lease)
	return Reservation{Owned: r.Owned, Token: r.Token, Digest: r.Digest, Record: r.Record}, nil
}

func (m *memoryStore) Wait(ctx context.Context, key IdempotencyKey) error { return m.s.Wait(ctx, key) }

func (m *memoryStore) Complete(_ context.Context, key IdempotencyKey, token string, rec Record, ttl time.Duration) error {
	return lost(m.s.Complete(key, token, rec, ttl))
}

func (m *memoryStore) Release(_ context.Context, key IdempotencyKey, token string) error {
	return lost(m.s.Release(key, token))
}

func (m *memoryStore) Close() error { return m.s.Close() }

// Len returns the records and reservations the store holds, for load tests
// that check its bound.
func (m *memoryStore) Len() int { return m.s.Len() }

func lost(err error) error {
	if errors.Is(err, memstore.ErrLostReservation) {
		return Errorf(CodeConflict, "%v", err)
	}
	return err
}

// memoryLocker adapts the in-memory locker to Locker.
type memoryLocker struct{ l *memstore.Locker }

func (m memoryLocker) Acquire(ctx context.Context, name string, _ time.Duration) (Lock, error) {
	h, err := m.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// StoreOpener opens the shared idempotency store and locker that a URL
// names, such as "redis://host:6379/0". When the returned values implement
// io.Closer, the registry closes them when it closes (each once; one value
// returned as both is closed twice, so its Close must be idempotent).
type StoreOpener func(url string) (IdempotencyStore, Locker, error)

var openers struct {
	sync.Mutex
	m map[string]StoreOpener
}

// RegisterStore makes a store available to [Builder.StoreURL] and to the
// store_url setting of carmy.toml under a URL scheme. Store packages call
// it from init, as database/sql drivers do:
//
//	import _ "github.com/carmy-dev/carmy/redisstore" // registers "redis" and "rediss"
func RegisterStore(scheme string, open StoreOpener) {
	openers.Lock()
	defer openers.Unlock()
	if openers.m == nil {
		openers.m = map[string]StoreOpener{}
	}
	openers.m[scheme] = open
}

// StoreURL sets the shared idempotency store and locker by URL, opened at
// Build by the package registered for its scheme with [RegisterStore].
func (b *Builder) StoreURL(url string) *Builder {
	b.storeURL = url
	return b
}

// openStore opens b.storeURL, if set.
func (b *Builder) openStore() (IdempotencyStore, Locker, error) {
	scheme, _, ok := strings.Cut(b.storeURL, "://")
	if !ok {
		return nil, nil, fmt.Errorf("store URL %q has no scheme, such as redis://", b.storeURL)
	}
	openers.Lock()
	open := openers.m[scheme]
	openers.Unlock()
	if open == nil {
		return nil, nil, fmt.Errorf("no store is registered for %q URLs: import its package, such as _ \"github.com/carmy-dev/carmy/redisstore\"", scheme)
	}
	return open(b.storeURL)
}
