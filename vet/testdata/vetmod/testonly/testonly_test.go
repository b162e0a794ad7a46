package testonly

import (
	"context"
	"testing"

	"github.com/carmy-dev/carmy"
)

// Probe is documented, but declared in a test file: carmy gen does not
// read test files, so no generated file is expected.
type Probe struct {
	// Value probed.
	Value int `json:"value"`
}

func probe(ctx context.Context, in Probe) error { return nil }

func TestProbe(t *testing.T) {
	// Problems in test files are reported all the same.
	_ = carmy.Tool(probe, 0, carmy.Register(false)) // want `^carmy: tool "probe" has no effect`
}
