package store_test

import (
	"testing"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryTasksConformance(t *testing.T) {
	storetest.TestTaskStore(t, func(*testing.T) store.TaskStore { return store.NewMemoryTasks() })
}
