package redisstore

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// hangingRedis accepts connections and never answers, as a Redis that
// hangs does; it returns its address.
func hangingRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return l.Addr().String()
}

// A keyed call on a host whose Redis hangs fails with unavailable,
// retryable, once the client's timeouts run out, and its tool does not
// run, as soon as the client's timeouts say (docs/deployment.md measures
// go-redis's defaults: about 5 s).
func TestHangingRedisFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params string
		within time.Duration
	}{
		{"read_timeout=500ms&max_retries=0", "?read_timeout=500ms&max_retries=0", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int64
			reg := build(t, carmy.New().Tool(counterTool(&runs)).StoreURL("redis://"+hangingRedis(t)+"/0"+tc.params).Logger(quiet))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			_, err := reg.Execute(ctx, carmy.Call{Tool: "count", RequestID: "r1", Input: []byte(`{}`)})
			took := time.Since(start)
			e, ok := err.(*carmy.Error)
			if !ok || e.Code != carmy.CodeUnavailable || !e.Retryable || runs.Load() != 0 {
				t.Fatalf("call on a hanging Redis = %v, tool ran %d times; want unavailable, retryable, not run", err, runs.Load())
			}
			if took > tc.within {
				t.Errorf("the call failed after %v; want within %v", took, tc.within)
			}
			t.Logf("failed after %v", took.Round(time.Millisecond))
		})
	}
}
