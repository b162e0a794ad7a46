package redisstore

import (
	"context"
	"crypto/rand"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

var _ store.KeyStore = (*Store)(nil)

// sharedKeyScript returns the key in KEYS[1], first setting it to ARGV[1]
// when there is none: of hosts that ask at once, the first sets it and
// every one gets it.
var sharedKeyScript = redis.NewScript(`
local k = redis.call('GET', KEYS[1])
if k then
	return k
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// SharedKey returns the key of that name, kept under prefix + "key:" +
// name (query-escaped), with no expiry: made at random by the first host
// that asks, and the same for every host that uses this Redis and prefix.
// A Redis that loses its data makes a new one: what hosts signed before
// then no longer verifies, and clients of the sessionless protocol
// confirm again.
func (s *Store) SharedKey(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, store.SharedKeySize)
	_, _ = rand.Read(fresh) // crypto/rand's Read never fails
	k, err := sharedKeyScript.Run(ctx, s.client, []string{s.prefix + "key:" + url.QueryEscape(name)}, fresh).Text()
	if err != nil {
		return nil, failure(ctx, err)
	}
	return []byte(k), nil
}
