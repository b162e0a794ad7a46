package carmy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them:
// tools left running, sweepers of registries never closed.
func TestMain(m *testing.M) {
	if runStdioUpstream() { // the test binary as a mount's child
		return
	}
	goleak.VerifyTestMain(m)
}
