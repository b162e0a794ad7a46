package store

import "context"

// Pinger is an optional capability of an [IdempotencyStore] or a [Locker]
// served by a service of its own: Ping returns nil when the service
// answers within ctx, and the reason otherwise. A host's health endpoints
// ask it, so that a load balancer stops sending calls to a host that
// cannot reach its store. An in-process store, always reachable, does not
// implement it.
type Pinger interface {
	Ping(ctx context.Context) error
}
