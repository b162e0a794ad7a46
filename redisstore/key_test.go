package redisstore

import (
	"testing"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

// Hosts that share a Redis and prefix share their keys.
func TestKeyStoreConformance(t *testing.T) {
	c := newClient(t)
	storetest.TestKeyStore(t, func(t *testing.T, n int) []store.KeyStore {
		out := make([]store.KeyStore, n)
		for i, h := range hosts(t, c, testPrefix(t, c), n) {
			out[i] = h
		}
		return out
	})
}
