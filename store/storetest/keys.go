package storetest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy/store"
)

// TestKeyStore runs the key suite. newStores must return n handles on one
// fresh store, whose keys no other store shares, as n hosts of one
// deployment hold it (for an in-memory store, n times the same one).
func TestKeyStore(t *testing.T, newStores func(t *testing.T, n int) []store.KeyStore) {
	ctx := context.Background()
	get := func(t *testing.T, s store.KeyStore, name string) []byte {
		t.Helper()
		k, err := s.SharedKey(ctx, name)
		if err != nil {
			t.Fatalf("SharedKey(%q): %v", name, err)
		}
		if len(k) != store.SharedKeySize {
			t.Fatalf("SharedKey(%q) is %d bytes long; want %d", name, len(k), store.SharedKeySize)
		}
		return k
	}

	t.Run("a key is made once and kept", func(t *testing.T) {
		s := newStores(t, 1)[0]
		first := get(t, s, "state")
		if bytes.Equal(first, make([]byte, store.SharedKeySize)) {
			t.Fatal("SharedKey returned zeros")
		}
		if again := get(t, s, "state"); !bytes.Equal(again, first) {
			t.Fatal("SharedKey returned another key the second time")
		}
		if other := get(t, s, "other"); bytes.Equal(other, first) {
			t.Fatal("two names share a key")
		}
	})

	t.Run("every host gets the same key", func(t *testing.T) {
		hosts := newStores(t, 4)
		keys := make([][]byte, 8*len(hosts))
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() {
				k, err := hosts[i%len(hosts)].SharedKey(ctx, "state")
				if err != nil {
					t.Error(err)
				}
				keys[i] = k
			})
		}
		wg.Wait()
		for i, k := range keys {
			if !bytes.Equal(k, keys[0]) {
				t.Fatalf("call %d (host %d) got another key than call 0", i, i%len(hosts))
			}
		}
	})

	t.Run("a key is the store's own, made at random", func(t *testing.T) {
		a, b := get(t, newStores(t, 1)[0], "state"), get(t, newStores(t, 1)[0], "state")
		if bytes.Equal(a, b) {
			t.Fatal("two stores made the same key")
		}
	})

	t.Run("a changed copy changes nothing", func(t *testing.T) {
		s := newStores(t, 1)[0]
		k := get(t, s, "state")
		want := bytes.Clone(k)
		k[0] ^= 0xff
		if again := get(t, s, "state"); !bytes.Equal(again, want) {
			t.Fatal("changing the returned key changed the store's")
		}
	})
}
