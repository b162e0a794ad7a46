package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// partitionedStore is a memory store whose Ping fails while cut is set,
// as a shared store's does from a host cut off from it.
type partitionedStore struct {
	store.IdempotencyStore
	cut atomic.Bool
}

func (s *partitionedStore) Ping(context.Context) error {
	if s.cut.Load() {
		return errors.New("dial tcp 10.0.0.7:6379: i/o timeout")
	}
	return nil
}

// probeGet returns the status and the decoded body of a GET of path.
func probeGet(t *testing.T, h http.Handler, path string) (int, map[string]string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://carmy"+path, nil))
	body, _ := io.ReadAll(w.Result().Body)
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET %s: %d %s: %v", path, w.Code, body, err)
	}
	return w.Code, m
}

// During a partition from the store, /healthz and /readyz answer 200 for
// the grace, then 503, so that the balancer drains the host; /livez keeps
// answering 200, since restarting the process would not bring the store
// back. Once the store answers again, so does the host. The answer names
// no address.
func TestHealthDuringAPartition(t *testing.T) {
	t.Parallel()
	const grace = time.Second // longer than a stall of a loaded machine
	mem := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = mem.(io.Closer).Close() })
	s := &partitionedStore{IdempotencyStore: mem}
	reg := build(t, carmy.New().Store(s).HealthGrace(grace).Logger(quietLogger()))
	h := reg.Handler()
	expect := func(when string, want map[string]int) {
		t.Helper()
		for path, status := range want {
			got, body := probeGet(t, h, path)
			if got != status {
				t.Errorf("%s: GET %s = %d %v; want %d", when, path, got, body, status)
			}
			for _, v := range body {
				if strings.Contains(v, "10.0.0.7") || strings.Contains(v, "timeout") {
					t.Errorf("%s: GET %s names the cause: %v", when, path, body)
				}
			}
		}
	}
	all := func(status int) map[string]int {
		return map[string]int{"/healthz": status, "/readyz": status, "/livez": 200}
	}
	expect("store reachable", all(200))
	s.cut.Store(true)
	expect("partition within the grace", all(200))
	if _, body := probeGet(t, h, "/healthz"); body["store"] != "unreachable" {
		t.Errorf("within the grace, /healthz = %v; want the store reported unreachable", body)
	}
	time.Sleep(grace)
	expect("partition past the grace", all(503))
	s.cut.Store(false)
	expect("healed", all(200))
}

// A grace of 0 fails the checks at the first failed ping; the in-memory
// default store is always reachable; a negative grace is refused.
func TestHealthGrace(t *testing.T) {
	t.Parallel()
	mem := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = mem.(io.Closer).Close() })
	s := &partitionedStore{IdempotencyStore: mem}
	s.cut.Store(true)
	reg := build(t, carmy.New().Store(s).HealthGrace(0).Logger(quietLogger()))
	if got, _ := probeGet(t, reg.Handler(), "/readyz"); got != 503 {
		t.Errorf("GET /readyz with grace 0 and no store = %d; want 503", got)
	}
	def := build(t, carmy.New().Logger(quietLogger()))
	if got, body := probeGet(t, def.Handler(), "/healthz"); got != 200 || body["store"] != "ok" {
		t.Errorf("GET /healthz of the in-memory store = %d %v; want 200, store ok", got, body)
	}
	if _, err := carmy.New().HealthGrace(-time.Second).Build(); err == nil {
		t.Error("Build with a negative health grace succeeded")
	}
}
