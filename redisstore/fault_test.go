package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
)

// The fault test: three hosts (registries, each with its own Store and
// connection pool) on one real Redis, under load in which every request id
// is sent three times, to three hosts, at once, by clients that retry
// what is retryable, with backoff (50 ms doubling to 1 s, jittered). Redis is killed mid-load and started again, on the
// same port, with and without persistence, and no request id may run
// twice. With AOF "always" the reservations and records survive, and
// outcomes that could not be recorded while Redis was down are recorded
// once it is back. Without persistence the hosts find that Redis lost its
// state and hold new executions for one lease, while the holders of
// reservations restore them and record their outcomes, and every host
// records again the outcomes it remembers ([WithJournal]), so that a
// request that finished before the kill is not run again by its retry.
// docs/reliability.md reports the runs
// (go test -v -run TestFaultRedisRestartUnderLoad).
func TestFaultRedisRestartUnderLoad(t *testing.T) {
	redisURL(t) // only where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server (bash .ci/run does)")
	}
	for _, mode := range []struct {
		name    string
		options func(dir string) []string
	}{
		{"no persistence", func(string) []string { return nil }},
		{"AOF always", func(dir string) []string {
			return []string{"--appendonly", "yes", "--appendfsync", "always", "--dir", dir}
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			faultRun(t, mode.options(dir))
		})
	}
}

// faultLease is the reservation lease of the fault test's hosts: how long
// a dead host's reservation blocks its key, and how long the hosts hold
// new executions after Redis lost its state.
const faultLease = 10 * time.Second

func faultRun(t *testing.T, options []string) {
	const (
		ids     = 1000            // request ids, each sent three times
		spread  = 5 * time.Second // over which the ids are first sent
		killAt  = 2 * time.Second // after the load starts
		downFor = time.Second     // Redis stays down
		nhosts  = 3
	)
	port := freePort(t)
	srv := startServer(t, port, options...)
	pay := newPay()
	regs := make([]*carmy.Registry, nhosts)
	for i := range regs {
		c := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		regs[i] = faultHost(t, pay, New(c, WithLogger(quiet)))
	}
	r := sendThrice(t, regs, ids, spread, func(start time.Time) string {
		time.Sleep(time.Until(start.Add(killAt)))
		srv.stop()
		killed := time.Now()
		time.Sleep(downFor)
		startServer(t, port, options...)
		return fmt.Sprintf("Redis killed at %v, down %v", killed.Sub(start).Round(time.Millisecond), downFor)
	})
	pay.check(t, ids, r)
}

// pay is the fault tests' tool: parallel-safe, counting its executions by
// request id.
type pay struct {
	tool *carmy.ToolDef
	mu   sync.Mutex
	runs map[string]int
}

func newPay() *pay {
	const work = 5 * time.Millisecond // each execution's own time
	p := &pay{runs: map[string]int{}}
	p.tool = carmy.Tool(func(ctx carmy.Context, in countIn) (string, error) {
		p.mu.Lock()
		p.runs[ctx.RequestID]++
		p.mu.Unlock()
		time.Sleep(work)
		return "paid " + ctx.RequestID, nil
	}, carmy.Write, carmy.Name("pay"), carmy.ParallelSafe(), carmy.Timeout(30*time.Second), carmy.Register(false))
	return p
}

// faultHost is one host of a fault test: a registry serving p on store s,
// whose reservations have the fault lease.
func faultHost(t *testing.T, p *pay, s *Store) *carmy.Registry {
	t.Helper()
	t.Cleanup(func() { _ = s.Close() })
	reg := build(t, carmy.New().Tool(p.tool).Store(shortLease{s, faultLease}).Locker(s).Logger(quiet))
	return reg
}

// loadReport is what the clients of a fault test saw.
type loadReport struct {
	fault      string         // what the fault did, as it said
	sends      int64          // with retries
	failed     int64          // sends that never got an outcome
	mismatched int64          // sends of one id answered by different executions
	errs       map[string]int // by code and reason, as clients saw them before retrying
	elapsed    time.Duration
	recovered  string // from the fault's end to the first fresh execution
}

