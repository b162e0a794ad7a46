package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// freePort returns a loopback port where nothing listens.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// failureTools are a parallel-safe tool and a serialized one, counting
// their executions.
func failureTools(runs *atomic.Int64) []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(ctx carmy.Context, in countIn) (int64, error) {
			return runs.Add(1), nil
		}, carmy.Write, carmy.Name("pay"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(ctx carmy.Context, in countIn) (uint64, error) {
			runs.Add(1)
			return ctx.Fence, nil
		}, carmy.Write, carmy.Name("rebuild_index"), carmy.Register(false)),
	}
}

// expectUnavailable checks that the calls that need Redis fail with a
// retryable unavailable, without running their tool.
func expectUnavailable(t *testing.T, reg *carmy.Registry, runs *atomic.Int64) {
	t.Helper()
	before := runs.Load()
	for _, c := range []carmy.Call{
		{Tool: "pay", RequestID: "r-down", Input: []byte(`{"n":1}`)}, // idempotency needs the store
		{Tool: "rebuild_index"}, // serialization needs the locker
		{Tool: "rebuild_index", RequestID: "r-down-2"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err := reg.Execute(ctx, c)
		cancel()
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable {
			t.Errorf("%s (request id %q) with Redis down = %v; want a retryable unavailable", c.Tool, c.RequestID, err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s took %v to fail", c.Tool, d)
		}
	}
	if n := runs.Load() - before; n != 0 {
		t.Errorf("%d tools ran while Redis was down; want none", n)
	}
}

// Redis unreachable: a call that needs it fails with unavailable
// (retryable) and its tool does not run; one that needs it not (a
// parallel-safe tool called without a request id) runs.
func TestUnreachable(t *testing.T) {
	var runs atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, WithLogger(quiet))
	t.Cleanup(func() { _ = s.Close() })
	reg, err := carmy.New().Tool(failureTools(&runs)...).Store(s).Locker(s).Logger(quiet).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	expectUnavailable(t, reg, &runs)
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "pay"}); err != nil || runs.Load() != 1 {
		t.Fatalf("a call that needs no store = %v after %d runs; want it to run", err, runs.Load())
	}
}

// holdLease is the reservation lease of the registries of the restart
// tests, and so how long they hold new executions after Redis lost its
// state.
const holdLease = time.Second

// server is a redis-server this test runs on a loopback port.
type server struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

// startServer starts redis-server on port, without persistence unless
// options say otherwise (later options win).
func startServer(t *testing.T, port int, options ...string) *server {
	t.Helper()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"}, options...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	s := &server{t: t, port: port, cmd: cmd}
	t.Cleanup(s.stop)
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redis-server on port %d did not answer", port)
	return nil
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// stop kills the server, as a crash or a restart would.
func (s *server) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Redis goes away and comes back: while it is down, calls that need it fail
// with unavailable and their tools do not run; once it is back, the same
// registries serve calls again, with no restart, wake-ups between hosts
// work again, and fences still grow although the server lost its data.
func TestRedisRestart(t *testing.T) {
	redisURL(t) // only where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server (bash .ci/run does)")
	}
	port := freePort(t)
	srv := startServer(t, port)

	var runs atomic.Int64
	var regs [2]*carmy.Registry
	var stores [2]*Store
	for i := range regs {
		c := redis.NewClient(&redis.Options{Addr: srv.addr()})
		t.Cleanup(func() { _ = c.Close() })
		stores[i] = New(c, WithLogger(quiet), WithPollInterval(time.Hour)) // wake-ups must come by message
		t.Cleanup(func() { _ = stores[i].Close() })
		// A short lease, so that the hold after the restart is short.
		reg := build(t, carmy.New().Tool(failureTools(&runs)...).Store(shortLease{stores[i], holdLease}).Locker(stores[i]).Logger(quiet))
		regs[i] = reg
	}
	ctx := context.Background()

	if _, err := regs[0].Execute(ctx, carmy.Call{Tool: "pay", RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	before, err := regs[0].Execute(ctx, carmy.Call{Tool: "rebuild_index"})
	if err != nil {
		t.Fatal(err)
	}
	// Both hosts subscribe (a wait starts a host's subscription).
	for _, s := range stores {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = s.Wait(wctx, store.Key{Tool: "pay", RequestID: "warm-up"})
		cancel()
	}

	srv.stop()
	for _, reg := range regs {
		expectUnavailable(t, reg, &runs)
	}

	startServer(t, port) // on the same port: the hosts keep their clients
	// The pools hold dead connections: go-redis drops them and dials again.
	var after carmy.Result
	for i := range 50 {
		if after, err = regs[1].Execute(ctx, carmy.Call{Tool: "rebuild_index"}); err == nil {
			if i > 0 {
				t.Logf("the first call after the restart failed; call %d succeeded", i+1)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("calls still fail after Redis came back: %v", err)
	}
	f0, _ := strconv.ParseUint(string(before.Output), 10, 64)
	f1, _ := strconv.ParseUint(string(after.Output), 10, 64)
	if f0 == 0 || f1 <= f0 {
		t.Errorf("fence after the restart %s is not above %s", after.Output, before.Output)
	}
	// Redis lost its state: calls with a new request id are held for one
	// lease, then run.
	_, err = regs[0].Execute(ctx, carmy.Call{Tool: "pay", RequestID: "r2"})
	if e, ok := err.(*carmy.Error); !ok || e.Code != carmy.CodeUnavailable || !e.Retryable || e.Details["reason"] != "recovering" {
		t.Errorf("a call with a new request id just after Redis lost its state = %v; want unavailable, retryable, reason recovering", err)
	}
	time.Sleep(holdLease)
	for _, reg := range regs {
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "pay", RequestID: "r2"}); err != nil {
			t.Fatalf("an idempotent call a lease after the restart = %v", err)
		}
	}

	// The subscriptions came back: a completion on one host wakes a waiter
	// on the other, whose poll interval is an hour.
	key := store.Key{Tool: "pay", RequestID: "r3"}
	r, err := stores[0].Begin(ctx, key, "d", holdLease)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	woke := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		woke <- stores[1].Wait(wctx, key)
	}()
	time.Sleep(200 * time.Millisecond)
	if err := stores[0].Complete(ctx, key, r.Token, store.Record{Digest: "d"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("a waiter after the restart was not woken: %v", err)
	}
}
