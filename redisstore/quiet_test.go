package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// capturedLog keeps what go-redis logs.
type capturedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *capturedLog) Printf(_ context.Context, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// A healthy connection to Redis logs nothing: a store opened from a URL,
// and one given a client, on a single server and on a Cluster, start, work
// and close without a line in go-redis's own log (which printed a failed
// maintnotifications handler for every connection).
func TestHealthyConnectionLogsNothing(t *testing.T) {
	log := &capturedLog{}
	redis.SetLogger(log)
	t.Cleanup(func() { redis.SetLogger(testRedisLog()) })
	ctx := context.Background()
	use := func(t *testing.T, s *Store) {
		t.Helper()
		k := store.Key{Principal: "p", Tool: "t", RequestID: "r"}
		r, err := s.Begin(ctx, k, "d", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, k, r.Token); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a URL", func(t *testing.T) {
		c := newClient(t)
		idem, _, err := store.Open(redisURL(t) + "?prefix=" + testPrefix(t, c))
		if err != nil {
			t.Fatal(err)
		}
		use(t, idem.(*Store))
		_ = idem.(*Store).Close()
	})
	t.Run("a client", func(t *testing.T) {
		c := newClient(t)
		for range 3 { // hosts sharing one client
			use(t, newStore(t, c, testPrefix(t, c)))
		}
	})
	t.Run("a Cluster", func(t *testing.T) {
		c := newClusterClient(t)
		for range 3 {
			use(t, newStore(t, c, clusterPrefix(t, c)))
		}
	})
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.lines) > 0 {
		t.Errorf("go-redis logged %d lines on healthy connections; want none:\n%s", len(log.lines), strings.Join(log.lines, "\n"))
	}
}
