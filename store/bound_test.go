//go:build !race

package store_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// Request ids of the longest kind from many principals: the store holds
// the global cap and no more, and its memory stays in proportion. The race
// detector changes the heap figures and slows the test fourfold, hence the
// build tag.
// docs/reliability.md reports the figure (go test -v -run TestMemoryStoreBoundedWithLongRequestIDs).
func TestMemoryStoreBoundedWithLongRequestIDs(t *testing.T) {
	const principals, perPrincipal = 5_000, 40 // twice the default global cap in all
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := store.NewMemoryStore(0, 0)
	s.(store.Windowed).SetWindow(0) // the cap evicts: this test measures the records it keeps
	defer s.(io.Closer).Close()
	digest := strings.Repeat("d", 64)
	for p := range principals {
		principal := fmt.Sprintf("principal-%d", p)
		for i := range perPrincipal {
			id := fmt.Sprintf("%03d", i) + strings.Repeat("x", 252) // 255 bytes
			k := store.Key{Principal: principal, Tool: "create_order", RequestID: id}
			r, err := s.Begin(ctx, k, digest, time.Minute)
			if err != nil || !r.Owned {
				t.Fatal(r, err)
			}
			rec := store.Record{Digest: digest, ExecutionID: "01234567-89ab-7def-8123-456789abcdef", Output: []byte(`{"order_id":1234567}`)}
			if err := s.Complete(ctx, k, r.Token, rec, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := memLen(s)
	if held != store.DefaultGlobalLimit {
		t.Fatalf("the store holds %d records after %d; want the global cap, %d", held, principals*perPrincipal, store.DefaultGlobalLimit)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d principals × %d request ids of 255 bytes: %d records held, heap %+.1f MiB (%d bytes a record)",
		principals, perPrincipal, held, float64(grown)/(1<<20), grown/int64(held))
	if perRecord := grown / int64(held); perRecord > 2048 {
		t.Errorf("a record costs %d bytes of heap; want well under 2 KiB for a 255-byte request id and a small output", perRecord)
	}
	runtime.KeepAlive(s)
}
