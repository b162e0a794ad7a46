package redisstore_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/redisstore"
)

type RebuildIndex struct {
	Shard string `json:"shard" validate:"required"`
}

// rebuildIndex is not parallel-safe: one execution at a time across every
// host. It passes its fence to the resource it writes, which refuses a
// writer whose lock has since passed to another host.
var rebuildIndexTool = carmy.Tool(func(ctx carmy.Context, in RebuildIndex) (string, error) {
	// e.g. UPDATE shards SET ..., fence = $fence WHERE name = $shard AND fence < $fence
	_ = ctx.Fence
	return "rebuilt " + in.Shard, nil
}, carmy.Write, carmy.Name("rebuild_index"), carmy.Register(false))

// Several hosts share one Redis: give each registry the same store as its
// idempotency store and its locker.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	s := redisstore.New(client, redisstore.WithPrefix("orders:"))
	defer s.Close()

	b := carmy.New().Tool(rebuildIndexTool).Store(s).Locker(s)
	log.Fatal(b.Listen(context.Background(), "127.0.0.1:3000"))
}

// The same by URL, as carmy.toml's store_url or CARMY_STORE_URL give it:
// importing the package registers the redis and rediss schemes.
func Example_uRL() {
	reg, err := carmy.New().Tool(rebuildIndexTool).
		StoreURL("redis://127.0.0.1:6379/0?prefix=orders:").
		Build()
	if err != nil {
		log.Fatal(err) // a malformed URL; an unreachable Redis is not an error here
	}
	defer reg.Close() // also closes the client the URL opened
}
