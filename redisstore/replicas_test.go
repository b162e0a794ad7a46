package redisstore

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// startReplica starts a replica of primary and waits until it is in sync.
func startReplica(t *testing.T, primary *server) *server {
	t.Helper()
	// The replica writes the primary's snapshot to its directory.
	r := startServer(t, freePort(t), "--replicaof", "127.0.0.1", strconv.Itoa(primary.port), "--dir", t.TempDir())
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		info, _ := c.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the replica did not sync: %s", info)
		}
	}
}

// With replicas=1, Complete returns once the replica holds the outcome, so
// a failover to it keeps the outcome; while the replica does not answer,
// Complete fails after the replica timeout with ErrNotReplicated (the
// outcome is on the primary), and succeeds, recording nothing twice, once
// the replica is back.
func TestCompleteWaitsForReplicas(t *testing.T) {
	redisURL(t) // only where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server (bash .ci/run does)")
	}
	// A replica that runs confirms within the generous timeout however
	// loaded the machine; the stopped one is waited for the short one.
	const generous, timeout = 10 * time.Second, 300 * time.Millisecond
	primary := startServer(t, freePort(t), "--repl-diskless-sync-delay", "0")
	replica := startReplica(t, primary)
	c := redis.NewClient(&redis.Options{Addr: primary.addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	rc := redis.NewClient(&redis.Options{Addr: replica.addr()})
	t.Cleanup(func() { _ = rc.Close() })
	running := newStore(t, c, "carmy:", WithLogger(quiet), WithReplicas(1, generous))
	s := newStore(t, c, "carmy:", WithLogger(quiet), WithReplicas(1, timeout))
	ctx := context.Background()
	complete := func(s *Store, id string) (time.Duration, error) {
		key := store.Key{Principal: "agent", Tool: "pay", RequestID: id}
		r, err := s.Begin(ctx, key, "d", time.Minute)
		if err != nil || !r.Owned {
			t.Fatalf("Begin = %+v, %v", r, err)
		}
		start := time.Now()
		err = s.Complete(ctx, key, r.Token, store.Record{Digest: "d", ExecutionID: "exec-" + id}, time.Hour)
		if errors.Is(err, ErrNotReplicated) {
			// Called again, as the runtime does, once the replica is back.
			_ = replica.cmd.Process.Signal(syscall.SIGCONT)
			if again := s.Complete(ctx, key, r.Token, store.Record{Digest: "d", ExecutionID: "exec-" + id}, time.Hour); again != nil {
				t.Fatalf("Complete called again with the replica back = %v", again)
			}
		}
		return time.Since(start), err
	}
	onReplica := func(id string) string {
		return rc.HGet(ctx, s.idemKey(store.Key{Principal: "agent", Tool: "pay", RequestID: id}), "e").Val()
	}

	for i := range 20 {
		id := "r" + strconv.Itoa(i)
		if _, err := complete(running, id); err != nil {
			t.Fatal(err)
		}
		// Read at once, with no pause: the record is there because
		// Complete waited for it.
		if got := onReplica(id); got != "exec-"+id {
			t.Fatalf("the replica holds %q for %s right after Complete; want exec-%s", got, id, id)
		}
	}

	if err := replica.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took, err := complete(s, "stopped")
	if !errors.Is(err, ErrNotReplicated) || took < timeout {
		t.Fatalf("Complete with the replica stopped = %v after %v; want ErrNotReplicated after %v", err, took, timeout)
	}
	for start := time.Now(); onReplica("stopped") != "exec-stopped"; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the outcome never reached the replica")
		}
	}
}
