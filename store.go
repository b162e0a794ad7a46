package carmy

import (
	"context"
	"errors"
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
