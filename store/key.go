package store

import (
	"context"
	"crypto/rand"
	"sync"
)

// SharedKeySize is the length in bytes of the keys a [KeyStore] makes.
const SharedKeySize = 32

// KeyStore is an optional capability of an [IdempotencyStore]: a secret
// key shared by every host that uses the store, so that what one host
// signs another verifies. The runtime signs with it the request state it
// hands clients of the sessionless MCP protocol, so that the second round
// of a call may land on any host of the deployment.
//
// SharedKey returns the key of that name: [SharedKeySize] random bytes
// (from crypto/rand), made by the first call of any host and returned
// unchanged to every later call of every host, for as long as the store
// keeps its data. Concurrent first calls agree on one key. A store that
// loses its data makes a new key on the next call: what was signed with
// the old one no longer verifies. Implementations must be safe for
// concurrent use and pass the key suite of the storetest package.
type KeyStore interface {
	SharedKey(ctx context.Context, name string) ([]byte, error)
}

// sharedKeys are the keys of an in-memory store.
type sharedKeys struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func (k *sharedKeys) get(name string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.keys[name]; ok {
		return append([]byte(nil), key...)
	}
	if k.keys == nil {
		k.keys = map[string][]byte{}
	}
	key := make([]byte, SharedKeySize)
	_, _ = rand.Read(key) // crypto/rand's Read never fails
	k.keys[name] = key
	return append([]byte(nil), key...)
}

var _ KeyStore = (*memoryStore)(nil)

// SharedKey returns the key of that name, made at random on the first
// call: the store serves one process, and every registry given it shares
// its keys.
func (s *memoryStore) SharedKey(_ context.Context, name string) ([]byte, error) {
	return s.keys.get(name), nil
}
