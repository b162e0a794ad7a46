package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
)

// The tests that need Redis read its address from CARMY_REDIS_URL and skip
// without it. .ci/run starts a server and sets it; by hand:
//
//	redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes
//	CARMY_REDIS_URL=redis://127.0.0.1:6390/0 go test -race ./...
const envURL = "CARMY_REDIS_URL"

const skipMessage = "no Redis to test against: set " + envURL + " to a server's URL, such as " +
	"CARMY_REDIS_URL=redis://127.0.0.1:6390/0 after `redis-server --port 6390 --bind 127.0.0.1 --save '' --daemonize yes` " +
	"(bash .ci/run does both); the tests write keys under a random prefix and delete them"

// TestMain keeps go-redis's own log (its reports of failed dials, which the
// failure tests provoke) out of the output unless the tests run with -v.
func TestMain(m *testing.M) {
	flag.Parse()
	redis.SetLogger(testRedisLog())
	os.Exit(m.Run())
}

// testRedisLog is go-redis's log in the tests: discarded unless they run
// with -v.
func testRedisLog() interface {
	Printf(context.Context, string, ...any)
} {
	if testing.Verbose() {
		return stderrLog{}
	}
	return discardLog{}
}

type stderrLog struct{}

func (stderrLog) Printf(_ context.Context, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "redis: "+format+"\n", args...)
}

type discardLog struct{}

func (discardLog) Printf(context.Context, string, ...any) {}

// redisURL returns the test server's URL, or skips the test.
func redisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(envURL)
	if u == "" {
		t.Skip(skipMessage)
	}
	return u
}

// newClient returns a client of the test server, closed after the test.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatalf("%s: %v", envURL, err)
	}
	o.ContextTimeoutEnabled = true // as docs/deployment.md recommends
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s=%s does not answer: %v", envURL, o.Addr, err)
	}
	return c
}

// testPrefix returns a key prefix no other test uses, and deletes its keys
// after the test.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	p := newPrefix()
	t.Cleanup(func() { deleteKeys(c, p) })
	return p
}

// newPrefix returns a key prefix no other test uses.
func newPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "carmytest:" + hex.EncodeToString(b[:]) + ":"
}

// deleteKeys deletes the keys under prefix, in a bounded number of scans.
func deleteKeys(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cursor uint64
	for range 10_000 {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// quiet is a logger for stores whose tests provoke warnings on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newStore returns a store on the test server under prefix, closed after
// the test: one "host".
func newStore(t testing.TB, c redis.UniversalClient, prefix string, opts ...Option) *Store {
	t.Helper()
	s := New(c, append([]Option{WithPrefix(prefix)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// build builds b, failing the test on an error, and closes the registry
// when the test ends.
func build(t testing.TB, b *carmy.Builder) *carmy.Registry {
	t.Helper()
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}
