package carmy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

type PlaceOrder struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type Placed struct {
	Number int32 `json:"number"`
}

// counter is a tool that numbers its executions; fail, when set, decides
// the error of an execution by its number.
type counter struct {
	runs atomic.Int32
	fail func(n int32) error
}

func (c *counter) place(ctx context.Context, in PlaceOrder) (Placed, error) {
	n := c.runs.Add(1)
	if c.fail != nil {
		if err := c.fail(n); err != nil {
			return Placed{}, err
		}
	}
	return Placed{Number: n}, nil
}

func counterRegistry(t *testing.T, c *counter, b *carmy.Builder, opts ...carmy.Option) *carmy.Registry {
	t.Helper()
	opts = append([]carmy.Option{carmy.Name("place_order"), carmy.ParallelSafe(), carmy.Register(false)}, opts...)
	if b == nil {
		b = carmy.New()
	}
	reg := build(t, b.Tool(carmy.Tool(c.place, carmy.Write, opts...)))
	return reg
}

func place(reg *carmy.Registry, input, requestID, principal string) (carmy.Result, error) {
	return reg.Execute(context.Background(), carmy.Call{Tool: "place_order", Input: []byte(input), RequestID: requestID, Principal: principal})
}

func TestIdempotencyReplaysTheFirstOutcome(t *testing.T) {
	t.Parallel()
	c := &counter{}
	reg := counterRegistry(t, c, nil)
	first, err := place(reg, `{"sku":"A","quantity":2}`, "r1", "alice")
	if err != nil || first.Replayed {
		t.Fatalf("first = %+v, %v", first, err)
	}
	for _, same := range []string{`{"sku":"A","quantity":2}`, `{ "quantity": 2.0, "sku": "A" }`, `{"quantity":2e0,"sku":"\u0041"}`} {
		again, err := place(reg, same, "r1", "alice")
		if err != nil {
			t.Fatalf("%s: %v", same, err)
		}
		if !again.Replayed || again.ExecutionID != first.ExecutionID || string(again.Output) != string(first.Output) {
			t.Fatalf("%s: repeat = %+v; want the replay of %+v", same, again, first)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("%d executions; want 1", n)
	}
}

func TestIdempotencyConflict(t *testing.T) {
	t.Parallel()
	c := &counter{}
	reg := counterRegistry(t, c, nil)
	if _, err := place(reg, `{"sku":"A","quantity":2}`, "r1", "alice"); err != nil {
		t.Fatal(err)
	}
	_, err := place(reg, `{"sku":"A","quantity":3}`, "r1", "alice")
	if carmy.CodeOf(err) != carmy.CodeConflict {
		t.Fatalf("err = %v; want conflict", err)
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("%d executions; want 1", n)
	}
}

func TestIdempotencyKeyIncludesPrincipalAndTool(t *testing.T) {
	t.Parallel()
	c := &counter{}
	reg := counterRegistry(t, c, nil)
	for _, p := range []string{"alice", "bob", ""} {
		res, err := place(reg, `{"sku":"A","quantity":2}`, "r1", p)
		if err != nil || res.Replayed {
			t.Fatalf("principal %q: %+v, %v; want a fresh execution", p, res, err)
		}
	}
	if n := c.runs.Load(); n != 3 {
		t.Fatalf("%d executions; want 3, one per principal", n)
	}
}

func TestIdempotencyRecordsOnlyFinalOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		recorded bool
	}{
		{"not found is final", carmy.Errorf(carmy.CodeNotFound, "no such order"), true},
		{"conflict is final", carmy.Errorf(carmy.CodeConflict, "out of stock"), true},
		{"unavailable is retryable", carmy.Errorf(carmy.CodeUnavailable, "warehouse down"), false},
		{"explicitly retryable", &carmy.Error{Code: carmy.CodeConflict, Message: "busy", Retryable: true}, false},
		{"a plain error is internal and retryable", fmt.Errorf("disk on fire"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &counter{fail: func(n int32) error {
				if n == 1 {
					return tt.err
				}
				return nil
			}}
			reg := counterRegistry(t, c, nil)
			_, err1 := place(reg, `{"sku":"A","quantity":2}`, "r1", "alice")
			res, err2 := place(reg, `{"sku":"A","quantity":2}`, "r1", "alice")
			if tt.recorded {
				if carmy.CodeOf(err2) != carmy.CodeOf(err1) || err2.Error() != err1.Error() || c.runs.Load() != 1 {
					t.Fatalf("repeat = %v after %v with %d runs; want the same error replayed", err2, err1, c.runs.Load())
				}
				return
			}
			if err2 != nil || res.Replayed || c.runs.Load() != 2 {
				t.Fatalf("repeat = %+v, %v with %d runs; want a new execution", res, err2, c.runs.Load())
			}
		})
	}
}

func TestIdempotencyExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	c := &counter{fail: func(int32) error { time.Sleep(time.Millisecond); return nil }}
	reg := counterRegistry(t, c, nil)
	const calls, ids = 1000, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	execByID := map[string]map[string]bool{}
	var replays atomic.Int32
	for i := range calls {
		wg.Go(func() {
			id := fmt.Sprintf("r%d", i%ids)
			res, err := place(reg, fmt.Sprintf(`{"sku":"%s","quantity":1}`, id), id, "alice")
			if err != nil {
				t.Error(err)
				return
			}
			if res.Replayed {
				replays.Add(1)
			}
			mu.Lock()
			if execByID[id] == nil {
				execByID[id] = map[string]bool{}
			}
			execByID[id][res.ExecutionID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := c.runs.Load(); n != ids {
		t.Fatalf("%d executions for %d request ids", n, ids)
	}
	if n := replays.Load(); n != calls-ids {
		t.Fatalf("%d replays; want %d", n, calls-ids)
	}
	for id, execs := range execByID {
		if len(execs) != 1 {
			t.Fatalf("request id %s saw %d execution ids", id, len(execs))
		}
	}
}

func TestIdempotencyWaiterGetsTheOutcomeAndRespectsItsCancellation(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	c := &counter{fail: func(n int32) error {
		if n == 1 {
			close(started)
			<-release
		}
		return nil
	}}
	reg := counterRegistry(t, c, nil)
	first := make(chan carmy.Result, 1)
	go func() {
		res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "")
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := reg.Execute(ctx, carmy.Call{Tool: "place_order", Input: []byte(`{"sku":"A","quantity":1}`), RequestID: "r1"})
	if code := carmy.CodeOf(err); code != carmy.CodeTimeout && code != carmy.CodeCancelled {
		t.Fatalf("waiter err = %v; want its own deadline to end the wait", err)
	}

	waiter := make(chan carmy.Result, 1)
	go func() {
		res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "")
		if err != nil {
			t.Error(err)
		}
		waiter <- res
	}()
	close(release)
	f, w := <-first, <-waiter
	if !w.Replayed || w.ExecutionID != f.ExecutionID || c.runs.Load() != 1 {
		t.Fatalf("waiter = %+v, first = %+v, runs = %d; want the first outcome replayed", w, f, c.runs.Load())
	}
}

func TestIdempotencyRecordsALateSuccess(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	finished := make(chan struct{})
	c := &counter{fail: func(n int32) error {
		if n == 1 {
			<-release // ignores its context
			defer close(finished)
		}
		return nil
	}}
	reg := counterRegistry(t, c, nil, carmy.Timeout(20*time.Millisecond))
	_, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "")
	if carmy.CodeOf(err) != carmy.CodeTimeout {
		t.Fatalf("err = %v; want timeout", err)
	}
	close(release)
	<-finished
	// The write happened after all: a retry must not do it again.
	res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "")
	if err != nil || !res.Replayed || c.runs.Load() != 1 {
		t.Fatalf("retry = %+v, %v with %d runs; want the late outcome replayed", res, err, c.runs.Load())
	}
}

