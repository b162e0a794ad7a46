package carmy_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// sharedStore is a store that is also a locker, as shared stores are.
type sharedStore struct {
	store.IdempotencyStore
	store.Locker
	acquired int
}

func (s *sharedStore) Acquire(ctx context.Context, name string, lease time.Duration) (store.Lock, error) {
	s.acquired++
	return s.Locker.Acquire(ctx, name, lease)
}

func TestStoreThatIsALockerSerializes(t *testing.T) {
	t.Parallel()
	mem := store.NewMemoryStore(0, 0)
	defer mem.(io.Closer).Close()
	s := &sharedStore{IdempotencyStore: mem, Locker: store.NewMemoryLocker()}
	tool := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("serial"), carmy.Register(false))
	reg, err := carmy.New().Tool(tool).Store(s).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "serial"}); err != nil {
		t.Fatal(err)
	}
	if s.acquired != 1 {
		t.Fatalf("the shared store's locker was asked %d times; Store alone must serialize across hosts", s.acquired)
	}
}
