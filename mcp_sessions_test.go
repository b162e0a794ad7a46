//go:build !race

package carmy_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// The race detector makes opening 10,000 sessions several times slower and
// changes the heap's figures, hence the build tag; CI runs this test
// without it.

// TestMCPSessionsAbandoned: one principal opens 10,000 sessions and
// abandons them. At most MaxSessions stay open, and once the idle timeout
// passed, the goroutines and the heap are back where they were.
func TestMCPSessionsAbandoned(t *testing.T) {
	// Serial: it measures the whole process's goroutines and heap.
	const timeout = 200 * time.Millisecond
	reg, err := carmy.New().SessionTimeout(timeout).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice"},
	)).Tool((&hostTools{}).defs()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	h := reg.Handler()
	open := func() {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer alice-secret")
		req.Host = "localhost" // httptest's example.com is not a name a loopback server answers to
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Header().Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
		}
	}
	// Warm up: the first session builds the server and its caches.
	open()
	waitFor(t, "the warm-up session to close", func() bool { return carmy.OpenSessions(reg) == 0 })
	heapBefore, goroutinesBefore := settledHeap(), runtime.NumGoroutine()

	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	for range n {
		open()
	}
	heapPeak := settledHeap()
	if open := carmy.OpenSessions(reg); open > carmy.DefaultMaxSessions {
		t.Fatalf("%d sessions open after %d, want at most %d", open, n, carmy.DefaultMaxSessions)
	}
	deadline := time.Now().Add(5 * time.Second)
	var heapAfter uint64
	var goroutinesAfter int
	for {
		time.Sleep(timeout)
		heapAfter, goroutinesAfter = settledHeap(), runtime.NumGoroutine()
		if carmy.OpenSessions(reg) == 0 && goroutinesAfter <= goroutinesBefore && float64(heapAfter) <= 1.1*float64(heapBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the idle timeout: %d sessions open, %d goroutines (%d before), heap %d bytes (%d before)",
				carmy.OpenSessions(reg), goroutinesAfter, goroutinesBefore, heapAfter, heapBefore)
		}
	}
	t.Logf("%d sessions: heap %d KiB before, %d KiB with %d open, %d KiB after; goroutines %d before, %d after",
		n, heapBefore>>10, heapPeak>>10, carmy.DefaultMaxSessions, heapAfter>>10, goroutinesBefore, goroutinesAfter)
}

func settledHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
