package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

type countIn struct {
	N int `json:"n,omitempty"`
}

// counterTool is a parallel-safe tool that counts its executions.
func counterTool(n *atomic.Int64) *carmy.ToolDef {
	return carmy.Tool(func(ctx carmy.Context, in countIn) (int64, error) {
		return n.Add(1), nil
	}, carmy.Write, carmy.Name("count"), carmy.ParallelSafe(), carmy.Register(false))
}

// host is one carmy host: a registry whose store and locker are a Store of
// its own, on a client (a connection pool) of its own.
type host struct {
	reg   *carmy.Registry
	store *Store
}

func newHosts(t *testing.T, n int, tools ...*carmy.ToolDef) []host {
	t.Helper()
	base := newClient(t)
	prefix := testPrefix(t, base)
	out := make([]host, n)
	for i := range out {
		c := redis.NewClient(base.Options())
		t.Cleanup(func() { _ = c.Close() })
		s := newStore(t, c, prefix, WithLogger(quiet))
		reg := build(t, carmy.New().Tool(tools...).Store(s).Locker(s).Logger(quiet))
		out[i] = host{reg: reg, store: s}
	}
	return out
}

// 1,000 concurrent calls over 50 request ids, spread over four hosts, run
// exactly 50 executions; every call gets its request's one outcome.
func TestHostsRunEachRequestOnce(t *testing.T) {
	const calls, ids, nhosts = 1000, 50, 4
	var executions atomic.Int64
	slow := carmy.Tool(func(ctx carmy.Context, in countIn) (string, error) {
		executions.Add(1)
		time.Sleep(20 * time.Millisecond) // long enough for repeats to arrive mid-flight
		return fmt.Sprintf("order %d by %s", in.N, ctx.ExecutionID), nil
	}, carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Register(false))
	hs := newHosts(t, nhosts, slow)

	type answer struct {
		id       int
		res      carmy.Result
		err      error
		replayed bool
	}
	answers := make(chan answer, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			id := i % ids
			h := hs[i%nhosts]
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := h.reg.Execute(ctx, carmy.Call{Tool: "create_order", Input: fmt.Appendf(nil, `{"n":%d}`, id), RequestID: fmt.Sprintf("req-%d", id), Principal: "agent"})
			answers <- answer{id: id, res: res, err: err, replayed: res.Replayed}
		})
	}
	close(start)
	wg.Wait()
	close(answers)

	if n := executions.Load(); n != ids {
		t.Errorf("%d executions; want exactly %d", n, ids)
	}
	execs := map[int]string{}
	outputs := map[int]string{}
	fresh := map[int]int{}
	for a := range answers {
		if a.err != nil {
			t.Errorf("request %d: %v", a.id, a.err)
			continue
		}
		if !a.replayed {
			fresh[a.id]++
		}
		if e, ok := execs[a.id]; ok && (e != a.res.ExecutionID || outputs[a.id] != string(a.res.Output)) {
			t.Errorf("request %d answered by executions %s and %s", a.id, e, a.res.ExecutionID)
		}
		execs[a.id], outputs[a.id] = a.res.ExecutionID, string(a.res.Output)
	}
	for id := range ids {
		if fresh[id] != 1 {
			t.Errorf("request %d: %d answers not replayed; want 1", id, fresh[id])
		}
	}
}

