package carmy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// TestReleaseAfterRefusal: a call refused at any stage after it took its
// MaxInFlight place, its request id's reservation or its tool's turn gives
// all of them back when it is answered, so that the next call runs at
// once: not rate_limited (the place), not busy (the turn), not waiting for
// an execution that never started (the reservation).
func TestReleaseAfterRefusal(t *testing.T) {
	var failStart atomic.Bool
	var runs atomic.Int64
	fn := func(ctx context.Context, in precedenceInput) (int, error) {
		runs.Add(1)
		return in.N, nil
	}
	reg, err := carmy.New().
		Tool(carmy.Tool(fn, carmy.Destructive, carmy.Name("purge"), carmy.RequireConfirmation(), carmy.MaxInFlight(1), carmy.Timeout(time.Second), carmy.Register(false))).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			if rec.Decision == carmy.AuditStarted && failStart.Load() {
				return errors.New("the sink is down")
			}
			return nil
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	grant := []string{"confirm:purge"}
	// Bounded: a reservation left behind would make a retry wait for it.
	call := func(c carmy.Call) (carmy.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Tool = "purge"
		return reg.Execute(ctx, c)
	}
	runsNext := func(t *testing.T, c carmy.Call) {
		t.Helper()
		before := runs.Load()
		res, err := call(c)
		if err != nil || res.Replayed || runs.Load() != before+1 {
			t.Fatalf("the next call: %+v, %v (runs %d → %d); want it to run at once", res, err, before, runs.Load())
		}
	}

	t.Run("started record not written", func(t *testing.T) {
		failStart.Store(true)
		_, err := call(carmy.Call{RequestID: "a", Permissions: grant, Input: []byte(`{"n":1}`)})
		failStart.Store(false)
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Details["reason"] != "audit" {
			t.Fatalf("err %v; want unavailable for the audit", err)
		}
		runsNext(t, carmy.Call{RequestID: "a", Permissions: grant, Input: []byte(`{"n":1}`)})
	})
	t.Run("confirmation required", func(t *testing.T) {
		if _, err := call(carmy.Call{RequestID: "b", Input: []byte(`{"n":1}`)}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Fatalf("err %v; want confirmation_required", err)
		}
		runsNext(t, carmy.Call{RequestID: "b", Permissions: grant, Input: []byte(`{"n":1}`)})
	})
	t.Run("conflict", func(t *testing.T) {
		if _, err := call(carmy.Call{RequestID: "a", Permissions: grant, Input: []byte(`{"n":2}`)}); carmy.CodeOf(err) != carmy.CodeConflict {
			t.Fatalf("err %v; want conflict", err)
		}
		runsNext(t, carmy.Call{RequestID: "c", Permissions: grant, Input: []byte(`{"n":2}`)})
	})
	t.Run("replay", func(t *testing.T) {
		res, err := call(carmy.Call{RequestID: "c", Permissions: grant, Input: []byte(`{"n":2}`)})
		if err != nil || !res.Replayed {
			t.Fatalf("%+v, %v; want a replay", res, err)
		}
		runsNext(t, carmy.Call{Permissions: grant, Input: []byte(`{"n":3}`)})
	})
}
