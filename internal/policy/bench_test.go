//go:build unix

package policy

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDecide: 100 policies, each scoped to one tool with a when over
// the input; one call decision with its context built.
func BenchmarkDecide(b *testing.B) {
	var tools []Tool
	var src strings.Builder
	for i := range 100 {
		name := fmt.Sprintf("tool_%d", i)
		tools = append(tools, Tool{Name: name, Effect: "write", InputSchema: testTools[0].InputSchema})
		fmt.Fprintf(&src, "permit(principal, action == Action::\"call\", resource == Tool::%q) when { context.input.count < %d && context.input.to != \"mallory\" };\n", name, 100+i)
	}
	cat := NewCatalog(tools)
	s, err := Parse(cat, "bench.cedar", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(cat, s)
	req := Request{Action: Call, Principal: "alice", Permissions: []string{"tools:write"}, Metadata: map[string]string{"team": "ops"},
		Tool: "tool_57", Input: []byte(`{"amount":12.5,"to":"bob","count":3}`), Door: "http"}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		d, _ := e.Decide(req)
		if !d.Allow {
			b.Fatal(d)
		}
	}
	// The CPU the decisions took, which a busy machine does not inflate
	// as it does the wall time of ns/op.
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
