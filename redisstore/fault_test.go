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
		ids     = 1000                 // request ids, each sent three times
		spread  = 5 * time.Second      // over which the ids are first sent
		killAt  = 2 * time.Second      // after the load starts
		downFor = time.Second          // Redis stays down
		patient = 90 * time.Second     // a client gives up on its request after this
		work    = 5 * time.Millisecond // each execution's own time
		nhosts  = 3
	)
	port := freePort(t)
	srv := startServer(t, port, options...)

	var mu sync.Mutex
	runs := map[string]int{}
	tool := carmy.Tool(func(ctx carmy.Context, in countIn) (string, error) {
		mu.Lock()
		runs[ctx.RequestID]++
		mu.Unlock()
		time.Sleep(work)
		return "paid " + ctx.RequestID, nil
	}, carmy.Write, carmy.Name("pay"), carmy.ParallelSafe(), carmy.Timeout(30*time.Second), carmy.Register(false))

	regs := make([]*carmy.Registry, nhosts)
	for i := range regs {
		c := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		s := New(c, WithLogger(quiet))
		t.Cleanup(func() { _ = s.Close() })
		reg, err := carmy.New().Tool(tool).Store(shortLease{s, faultLease}).Locker(s).Logger(quiet).Build()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Close() })
		regs[i] = reg
	}

	var (
		errsMu     sync.Mutex
		clientErrs = map[string]int{} // by code and reason, as clients saw them
		failed     atomic.Int64       // sends that never got an outcome
		mismatched atomic.Int64       // sends of one id answered by different executions
		sends      atomic.Int64
		restarted  atomic.Int64 // Unix nanoseconds of the restart
		recovered  atomic.Int64 // of the first fresh execution after it
	)
	answers := make([]string, ids) // execution id of each request, first answer
	var answersMu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ids {
		at := start.Add(time.Duration(i) * spread / ids)
		for j := range nhosts {
			wg.Go(func() {
				time.Sleep(time.Until(at))
				reg := regs[(i+j)%nhosts]
				call := carmy.Call{Tool: "pay", RequestID: fmt.Sprintf("r%d", i), Principal: "agent", Input: []byte(`{}`)}
				deadline := time.Now().Add(patient)
				backoff := 50 * time.Millisecond
				for {
					sends.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					res, err := reg.Execute(ctx, call)
					cancel()
					if err == nil {
						answersMu.Lock()
						switch answers[i] {
						case "":
							answers[i] = res.ExecutionID
						case res.ExecutionID:
						default:
							mismatched.Add(1)
						}
						answersMu.Unlock()
						if r := restarted.Load(); r != 0 && !res.Replayed && recovered.Load() == 0 && time.Now().UnixNano() > r {
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
					errsMu.Lock()
					clientErrs[key]++
					errsMu.Unlock()
					if !errors.As(err, &e) || !e.Retryable || time.Now().After(deadline) {
						failed.Add(1)
						t.Errorf("request r%d on host %d: %v", i, (i+j)%nhosts, err)
						return
					}
					time.Sleep(backoff/2 + rand.N(backoff/2))
					backoff = min(2*backoff, time.Second)
				}
			})
		}
	}
	time.Sleep(time.Until(start.Add(killAt)))
	srv.stop()
	killed := time.Now()
	time.Sleep(downFor)
	startServer(t, port, options...)
	restarted.Store(time.Now().UnixNano())
	wg.Wait()
	elapsed := time.Since(start)

	duplicates, twice := 0, []string{}
	for id, n := range runs {
		if n > 1 {
			duplicates += n - 1
			twice = append(twice, fmt.Sprintf("%s ran %d times", id, n))
		}
	}
	sort.Strings(twice)
	var errs []string
	for k, n := range clientErrs {
		errs = append(errs, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(errs)
	recover := "none"
	if r := recovered.Load(); r != 0 {
		recover = time.Duration(r - restarted.Load()).Round(time.Millisecond).String()
	}
	t.Logf("%d request ids × %d hosts, %d sends with retries, over %v; Redis killed at %v, down %v; executions %d, duplicates %d, sends that failed %d, answers from another execution %d; errors clients saw (then retried): [%s]; first fresh execution %s after the restart",
		ids, nhosts, sends.Load(), elapsed.Round(time.Millisecond), killed.Sub(start).Round(time.Millisecond), downFor, len(runs), duplicates, failed.Load(), mismatched.Load(), strings.Join(errs, ", "), recover)
	if duplicates > 0 {
		t.Errorf("%d duplicate executions: %s", duplicates, strings.Join(twice[:min(len(twice), 10)], "; "))
	}
	if len(runs) != ids {
		t.Errorf("%d request ids ran; want %d", len(runs), ids)
	}
	if n := mismatched.Load(); n > 0 {
		t.Errorf("%d sends got the outcome of another execution of their request id", n)
	}
}
