// Command loadtest drives a carmy server on loopback with a bounded mix of
// calls and checks what carmy promises under load: no unexpected error,
// every request id executed exactly once, the idempotency store within its
// bound, and memory back to its baseline once the records expire.
//
//	go run ./internal/loadtest                       # 100,000 calls, 200 connections
//	go run ./internal/loadtest -calls 20000 -conns 50
//
// It prints a report and exits 1 when a check fails. Every request goes to
// 127.0.0.1, and the run stops after -timeout whatever happens.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

type Reserve struct {
	Item string `json:"item" validate:"required"`
	Qty  int    `json:"qty" validate:"min=1,max=1000"`
}

type Delete struct {
	Item string `json:"item" validate:"required"`
}

type counters struct {
	perID        sync.Map // request id → *atomic.Int32
	inside, most atomic.Int32
}

func (c *counters) tools() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(ctx carmy.Context, in Reserve) (int, error) {
			n, _ := c.perID.LoadOrStore(ctx.RequestID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return in.Qty, nil
		}, carmy.Write, carmy.Name("reserve"), carmy.ParallelSafe()),
		carmy.Tool(func() error {
			n := c.inside.Add(1)
			for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
			}
			c.inside.Add(-1)
			return nil
		}, carmy.Write, carmy.Name("serial")),
		carmy.Tool(func(in Delete) error { return nil }, carmy.Destructive, carmy.Name("delete"), carmy.RequireConfirmation(), carmy.ParallelSafe()),
		carmy.Tool(func() error { return carmy.Errorf(carmy.CodeNotFound, "nothing here") }, carmy.Read, carmy.Name("missing"), carmy.ParallelSafe()),
	}
}

// call is one request of the mix and the status it must get.
type call struct {
	tool, body, key, token string
	status                 int
}

