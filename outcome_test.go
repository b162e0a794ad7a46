package carmy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// flakyStore is a memory store whose Complete and Release fail while the
// store is down, as a shared store's do while it restarts.
type flakyStore struct {
	store.IdempotencyStore
	down     atomic.Bool
	attempts atomic.Int32 // of Complete while down
}

var errDown = errors.New("store down")

func (s *flakyStore) Complete(ctx context.Context, key store.Key, token string, rec store.Record, ttl time.Duration) error {
	if s.down.Load() {
		s.attempts.Add(1)
		return errDown
	}
	return s.IdempotencyStore.Complete(ctx, key, token, rec, ttl)
}

func (s *flakyStore) Release(ctx context.Context, key store.Key, token string) error {
	if s.down.Load() {
		return errDown
	}
	return s.IdempotencyStore.Release(ctx, key, token)
}

// An outcome the store cannot record when the execution ends is recorded
// once the store is back: the caller gets its answer at once, a retry
// meanwhile finds the request in flight and waits, and gets the outcome,
// replayed; the tool runs once.
func TestOutcomeRecordedAfterTheStoreComesBack(t *testing.T) {
	t.Parallel()
	mem := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = mem.(interface{ Close() error }).Close() })
	s := &flakyStore{IdempotencyStore: mem}
	c := &counter{}
	logs := &logSink{}
	reg := counterRegistry(t, c, carmy.New().Store(s).Logger(slog.New(slog.NewTextHandler(logs, nil))))

	s.down.Store(true)
	first, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "alice")
	if err != nil || first.Replayed {
		t.Fatalf("first = %+v, %v; want its answer although the store cannot record it", first, err)
	}
	retried := make(chan carmy.Result, 1)
	go func() {
		res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "alice")
		if err != nil {
			t.Error(err)
		}
		retried <- res
	}()
	for s.attempts.Load() < 3 { // the runtime keeps trying, with backoff
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case res := <-retried:
		t.Fatalf("the retry got %+v while the outcome was not recorded; want it to wait", res)
	default:
	}
	s.down.Store(false)
	select {
	case res := <-retried:
		if !res.Replayed || res.ExecutionID != first.ExecutionID {
			t.Fatalf("retry = %+v; want the replay of %s", res, first.ExecutionID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the retry still waits after the store came back")
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
	// The waiting retry wakes when the record lands, which can be before
	// the runtime logs it.
	reported := func() (string, bool) {
		l := logs.String()
		return l, strings.Contains(l, "trying again while its reservation is held") && strings.Contains(l, "recorded the outcome of a request id after the store came back")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, ok := reported()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log = %s; want the failure and the late record reported", l)
		}
	}
}
