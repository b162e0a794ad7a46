package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func (r *roundRobin) Allow(ctx context.Context, key store.LimitKey, rate store.Rate) (store.RateDecision, error) {
	return r.host().Allow(ctx, key, rate)
}

func (r *roundRobin) AcquireSlot(ctx context.Context, key store.LimitKey, slots int, lease time.Duration) (store.Slot, error) {
	return r.host().AcquireSlot(ctx, key, slots, lease)
}

// The limit suites on one Store, then with each call on its own host.
func TestLimitsConformance(t *testing.T) {
	c := newClient(t)
	t.Run("rate", func(t *testing.T) {
		storetest.TestRateLimiter(t, func(t *testing.T) store.RateLimiter { return newStore(t, c, testPrefix(t, c)) })
	})
	t.Run("concurrency", func(t *testing.T) {
		storetest.TestConcurrencyLimiter(t, func(t *testing.T) store.ConcurrencyLimiter {
			return newStore(t, c, testPrefix(t, c), WithLogger(quiet))
		})
	})
	t.Run("rate across hosts", func(t *testing.T) {
		storetest.TestRateLimiter(t, func(t *testing.T) store.RateLimiter {
			return &roundRobin{hosts: hosts(t, c, testPrefix(t, c), 3)}
		})
	})
	t.Run("concurrency across hosts", func(t *testing.T) {
		storetest.TestConcurrencyLimiter(t, func(t *testing.T) store.ConcurrencyLimiter {
			return &roundRobin{hosts: hosts(t, c, testPrefix(t, c), 3)}
		})
	})
}

// The limit suites on a three-node Redis Cluster, each call on its own
// host: every script keeps to the one slot of its key's hash tag.
func TestClusterLimitsConformance(t *testing.T) {
	c := newClusterClient(t)
	t.Run("rate", func(t *testing.T) {
		storetest.TestRateLimiter(t, func(t *testing.T) store.RateLimiter {
			return &roundRobin{hosts: clusterHosts(t, c, 0)}
		})
	})
	t.Run("concurrency", func(t *testing.T) {
		storetest.TestConcurrencyLimiter(t, func(t *testing.T) store.ConcurrencyLimiter {
			return &roundRobin{hosts: clusterHosts(t, c, 0)}
		})
	})
}

// A principal's limits on a tool are one key, in one hash slot, whatever
// the principal's or the tool's name holds.
func TestLimitKeysKeepToOneSlot(t *testing.T) {
	s := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithPrefix("p:"))
	defer s.Close()
	for _, k := range []store.LimitKey{{}, {Principal: "alice", Tool: "create_order"}, {Principal: "a}{b", Tool: "{x}"}} {
		for _, key := range []string{s.rateKey(k), s.slotsKey(k)} {
			open, end := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
			if open < 0 || end < open+2 || strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
				t.Errorf("key %q of %+v; want one non-empty hash tag", key, k)
			}
		}
	}
	if a, b := s.rateKey(store.LimitKey{Principal: "a:b", Tool: "c"}), s.rateKey(store.LimitKey{Principal: "a", Tool: "b:c"}); a == b {
		t.Errorf("two keys share %q", a)
	}
}

// Two registries, as two hosts, on one Redis: a principal's rate limit
// and MaxInFlight hold across both.
func TestLimitsAcrossRegistries(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 1)
	var runs atomic.Int64
	tools := []*carmy.ToolDef{
		carmy.Tool(func(ctx carmy.Context, in countIn) (int64, error) { return runs.Add(1), nil },
			carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.RateLimit(3, time.Hour), carmy.Register(false)),
		carmy.Tool(func(ctx carmy.Context) error {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}, carmy.Write, carmy.Name("export"), carmy.ParallelSafe(), carmy.MaxInFlight(1), carmy.Register(false)),
	}
	h := newHosts(t, 2, tools...)
	call := func(reg *carmy.Registry, principal, tool string) error {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: tool, Principal: principal})
		return err
	}

	for i := range 3 {
		if err := call(h[i%2].reg, "alice", "create_order"); err != nil {
			t.Fatalf("alice's call %d = %v", i+1, err)
		}
	}
	for i, x := range h {
		err := call(x.reg, "alice", "create_order")
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeRateLimited || !strings.Contains(e.Message, "call create_order again in 1200 s") {
			t.Fatalf("alice's fourth call, on host %d = %v; want rate_limited on every host", i, err)
		}
	}
	if err := call(h[1].reg, "bob", "create_order"); err != nil {
		t.Fatalf("bob's call = %v; alice's calls are not his", err)
	}
	if runs.Load() != 4 {
		t.Fatalf("create_order ran %d times; want 4", runs.Load())
	}

	done := make(chan error, 1)
	go func() { done <- call(h[0].reg, "alice", "export") }()
	<-started
	if err := call(h[1].reg, "alice", "export"); carmy.CodeOf(err) != carmy.CodeRateLimited {
		t.Fatalf("alice's export on host 1 while one runs on host 0 = %v; want rate_limited", err)
	}
	go func() { done <- call(h[1].reg, "bob", "export") }()
	<-started // bob's own slot
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := call(h[1].reg, "alice", "export"); err != nil {
		t.Fatalf("alice's export once the first returned = %v", err)
	}
}

// Redis unreachable: a limited call is unavailable and does not run; an
// unlimited one that needs no store runs.
func TestLimitsUnreachable(t *testing.T) {
	var runs atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, WithLogger(quiet))
	t.Cleanup(func() { _ = s.Close() })
	count := func(ctx carmy.Context) (int64, error) { return runs.Add(1), nil }
	reg, err := carmy.New().Store(s).Locker(s).Logger(quiet).Tool(
		carmy.Tool(count, carmy.Write, carmy.Name("limited"), carmy.ParallelSafe(), carmy.RateLimit(10, time.Minute), carmy.Register(false)),
		carmy.Tool(count, carmy.Write, carmy.Name("slotted"), carmy.ParallelSafe(), carmy.MaxInFlight(2), carmy.Register(false)),
		carmy.Tool(count, carmy.Write, carmy.Name("free"), carmy.ParallelSafe(), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, tool := range []string{"limited", "slotted"} {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: tool, Principal: "alice"})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable {
			t.Errorf("%s with Redis down = %v; want a retryable unavailable, never unlimited", tool, err)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("%d limited calls ran with Redis down", runs.Load())
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "free", Principal: "alice"}); err != nil {
		t.Fatalf("an unlimited call = %v; want it to run", err)
	}
}
