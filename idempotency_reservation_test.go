package carmy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// lapsingStore is a memory store whose Check reports the reservation lost
// while lapsed is set, as a shared store does to a host that was paused
// past its lease.
type lapsingStore struct {
	store.IdempotencyStore
	lapsed atomic.Bool
}

func (s *lapsingStore) Check(ctx context.Context, key store.Key, token string) error {
	if s.lapsed.Load() {
		return store.ErrLostReservation
	}
	return nil
}

// Every call with a request id gets a fence that grows with every new
// reservation; a call without one gets none. A call whose reservation
// passed on before its tool started is refused, retryable, and its tool
// does not run.
func TestReservationFenceAndCheck(t *testing.T) {
	t.Parallel()
	mem := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = mem.(interface{ Close() error }).Close() })
	s := &lapsingStore{IdempotencyStore: mem}
	var fences []uint64
	var runs atomic.Int32
	tool := carmy.Tool(func(ctx carmy.Context, in struct{}) (string, error) {
		runs.Add(1)
		fences = append(fences, ctx.Fence)
		return "ok", nil
	}, carmy.Write, carmy.Name("pay"), carmy.ParallelSafe(), carmy.Register(false))
	reg := build(t, carmy.New().Tool(tool).Store(s).Logger(quietLogger()))
	ctx := context.Background()
	for _, id := range []string{"r1", "r2", ""} {
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "pay", RequestID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if len(fences) != 3 || fences[0] == 0 || fences[1] <= fences[0] || fences[2] != 0 {
		t.Fatalf("fences = %v; want two growing fences for the request ids, then 0 for the call without one", fences)
	}

	s.lapsed.Store(true)
	_, err := reg.Execute(ctx, carmy.Call{Tool: "pay", RequestID: "r3"})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable || e.Details["reason"] != "reservation_lost" {
		t.Fatalf("call whose reservation lapsed = %v; want unavailable, retryable, reason reservation_lost", err)
	}
	if runs.Load() != 3 {
		t.Fatalf("the tool ran %d times; want the lapsed call refused before it started", runs.Load())
	}
}