func TestIdempotencyTTLAndLimit(t *testing.T) {
	t.Parallel()
	t.Run("records expire", func(t *testing.T) {
		c := &counter{}
		reg := counterRegistry(t, c, carmy.New().IdempotencyTTL(20*time.Millisecond))
		if _, err := place(reg, `{"sku":"A","quantity":1}`, "r1", ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
		res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "")
		if err != nil || res.Replayed || c.runs.Load() != 2 {
			t.Fatalf("after the TTL: %+v, %v with %d runs; want a new execution", res, err, c.runs.Load())
		}
	})
	t.Run("the oldest record is evicted once older than the window", func(t *testing.T) {
		c := &counter{}
		reg := counterRegistry(t, c, carmy.New().IdempotencyLimit(2).IdempotencyWindow(20*time.Millisecond))
		for _, id := range []string{"r1", "r2"} {
			if _, err := place(reg, `{"sku":"A","quantity":1}`, id, ""); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(40 * time.Millisecond)
		if _, err := place(reg, `{"sku":"A","quantity":1}`, "r3", ""); err != nil {
			t.Fatal(err)
		}
		if res, _ := place(reg, `{"sku":"A","quantity":1}`, "r3", ""); !res.Replayed {
			t.Fatal("the newest record was evicted")
		}
		if res, _ := place(reg, `{"sku":"A","quantity":1}`, "r1", ""); res.Replayed {
			t.Fatal("the oldest record outlived the limit")
		}
	})
	t.Run("no record younger than the window is evicted: new request ids wait", func(t *testing.T) {
		c := &counter{}
		reg := counterRegistry(t, c, carmy.New().IdempotencyLimit(2)) // the default window, 10 minutes
		if _, err := place(reg, `{"sku":"A","quantity":1}`, "quiet-1", "bob"); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := place(reg, `{"sku":"A","quantity":1}`, fmt.Sprint("flood-", i), "alice"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := place(reg, `{"sku":"A","quantity":1}`, "flood-2", "alice")
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable || e.Details["reason"] != "capacity" {
			t.Fatalf("alice's call past her bound = %v; want unavailable, retryable, reason capacity", err)
		}
		for i := range 2 {
			if res, err := place(reg, `{"sku":"A","quantity":1}`, fmt.Sprint("flood-", i), "alice"); err != nil || !res.Replayed {
				t.Fatalf("alice's retry of flood-%d = %+v, %v; want the replay: her records are younger than the window", i, res, err)
			}
		}
		if res, err := place(reg, `{"sku":"A","quantity":1}`, "quiet-2", "bob"); err != nil || res.Replayed {
			t.Fatalf("bob's new call = %+v, %v; want it to run: alice's bound is hers", res, err)
		}
		if res, _ := place(reg, `{"sku":"A","quantity":1}`, "quiet-1", "bob"); !res.Replayed || c.runs.Load() != 4 {
			t.Fatalf("bob's retry = %+v after %d runs; want a replay after 4 runs", res, c.runs.Load())
		}
	})
	t.Run("the limit is per principal", func(t *testing.T) {
		c := &counter{}
		reg := counterRegistry(t, c, carmy.New().IdempotencyLimit(2).IdempotencyWindow(time.Nanosecond))
		if _, err := place(reg, `{"sku":"A","quantity":1}`, "quiet-1", "bob"); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := place(reg, `{"sku":"A","quantity":1}`, fmt.Sprint("flood-", i), "alice"); err != nil {
				t.Fatal(err)
			}
		}
		if res, _ := place(reg, `{"sku":"A","quantity":1}`, "quiet-1", "bob"); !res.Replayed || c.runs.Load() != 11 {
			t.Fatalf("bob's retry = %+v after %d runs; want a replay: alice's records must not evict bob's", res, c.runs.Load())
		}
	})
}

// shortLease gives every reservation a short lease, so that a reservation
// that lapsed while its holder lives would show within a test.
type shortLease struct {
	store.IdempotencyStore
	lease time.Duration
}

func (s shortLease) Begin(ctx context.Context, key store.Key, digest string, _ time.Duration) (store.Reservation, error) {
	return s.IdempotencyStore.Begin(ctx, key, digest, s.lease)
}

// A reservation does not lapse while its execution waits for the tool's
// turn and runs, however short its lease: a retry during that time waits
// and gets the replay, and the tool runs once.
func TestIdempotencyReservationOutlivesItsLeaseWhileItsExecutionLives(t *testing.T) {
	t.Parallel()
	const lease = 50 * time.Millisecond
	holding, release := make(chan struct{}), make(chan struct{})
	c := &counter{fail: func(n int32) error {
		if n == 1 { // the call without a request id holds the turn
			close(holding)
			<-release
		} else {
			time.Sleep(2 * lease) // the call with one runs past its lease too
		}
		return nil
	}}
	mem := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = mem.(io.Closer).Close() })
	reg, err := carmy.New().Store(shortLease{mem, lease}).
		Tool(carmy.Tool(c.place, carmy.Write, carmy.Name("place_order"), carmy.Timeout(5*time.Second), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })

	go func() { _, _ = place(reg, `{"sku":"A","quantity":1}`, "", "") }()
	<-holding
	first, retry := make(chan carmy.Result, 1), make(chan carmy.Result, 1)
	call := func(out chan<- carmy.Result) {
		res, err := place(reg, `{"sku":"A","quantity":1}`, "r1", "alice")
		if err != nil {
			t.Error(err)
		}
		out <- res
	}
	go call(first)        // reserves r1, then waits for the turn
	time.Sleep(3 * lease) // past the reservation's lease
	go call(retry)        // the client's retry
	time.Sleep(lease)
	close(release)
	f, r := <-first, <-retry
	if runs := c.runs.Load(); runs != 2 || f.Replayed || !r.Replayed || r.ExecutionID != f.ExecutionID {
		t.Fatalf("first = %+v, retry = %+v, %d runs; want r1 run once and the retry replayed", f, r, runs-1)
	}
}
