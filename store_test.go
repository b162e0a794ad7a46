package carmy_test

import (
	"io"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.TestIdempotencyStore(t, func(t *testing.T) carmy.IdempotencyStore {
		s := carmy.NewMemoryStore(0)
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
		return s
	})
}

func TestMemoryLockerConformance(t *testing.T) {
	storetest.TestLocker(t, func(*testing.T) carmy.Locker { return carmy.NewMemoryLocker() })
}
