package redisstore

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
)

// startSentinel starts a Sentinel that monitors primary as "mymaster",
// with quorum 1 and a primary taken for down after 500 ms, and waits until
// it knows a replica to promote.
func startSentinel(t *testing.T, primary *server) *server {
	t.Helper()
	port := freePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 500\nsentinel failover-timeout mymaster 5000\n", port, primary.port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server --sentinel: %v", err)
	}
	s := &server{t: t, port: port, cmd: cmd}
	t.Cleanup(s.stop)
	c := redis.NewSentinelClient(&redis.Options{Addr: s.addr()})
	defer c.Close()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		replicas, err := c.Replicas(context.Background(), "mymaster").Result()
		if err == nil && len(replicas) > 0 {
			return s
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the Sentinel knows no replica of the primary: %v, %v", replicas, err)
		}
	}
}

// masterPort asks the Sentinel which port the primary has.
func masterPort(t *testing.T, sentinel *server) int {
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinel.addr()})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(context.Background(), "mymaster").Result()
	if err != nil || len(addr) != 2 {
		return 0
	}
	p, _ := strconv.Atoi(addr[1])
	return p
}

// Three hosts reach a Sentinel-managed primary by a redis-sentinel:// URL.
// Under load (every request id sent three times, to three hosts at once),
// the primary is killed; the Sentinel promotes its replica, the hosts
// follow it, and no request id runs twice: the promoted replica kept the
// store's marker, so new executions are held for one renewal interval
// while the hosts restore their reservations, and the outcomes it lacks
// (all those of its last 100 ms, when its replication stream is delayed).
// docs/reliability.md reports the runs (go test -v -run TestFailoverThroughSentinel).
func TestFailoverThroughSentinel(t *testing.T) {
	redisURL(t) // only where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: apt-get install redis-server redis-sentinel (bash .ci/run does)")
	}
	for _, lag := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(fmt.Sprintf("replica %v behind", lag), func(t *testing.T) { sentinelFailover(t, lag) })
	}
}

func sentinelFailover(t *testing.T, lag time.Duration) {
	const (
		ids    = 600
		spread = 3 * time.Second
		killAt = time.Second
	)
	primary := startServer(t, freePort(t), "--repl-diskless-sync-delay", "0")
	upstream := primary
	if lag > 0 {
		upstream = &server{port: delayingProxy(t, primary.addr(), lag)}
	}
	replica := startReplica(t, upstream)
	sentinel := startSentinel(t, primary)
	pay := newPay()
	regs := make([]*carmy.Registry, 3)
	for i := range regs {
		// A second, unreachable Sentinel address: the client asks the next.
		st, _, err := open(fmt.Sprintf("redis-sentinel://127.0.0.1:%d,%s/0?master=mymaster&dial_timeout=200ms", freePort(t), sentinel.addr()))
		if err != nil {
			t.Fatal(err)
		}
		s := st.(*Store)
		WithLogger(quiet)(s)
		regs[i] = faultHost(t, pay, s)
	}
	r := sendThrice(t, regs, ids, spread, func(start time.Time) string {
		time.Sleep(time.Until(start.Add(killAt)))
		primary.stop()
		killed := time.Now()
		for masterPort(t, sentinel) != replica.port {
			if time.Since(killed) > 30*time.Second {
				t.Error("the Sentinel did not promote the replica")
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Sprintf("primary killed at %v, replica %v behind promoted by the Sentinel %v later", killed.Sub(start).Round(time.Millisecond), lag, time.Since(killed).Round(time.Millisecond))
	})
	pay.check(t, ids, r)
}

// delayingProxy forwards connections to addr, delivering what addr sends
// lag late, as a replica far from its primary receives the replication
// stream; it returns its port.
func delayingProxy(t *testing.T, addr string, lag time.Duration) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				_ = down.Close()
				continue
			}
			t.Cleanup(func() { _ = up.Close(); _ = down.Close() })
			go func() { _, _ = io.Copy(up, down) }()
			type chunk struct {
				at time.Time
				b  []byte
			}
			chunks := make(chan chunk, 1024)
			go func() {
				defer close(chunks)
				for {
					b := make([]byte, 32<<10)
					n, err := up.Read(b)
					if n > 0 {
						chunks <- chunk{time.Now().Add(lag), b[:n]}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer down.Close()
				for c := range chunks {
					time.Sleep(time.Until(c.at))
					if _, err := down.Write(c.b); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}
