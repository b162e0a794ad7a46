package redisstore

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

// The conformance suites against a real Redis Cluster read its nodes'
// addresses from CARMY_REDIS_CLUSTER_URLS (comma-separated host:port, or
// redis:// URLs) and skip without it. .ci/run starts a three-node cluster
// and sets it; by hand:
//
//	for p in 7001 7002 7003; do
//		redis-server --port $p --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes-$p.conf --save '' --daemonize yes
//	done
//	redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 --cluster-replicas 0 --cluster-yes
//	CARMY_REDIS_CLUSTER_URLS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 go test -race ./...
const envClusterURLs = "CARMY_REDIS_CLUSTER_URLS"

// newClusterClient returns a client of the test cluster, closed after the
// test, or skips the test.
func newClusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	v := os.Getenv(envClusterURLs)
	if v == "" {
		t.Skip("no Redis Cluster to test against: set " + envClusterURLs + " to its nodes' addresses, such as 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003, after creating a three-node cluster (see cluster_test.go; bash .ci/run does it)")
	}
	var addrs []string
	for a := range strings.SplitSeq(v, ",") {
		a = strings.TrimPrefix(strings.TrimSpace(a), "redis://")
		if a = strings.TrimSuffix(a, "/0"); a != "" {
			addrs = append(addrs, a)
		}
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatalf("%s=%s does not answer: %v", envClusterURLs, v, err)
	}
	return c
}

// clusterPrefix returns a key prefix no other test uses, and deletes its
// keys, on every master, after the test.
func clusterPrefix(t *testing.T, c *redis.ClusterClient) string {
	t.Helper()
	p := newPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			iter := n.Scan(ctx, 0, p+"*", 1000).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val()) // one key at a time: keys of several slots
			}
			return iter.Err()
		})
	})
	return p
}

// The suites the single server passes, against a three-node Redis
// Cluster, with the store's hosts on a cluster client: the hash tags keep
// each script's keys in one slot, and notifications reach every host.
func TestClusterConformance(t *testing.T) {
	c := newClusterClient(t)
	t.Run("store", func(t *testing.T) {
		storetest.TestIdempotencyStore(t, func(t *testing.T, limit int) store.IdempotencyStore {
			return &roundRobin{hosts: clusterHosts(t, c, limit)}
		})
	})
	t.Run("locker", func(t *testing.T) {
		storetest.TestLocker(t, func(t *testing.T) store.Locker {
			return &roundRobin{hosts: clusterHosts(t, c, 0)}
		})
	})
	t.Run("approvals", func(t *testing.T) {
		storetest.TestApprovalStore(t, func(t *testing.T) store.ApprovalStore {
			return &approvalsRoundRobin{hosts: clusterHosts(t, c, 0)}
		})
	})
	t.Run("tasks", func(t *testing.T) {
		storetest.TestTaskStore(t, func(t *testing.T) store.TaskStore {
			return &tasksRoundRobin{hosts: clusterHosts(t, c, 0)}
		})
	})
}

// clusterHosts returns three stores on the cluster under one fresh prefix.
func clusterHosts(t *testing.T, c *redis.ClusterClient, limit int) []*Store {
	prefix := clusterPrefix(t, c)
	out := make([]*Store, 3)
	for i := range out {
		out[i] = newStore(t, c, prefix, WithLogger(quiet), WithLimit(limit))
	}
	return out
}
