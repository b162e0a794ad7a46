package redisstore

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A renewal that finds its reservation replaced by its own outcome (a
// Complete whose reply was late or lost, as with a slow Redis, got there
// first) stops quietly; one that finds another execution's reservation
// reports the loss.
func TestRenewalFindingItsOwnOutcomeStopsQuietly(t *testing.T) {
	const lease = 150 * time.Millisecond
	for _, tc := range []struct {
		name   string
		record func(s *Store, key store.Key, token string)
		logged bool
	}{
		{"its own outcome", func(s *Store, key store.Key, token string) {
			// Complete's script ran; its reply never came back.
			if err := completeScript.Run(context.Background(), s.client, []string{s.idemKey(key), s.recordsKey(key.Principal)},
				token, "d", "exec-1", "", "", 60_000, s.channel, 10, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another execution's reservation", func(s *Store, key store.Key, _ string) {
			s.client.HSet(context.Background(), s.idemKey(key), "t", "another-token")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			c := newClient(t)
			s := newStore(t, c, testPrefix(t, c), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			key := store.Key{Principal: "agent", Tool: "pay", RequestID: "slow"}
			r, err := s.Begin(context.Background(), key, "d", lease)
			if err != nil || !r.Owned {
				t.Fatalf("Begin = %+v, %v", r, err)
			}
			tc.record(s, key, r.Token)
			logged := func() bool { return strings.Contains(logs.String(), "lost an idempotency reservation") }
			if !tc.logged {
				time.Sleep(3 * lease) // several renewals fall due
				if logged() {
					t.Fatalf("a renewal that found its own outcome logged a loss:\n%s", logs.String())
				}
				return
			}
			for start := time.Now(); !logged(); time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 10*time.Second {
					t.Fatal("a renewal that found another execution's reservation logged nothing")
				}
			}
		})
	}
}
