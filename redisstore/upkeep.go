package redisstore

import (
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// upkeepPoolSize is the size of the pool a store keeps for its own upkeep.
const upkeepPoolSize = 4

// failoverAddr is the address go-redis gives the options of a client made
// by redis.NewFailoverClient.
const failoverAddr = "FailoverClient"

// upkeep is the client of a store's own upkeep: renewing the leases its
// host holds, and watching for, and recovering from, a Redis that lost its
// state. It is a small pool of its own, with the caller's client's
// options, so that a host whose calls keep every connection of the
// caller's pool busy (a burst of retries, thousands of waiters) never
// makes its renewals wait behind them until their leases lapse, which
// would let another host run the same request. For a client whose options
// cannot be copied (a Ring), or whose copy would not follow a failover (a
// Sentinel client, whose own pool alone is told of a new primary), it is
// the caller's client.
type upkeep struct {
	caller redis.UniversalClient
	own    redis.UniversalClient // nil when the caller's client serves
	closed atomic.Bool
}

func newUpkeep(c redis.UniversalClient) *upkeep {
	u := &upkeep{caller: c}
	// The copies leave out the caller's MaintNotificationsConfig: its
	// client writes that config (under a lock of its own) while it
	// connects, so reading it here would race. They turn maintenance
	// notifications off: a copy shares the caller's push notification
	// processor, whose handlers the caller's client registered already, so
	// go-redis's default (auto) would log a failed registration on every
	// connection, and the upkeep's few short commands need no hand-off.
	switch c := c.(type) {
	case *redis.Client:
		if c.Options().Addr == failoverAddr {
			break
		}
		o := *c.Options()
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.PipelinePoolSize = upkeepPoolSize, 0, upkeepPoolSize, 0, 1
		u.own = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns, o.PipelinePoolSize = upkeepPoolSize, 0, upkeepPoolSize, 0, 1
		u.own = redis.NewClusterClient(&o)
	}
	return u
}

// get returns the client to use now: the store's own pool until the store
// closes, the caller's after.
func (u *upkeep) get() redis.UniversalClient {
	if u.own == nil || u.closed.Load() {
		return u.caller
	}
	return u.own
}

// close hands the upkeep to the caller's client and closes the store's own
// pool: leases still held after the store closes are renewed through the
// caller's client (a renewal in flight on the closed pool fails once and
// is tried again).
func (u *upkeep) close() {
	if u.own != nil && !u.closed.Swap(true) {
		_ = u.own.Close()
	}
}
