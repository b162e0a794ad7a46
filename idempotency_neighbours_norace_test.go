//go:build !race

package carmy_test

import "time"

// The hostile-neighbours test at full size, with the store's default
// bounds: principal A's flood is twice the default global cap.
const (
	neighbourFlood     = 200_000
	neighbourLimit     = 0 // store.DefaultLimit
	neighbourGlobal    = 0 // store.DefaultGlobalLimit
	neighbourCalls     = 1_000
	neighbourAbandoned = 200
	// blobFlood is how many calls of 1 MiB TestApprovalsBoundedInBytes
	// makes: the attack at full size.
	blobFlood = 200
)

// neighbourLatencyFloor is the p99 below which B's latency under the flood
// passes whatever its ratio to the quiet run.
const neighbourLatencyFloor = 100 * time.Millisecond