func mix(i int) call {
	switch i % 20 {
	case 0, 1, 2, 3, 4, 5, 6, 7: // idempotent writes: 8 calls, close together, share an id
		id := i / 20
		return call{tool: "reserve", body: fmt.Sprintf(`{"item":"i%d","qty":%d}`, id, id%1000+1), key: "r" + strconv.Itoa(id), token: "plain", status: 200}
	case 8, 9, 10: // a serialized tool
		return call{tool: "serial", token: "plain", status: 200}
	case 11, 12: // confirmation: refused without the grant
		return call{tool: "delete", body: `{"item":"x"}`, token: "plain", status: 403}
	case 13, 14: // and allowed with it
		return call{tool: "delete", body: `{"item":"x"}`, token: "granted", status: 200}
	case 15, 16: // a failing tool
		return call{tool: "missing", token: "plain", status: 404}
	case 17, 18: // invalid input
		return call{tool: "reserve", body: `{"item":"","qty":0,"extra":1}`, token: "plain", status: 400}
	default: // no token
		return call{tool: "serial", status: 401}
	}
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func main() {
	calls := flag.Int("calls", 100_000, "calls to make")
	conns := flag.Int("conns", 200, "concurrent connections")
	limit := flag.Int("limit", 1_000, "bound of the idempotency store (records per principal; the run has one); below calls/20 so that eviction runs")
	ttl := flag.Duration("ttl", 5*time.Second, "how long records are kept")
	timeout := flag.Duration("timeout", 5*time.Minute, "the run stops after this, whatever happens")
	flag.Parse()
	if err := run(*calls, *conns, *limit, *ttl, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("loadtest: PASS")
}

func run(calls, conns, limit int, ttl, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	baseline := heap()

	c := &counters{}
	mem := store.NewMemoryStore(limit, 0)
	defer mem.(io.Closer).Close()
	auth := carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("plain"), Principal: "load"},
		carmy.Token{SHA256: carmy.HashToken("granted"), Principal: "load", Permissions: []string{"confirm:delete"}},
	)
	reg, err := carmy.New().Tool(c.tools()...).Store(mem).IdempotencyTTL(ttl).Authenticate(auth).Build()
	if err != nil {
		return err
	}
	defer reg.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- reg.Serve(serveCtx, ln, 10*time.Second) }()
	url := "http://" + ln.Addr().String() + "/tools/"

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: 30 * time.Second}
	var (
		next        atomic.Int64
		unexpected  atomic.Int64
		firstErr    atomic.Value
		mostInStore atomic.Int64
		latencies   = make([]time.Duration, calls)
	)
	sampler := time.NewTicker(20 * time.Millisecond)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-sampler.C:
				if n := int64(mem.(interface{ Len() int }).Len()); n > mostInStore.Load() {
					mostInStore.Store(n)
				}
			case <-serveCtx.Done():
				return
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= calls || ctx.Err() != nil {
					return
				}
				cl := mix(i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+cl.tool, strings.NewReader(cl.body))
				if cl.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if cl.key != "" {
					req.Header.Set("Idempotency-Key", cl.key)
				}
				if cl.token != "" {
					req.Header.Set("Authorization", "Bearer "+cl.token)
				}
				t0 := time.Now()
				res, err := client.Do(req)
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status = res.StatusCode
				}
				latencies[i] = time.Since(t0)
				if status != cl.status {
					if unexpected.Add(1) == 1 {
						firstErr.Store(fmt.Sprintf("call %d (%s): status %d, want %d (%v)", i, cl.tool, status, cl.status, err))
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := heap()
	sampler.Stop()

	// Records expire: wait two TTLs, then memory should be back.
	time.Sleep(2*ttl + 500*time.Millisecond)
	stopServe()
	<-samplerDone
	if err := <-served; err != nil {
		return err
	}
	client.CloseIdleConnections()
	after := heap()
	left := mem.(interface{ Len() int }).Len()

	done := int(min(next.Load(), int64(calls)))
	slices.Sort(latencies[:done])
	pct := func(p float64) time.Duration { return latencies[int(float64(done-1)*p)] }
	executions, twice := 0, 0
	c.perID.Range(func(_, v any) bool {
		executions++
		if v.(*atomic.Int32).Load() != 1 {
			twice++
		}
		return true
	})
	fmt.Printf("calls %d over %d connections in %v (%.0f calls/s)\n", done, conns, elapsed.Round(time.Millisecond), float64(done)/elapsed.Seconds())
	fmt.Printf("latency p50 %v, p99 %v, max %v\n", pct(0.50), pct(0.99), latencies[done-1])
	fmt.Printf("unexpected responses %d\n", unexpected.Load())
	fmt.Printf("request ids executed %d (each sent 8 times), executed more than once %d\n", executions, twice)
	fmt.Printf("serialized tool: at most %d execution(s) at once\n", c.most.Load())
	fmt.Printf("idempotency store: at most %d entries held (bound %d records + in-flight), %d left after the TTL\n", mostInStore.Load(), limit, left)
	fmt.Printf("heap: baseline %.1f MiB, after the load %.1f MiB, after the TTL %.1f MiB\n", mib(baseline), mib(peak), mib(after))

	switch {
	case done < calls:
		return fmt.Errorf("only %d of %d calls ran before the timeout", done, calls)
	case unexpected.Load() > 0:
		return fmt.Errorf("%d unexpected responses; first: %v", unexpected.Load(), firstErr.Load())
	case twice > 0:
		return fmt.Errorf("%d request ids executed more than once", twice)
	case c.most.Load() > 1:
		return fmt.Errorf("the serialized tool ran %d at once", c.most.Load())
	case mostInStore.Load() > int64(limit+conns):
		return fmt.Errorf("the store held %d entries, over its bound of %d", mostInStore.Load(), limit)
	case left != 0:
		return fmt.Errorf("%d records left after their TTL", left)
	case after > baseline+8<<20:
		return fmt.Errorf("heap %.1f MiB after the TTL, baseline %.1f MiB", mib(after), mib(baseline))
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
