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

// BenchmarkRecatalog: a set of 100 policies (50 scoped to one tool, 50 to
// every tool, each with a when over the input) in force over 1,000 tools;
// one tool an upstream changes, validated and indexed.
func BenchmarkRecatalog(b *testing.B) {
	var tools []Tool
	for i := range 1000 {
		tools = append(tools, Tool{Name: fmt.Sprintf("tool_%d", i), Effect: "write", InputSchema: testTools[0].InputSchema})
	}
	var src strings.Builder
	for i := range 50 {
		fmt.Fprintf(&src, "permit(principal, action == Action::\"call\", resource == Tool::\"tool_%d\") when { context.input.count < %d };\n", i, 100+i)
		fmt.Fprintf(&src, "forbid(principal, action == Action::\"call\", resource) when { resource.effect == \"destructive\" && context.input.to == \"m%d\" };\n", i)
	}
	cat := NewCatalog(tools)
	s, err := Parse(cat, "bench.cedar", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(cat, s)
	changed := Tool{Name: "tool_7", Effect: "destructive", InputSchema: testTools[0].InputSchema}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if err := e.Recatalog(changed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