// sendThrice sends ids request ids, the first sends spread over spread,
// each three times, to three hosts at once, by clients that retry what is
// retryable, with backoff (50 ms doubling to 1 s, jittered), for up to 90
// s; fault runs meanwhile, from the start of the load, and describes what
// it did.
func sendThrice(t *testing.T, regs []*carmy.Registry, ids int, spread time.Duration, fault func(start time.Time) string) *loadReport {
	const patient = 90 * time.Second // a client gives up on its request after this
	r := &loadReport{errs: map[string]int{}}
	var (
		mu                  sync.Mutex
		sends, failed, mism atomic.Int64
		healed, recovered   atomic.Int64 // Unix nanoseconds
	)
	answers := make([]string, ids) // execution id of each request, first answer
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ids {
		at := start.Add(time.Duration(i) * spread / time.Duration(ids))
		for j := range 3 {
			wg.Go(func() {
				time.Sleep(time.Until(at))
				reg := regs[(i+j)%len(regs)]
				call := carmy.Call{Tool: "pay", RequestID: fmt.Sprintf("r%d", i), Principal: "agent", Input: []byte(`{}`)}
				deadline := time.Now().Add(patient)
				backoff := 50 * time.Millisecond
				for {
					sends.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					res, err := reg.Execute(ctx, call)
					cancel()
					if err == nil {
						mu.Lock()
						switch answers[i] {
						case "":
							answers[i] = res.ExecutionID
						case res.ExecutionID:
						default:
							mism.Add(1)
						}
						mu.Unlock()
						if h := healed.Load(); h != 0 && !res.Replayed && time.Now().UnixNano() > h {
							recovered.CompareAndSwap(0, time.Now().UnixNano())
						}
						return
					}
					var e *carmy.Error
					key := err.Error()
					if errors.As(err, &e) {
						key = string(e.Code)
						if reason, ok := e.Details["reason"].(string); ok {
							key += " (" + reason + ")"
						}
					}
					mu.Lock()
					r.errs[key]++
					mu.Unlock()
					if !errors.As(err, &e) || !e.Retryable || time.Now().After(deadline) {
						failed.Add(1)
						t.Errorf("request r%d on host %d: %v", i, (i+j)%len(regs), err)
						return
					}
					time.Sleep(backoff/2 + rand.N(backoff/2))
					backoff = min(2*backoff, time.Second)
				}
			})
		}
	}
	r.fault = fault(start)
	healed.Store(time.Now().UnixNano())
	wg.Wait()
	r.elapsed = time.Since(start)
	r.sends, r.failed, r.mismatched = sends.Load(), failed.Load(), mism.Load()
	r.recovered = "none"
	if rec := recovered.Load(); rec != 0 {
		r.recovered = time.Duration(rec - healed.Load()).Round(time.Millisecond).String()
	}
	return r
}

// check reports the load and fails the test when a request id ran twice,
// did not run, or had its sends answered by different executions.
func (p *pay) check(t *testing.T, ids int, r *loadReport) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	duplicates, twice := 0, []string{}
	for id, n := range p.runs {
		if n > 1 {
			duplicates += n - 1
			twice = append(twice, fmt.Sprintf("%s ran %d times", id, n))
		}
	}
	sort.Strings(twice)
	var errs []string
	for k, n := range r.errs {
		errs = append(errs, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(errs)
	t.Logf("%d request ids × 3 hosts, %d sends with retries, over %v; %s; executions %d, duplicates %d, sends that failed %d, answers from another execution %d; errors clients saw (then retried): [%s]; first fresh execution %s after the fault ended",
		ids, r.sends, r.elapsed.Round(time.Millisecond), r.fault, len(p.runs), duplicates, r.failed, r.mismatched, strings.Join(errs, ", "), r.recovered)
	if duplicates > 0 {
		t.Errorf("%d duplicate executions: %s", duplicates, strings.Join(twice[:min(len(twice), 10)], "; "))
	}
	if len(p.runs) != ids {
		t.Errorf("%d request ids ran; want %d", len(p.runs), ids)
	}
	if r.mismatched > 0 {
		t.Errorf("%d sends got the outcome of another execution of their request id", r.mismatched)
	}
}
