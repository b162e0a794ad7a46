//go:build !race

package carmy_test

import (
	"context"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/benchtools"
)

// maxExecuteAllocs is the number of heap allocations one Registry.Execute
// of a small tool makes (two input fields, a one-field output, a
// parallel-safe write, no request id): the figure measured when this check
// was written, on Go 1.26 for linux/amd64. An allocation added to the call
// path fails TestExecuteAllocs. When a change saves allocations, lower the
// constant to the new figure, so that the saving is kept.
//
// The count covers every goroutine, the caller's and the worker's that
// runs the tool, which is why it is measured with AllocsPerRun and not in
// a benchmark of one goroutine. The race detector changes the counts,
// hence the build tag.
//
// The figure rose from 12 to 15 when executions stopped reusing their job
// (the job, its channel) from a sync.Pool: side by side the pool bought no
// time per call, and its recycling protocol (who may put a job back, when
// a caller gave up on it) was a source of bugs for nothing.
const maxExecuteAllocs = 10

func TestExecuteAllocs(t *testing.T) {
	// Serial: AllocsPerRun counts every goroutine's allocations.
	if testing.Short() {
		t.Skip("measures allocations; not in -short")
	}
	reg, err := carmy.New().
		Tool(carmy.Tool(benchtools.CreateOrderFunc, carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Register(false))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	call := carmy.Call{Tool: "create_order", Input: []byte(benchtools.SmallInput)}
	execute := func() {
		if _, err := reg.Execute(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	execute() // the worker goroutine, pools and caches are ready from here on
	got := testing.AllocsPerRun(1000, execute)
	if got > maxExecuteAllocs {
		t.Fatalf("Execute of a small tool makes %v allocations, more than the %d it made when measured: an allocation was added to the call path (see maxExecuteAllocs)", got, maxExecuteAllocs)
	}
	if got < maxExecuteAllocs {
		t.Logf("Execute of a small tool makes %v allocations, fewer than the %d allowed: lower maxExecuteAllocs to keep the saving", got, maxExecuteAllocs)
	}
}
