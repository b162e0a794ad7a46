package store

import (
	"errors"
	"fmt"

	"github.com/carmy-dev/carmy/internal/schemes"
)

// Opener opens the shared idempotency store and locker that a URL names,
// such as "redis://host:6379/0". When the returned values implement
// io.Closer, their user closes them when done (each once; one value
// returned as both is closed twice, so its Close must be idempotent).
type Opener func(url string) (IdempotencyStore, Locker, error)

var openers schemes.Registry[Opener]

// Register makes a store available to [Open] (and so to the builder's
// StoreURL and the store_url setting of carmy.toml) under a URL scheme.
// Store packages call it from init, as database/sql drivers do:
//
//	import _ "github.com/carmy-dev/carmy/redisstore" // registers "redis" and "rediss"
//
// Registering a scheme again replaces its opener.
func Register(scheme string, open Opener) { openers.Register(scheme, open) }

// Open opens the store and locker that url names, with the [Opener]
// registered for its scheme. Its own errors never repeat the URL, which
// may hold a password.
func Open(url string) (IdempotencyStore, Locker, error) {
	scheme, open, ok := openers.Lookup(url)
	switch {
	case scheme == "":
		return nil, nil, errors.New("the store URL has no scheme, such as redis:// (the URL is not shown: it may hold a password)")
	case !ok:
		return nil, nil, fmt.Errorf("no store is registered for %q URLs: import its package, such as _ \"github.com/carmy-dev/carmy/redisstore\"", scheme)
	}
	return open(url)
}
