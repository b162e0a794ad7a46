package store_test

import (
	"io"
	"slices"
	"testing"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryKeyStoreConformance(t *testing.T) {
	storetest.TestKeyStore(t, func(t *testing.T, n int) []store.KeyStore {
		s := store.NewMemoryStore(0, 0)
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
		return slices.Repeat([]store.KeyStore{s.(store.KeyStore)}, n)
	})
}
