package redisstore

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
)

// A host whose Redis stops drains itself from the balancer: /healthz and
// /readyz answer 503 once Redis was out of reach for longer than the
// grace, /livez keeps answering 200, and both answer 200 again once Redis
// is back.
func TestHealthWhileRedisIsDown(t *testing.T) {
	redisURL(t) // only where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server (bash .ci/run does)")
	}
	const grace = time.Second // longer than a stall of a loaded machine
	port := freePort(t)
	srv := startServer(t, port)
	c := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c, testPrefix(t, c), WithLogger(quiet))
	reg := build(t, carmy.New().Store(s).Locker(s).HealthGrace(grace).Logger(quiet))
	h := reg.Handler()
	status := func(path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://carmy"+path, nil))
		return w.Code
	}
	awaitStatus := func(path string, want int) time.Duration {
		t.Helper()
		start := time.Now()
		for status(path) != want {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("GET %s still not %d after %v", path, want, time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	if status("/healthz") != 200 || status("/readyz") != 200 {
		t.Fatal("the checks fail while Redis answers")
	}
	srv.stop()
	if got := status("/readyz"); got != 200 {
		t.Errorf("GET /readyz at once after Redis stopped = %d; want 200 within the grace", got)
	}
	took := awaitStatus("/healthz", 503)
	t.Logf("GET /healthz answered 503 %v after Redis stopped (grace %v)", took.Round(time.Millisecond), grace)
	if took < grace/2 {
		t.Errorf("GET /healthz failed %v after Redis stopped; want the grace of %v first", took, grace)
	}
	if status("/readyz") != 503 || status("/livez") != 200 {
		t.Errorf("during the outage /readyz = %d, /livez = %d; want 503 and 200", status("/readyz"), status("/livez"))
	}
	startServer(t, port)
	back := awaitStatus("/readyz", 200)
	awaitStatus("/healthz", 200)
	t.Logf("GET /readyz answered 200 %v after Redis answered again", back.Round(time.Millisecond))
}
