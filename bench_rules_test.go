package carmy_test

import (
	"testing"

	"github.com/carmy-dev/carmy/internal/benchtools"
)

// BenchmarkRules measures what each runtime rule adds to the same small
// tool: the plain call, an idempotent first call, an idempotent replay and
// a tool that is not parallel-safe, alone and under 8 concurrent callers.
// The bench module runs the same benchmark next to the other libraries.
//
//	go test -run '^$' -bench Rules -benchmem .
func BenchmarkRules(b *testing.B) { benchtools.Rules(b) }