// A tool that is not parallel-safe never runs on two hosts at once, and
// each execution's fence is above the one before.
func TestSerializedToolAcrossHosts(t *testing.T) {
	const nhosts, perHost = 4, 25
	var inside, most, runs atomic.Int64
	var mu sync.Mutex
	var fences []uint64
	serial := carmy.Tool(func(ctx carmy.Context, in countIn) (uint64, error) {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		fences = append(fences, ctx.Fence)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		runs.Add(1)
		inside.Add(-1)
		return ctx.Fence, nil
	}, carmy.Write, carmy.Name("rebuild_index"), carmy.Register(false))
	hs := newHosts(t, nhosts, serial)

	var wg sync.WaitGroup
	for _, h := range hs {
		for range perHost {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if _, err := h.reg.Execute(ctx, carmy.Call{Tool: "rebuild_index"}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d executions at once across hosts; want 1", m)
	}
	if n := runs.Load(); n != nhosts*perHost {
		t.Errorf("%d executions; want %d", n, nhosts*perHost)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("execution %d had fence %d after %d; fences must grow", i, fences[i], fences[i-1])
		}
	}
}

// A host that dies holding a tool's lock (no renewal, no release) holds it
// up only until the lease runs out; the next execution, on another host,
// gets a higher fence.
func TestHostDiesHoldingLock(t *testing.T) {
	var fence atomic.Uint64
	serial := carmy.Tool(func(ctx carmy.Context, in countIn) (string, error) {
		fence.Store(ctx.Fence)
		return "done", nil
	}, carmy.Write, carmy.Name("rebuild_index"), carmy.Register(false))
	hs := newHosts(t, 2, serial)
	dead, alive := hs[0], hs[1]

	const lease = 300 * time.Millisecond
	l, err := dead.store.Acquire(context.Background(), "rebuild_index", lease)
	if err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	l.(*lock).Abandon() // the host dies: its renewal stops and it never releases

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alive.reg.Execute(ctx, carmy.Call{Tool: "rebuild_index"}); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(died)
	if waited < lease/2 {
		t.Errorf("the other host ran after %v, before the dead host's lease of %v ran out", waited, lease)
	}
	if waited > lease+5*time.Second {
		t.Errorf("the other host waited %v for a lease of %v", waited, lease)
	}
	if fence.Load() <= l.Fence() {
		t.Errorf("the tool ran with fence %d, not above the dead holder's %d", fence.Load(), l.Fence())
	}
}

// A host that dies in the middle of an execution leaves its reservation
// in flight: a repeat on another host waits for it, and once the
// reservation's lease runs out, runs the call itself. The dead host's
// late outcome, should it come back, is refused.
func TestHostDiesMidExecution(t *testing.T) {
	var executions atomic.Int64
	hs := newHosts(t, 2, counterTool(&executions))
	dead, alive := hs[0], hs[1]

	input := `{"n":7}`
	sum := sha256.Sum256([]byte(input)) // the canonical form of this input is itself
	key := store.Key{Principal: "agent", Tool: "count", RequestID: "r1"}
	const lease = 300 * time.Millisecond
	ctx := context.Background()
	r, err := dead.store.Begin(ctx, key, hex.EncodeToString(sum[:]), lease)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	dead.store.AbandonReservation(key, r.Token) // the host dies while its tool runs: its renewal stops
	died := time.Now()

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := alive.reg.Execute(cctx, carmy.Call{Tool: "count", Input: []byte(input), RequestID: "r1", Principal: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(died); waited < lease/2 {
		t.Errorf("the repeat ran after %v, before the lease of %v ran out", waited, lease)
	}
	if res.Replayed || executions.Load() != 1 {
		t.Fatalf("result %+v after %d executions; want a fresh execution on the live host", res, executions.Load())
	}
	if err := dead.store.Complete(ctx, key, r.Token, store.Record{Digest: "late"}, time.Minute); !errors.Is(err, store.ErrLostReservation) {
		t.Fatalf("the dead host's late Complete = %v; want ErrLostReservation", err)
	}
	again, err := alive.reg.Execute(ctx, carmy.Call{Tool: "count", Input: []byte(input), RequestID: "r1", Principal: "agent"})
	if err != nil || !again.Replayed || again.ExecutionID != res.ExecutionID {
		t.Fatalf("repeat = %+v, %v; want the live host's outcome, replayed", again, err)
	}
}

// shortLease gives every reservation a short lease, so that a reservation
// that lapsed while its holder lives would show within a test.
type shortLease struct {
	*Store
	lease time.Duration
}

func (s shortLease) Begin(ctx context.Context, key store.Key, digest string, _ time.Duration) (store.Reservation, error) {
	return s.Store.Begin(ctx, key, digest, s.lease)
}

// A reservation whose execution waits for its tool's turn and then runs,
// for several times its lease, stays in flight all along: a retry on
// another host waits for it and gets the replay, and the tool runs once.
func TestReservationIsRenewedWhileItsExecutionLives(t *testing.T) {
	const lease = 300 * time.Millisecond
	var runs [2]atomic.Int64
	holding, release := make(chan struct{}), make(chan struct{})
	slow := carmy.Tool(func(ctx carmy.Context, in countIn) (int64, error) {
		if in.N == 0 { // holds the turn
			close(holding)
			<-release
		} else {
			time.Sleep(2 * lease) // runs past its lease too
		}
		return runs[in.N].Add(1), nil
	}, carmy.Write, carmy.Name("slow"), carmy.Timeout(10*time.Second), carmy.Register(false))
	base := newClient(t)
	prefix := testPrefix(t, base)
	var regs [2]*carmy.Registry
	for i := range regs {
		s := newStore(t, base, prefix, WithLogger(quiet))
		reg := build(t, carmy.New().Tool(slow).Store(shortLease{s, lease}).Locker(s).Logger(quiet))
		regs[i] = reg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _, _ = regs[0].Execute(ctx, carmy.Call{Tool: "slow", Input: []byte(`{}`)}) }()
	<-holding
	call := func(reg *carmy.Registry, out chan<- carmy.Result) {
		res, err := reg.Execute(ctx, carmy.Call{Tool: "slow", Input: []byte(`{"n":1}`), RequestID: "r1", Principal: "agent"})
		if err != nil {
			t.Error(err)
		}
		out <- res
	}
	first, retry := make(chan carmy.Result, 1), make(chan carmy.Result, 1)
	go call(regs[0], first) // reserves r1, then waits for the turn
	time.Sleep(3 * lease)
	go call(regs[1], retry) // the client's retry reaches the other host
	time.Sleep(lease)
	close(release)
	f, r := <-first, <-retry
	if n := runs[1].Load(); n != 1 || f.Replayed || !r.Replayed || r.ExecutionID != f.ExecutionID {
		t.Fatalf("first = %+v, retry = %+v, r1 ran %d times; want once, and the retry replayed", f, r, n)
	}
}
