//go:build race

package carmy_test

import "time"

// The hostile-neighbours test scaled down for the race detector, which
// slows every call several times; the bounds shrink with the flood, so that it
// still exceeds the global cap twice and A's limit twentyfold.
const (
	neighbourFlood     = 25_000
	neighbourLimit     = 1_250
	neighbourGlobal    = 12_500
	neighbourCalls     = 250
	neighbourAbandoned = 50
	blobFlood          = 12 // enough past the bound of 4 MiB, at a cost the race detector bears
)

// neighbourLatencyFloor is the p99 below which B's latency under the flood
// passes whatever its ratio to the quiet run.
const neighbourLatencyFloor = 500 * time.Millisecond
