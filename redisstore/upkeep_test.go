package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// A host whose calls keep every connection of its client busy still
// renews its leases: renewals go through the store's own pool, not behind
// the calls. Here the client has one connection, held by a blocking
// command for four leases; the reservation must outlive them.
func TestRenewalsDoNotWaitForTheCallersPool(t *testing.T) {
	const lease = time.Second
	o, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	o.PoolSize, o.PoolTimeout, o.ContextTimeoutEnabled = 1, time.Minute, true
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	prefix := testPrefix(t, c)
	s := newStore(t, c, prefix, WithLogger(quiet))
	ctx := context.Background()
	key := store.Key{Principal: "agent", Tool: "pay", RequestID: "busy"}
	r, err := s.Begin(ctx, key, "digest", lease)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	t.Cleanup(func() { _ = s.Release(context.Background(), key, r.Token) })

	blocked := make(chan error, 1)
	go func() { // the only connection of the client, busy for four leases
		blocked <- c.BLPop(ctx, 4*lease, prefix+"nothing").Err()
	}()
	time.Sleep(4 * lease)
	<-blocked

	check := newClient(t)
	if tok := check.HGet(ctx, s.idemKey(key), "t").Val(); tok != r.Token {
		t.Fatalf("after four leases with the client's pool busy, the reservation holds %q; want its token: it was not renewed", tok)
	}
}

// Closing a store closes its own pool, not the leases it holds: they go on
// being renewed, through the caller's client, until released.
func TestLeasesOutliveClose(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := newClient(t)
	prefix := testPrefix(t, c)
	s := New(c, WithPrefix(prefix), WithLogger(quiet))
	ctx := context.Background()
	key := store.Key{Principal: "agent", Tool: "pay", RequestID: "closing"}
	r, err := s.Begin(ctx, key, "digest", lease)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * lease)
	if tok := c.HGet(ctx, s.idemKey(key), "t").Val(); tok != r.Token {
		t.Fatalf("five leases after Close, the reservation holds %q; want its token", tok)
	}
	if err := s.Release(ctx, key, r.Token); err != nil {
		t.Fatal(err)
	}
}
