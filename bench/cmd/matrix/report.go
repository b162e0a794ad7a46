package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/carmy-dev/carmy/bench/internal/matrix"
)

// names are the implementations as the report names them.
var names = map[string]string{
	matrix.GoSDK:          "go-sdk v1.8.0, stateful",
	matrix.GoSDKStateless: "go-sdk v1.8.0, stateless",
	matrix.MCPGo:          "mcp-go v1.2.1",
	matrix.CarmyBare:      "carmy, bare",
	matrix.CarmyGoverned:  "carmy, fully governed",
}

// goal is one of the performance goals, checked on the ratios of each
// repetition.
type goal struct {
	text  string
	value func(rep map[matrix.Cell]matrix.Result) (float64, bool)
	unit  string
	ok    func(float64) bool
}

func cpuOf(r map[matrix.Cell]matrix.Result, impl, door string) (float64, bool) {
	x, ok := r[matrix.Cell{Impl: impl, Door: door}]
	return x.CPUPerCall, ok && x.CPUPerCall > 0
}

func rpsOf(r map[matrix.Cell]matrix.Result, impl, door string) (float64, bool) {
	x, ok := r[matrix.Cell{Impl: impl, Door: door}]
	return x.RPS, ok && x.RPS > 0
}

func ratio(f func(map[matrix.Cell]matrix.Result, string, string) (float64, bool), a, b matrix.Cell) func(map[matrix.Cell]matrix.Result) (float64, bool) {
	return func(r map[matrix.Cell]matrix.Result) (float64, bool) {
		x, ok1 := f(r, a.Impl, a.Door)
		y, ok2 := f(r, b.Impl, b.Door)
		return x / y, ok1 && ok2
	}
}

func difference(door string) func(map[matrix.Cell]matrix.Result) (float64, bool) {
	return func(r map[matrix.Cell]matrix.Result) (float64, bool) {
		g, ok1 := cpuOf(r, matrix.CarmyGoverned, door)
		b, ok2 := cpuOf(r, matrix.CarmyBare, door)
		return g - b, ok1 && ok2
	}
}

func goals() []goal {
	var gs []goal
	for _, door := range []string{matrix.Sessions, matrix.Sessionless} {
		gov, mcpgo := matrix.Cell{Impl: matrix.CarmyGoverned, Door: door}, matrix.Cell{Impl: matrix.MCPGo, Door: door}
		gs = append(gs,
			goal{text: "governed carmy's RPS ÷ bare mcp-go's, " + door, value: ratio(rpsOf, gov, mcpgo), unit: "×", ok: func(v float64) bool { return v > 1 }},
			goal{text: "bare mcp-go's CPU per call ÷ governed carmy's, " + door, value: ratio(cpuOf, mcpgo, gov), unit: "×", ok: func(v float64) bool { return v > 1 }},
		)
	}
	for _, door := range matrix.Doors {
		gs = append(gs, goal{text: "governance, governed − bare CPU per call, " + door, value: difference(door), unit: " µs", ok: func(v float64) bool { return v <= 10 }})
	}
	gs = append(gs, goal{text: "governed HTTP API's RPS ÷ bare", value: ratio(rpsOf, matrix.Cell{Impl: matrix.CarmyGoverned, Door: matrix.API}, matrix.Cell{Impl: matrix.CarmyBare, Door: matrix.API}),
		unit: "×", ok: func(v float64) bool { return v >= 0.8 }})
	return gs
}

var goalBounds = []string{"> 1", "> 1", "> 1", "> 1", "≤ 10 µs", "≤ 10 µs", "≤ 10 µs", "≥ 0.8"}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// render is the matrix section of docs/benchmarks.md.
func render(h header, samples []sample) string {
	var b strings.Builder
	pin := "not pinned (no taskset, or one CPU)"
	if h.Pinned {
		pin = "the server pinned to CPU 0, the load to CPU 1 (taskset)"
	}
	fmt.Fprintf(&b, "\nRun of %s: %s, %d CPUs, %s; %s; %d callers, each with its own connection (and session), %s warm-up then a %s window per cell, %d repetitions alternating the order; the run took %s. ",
		h.Date, h.CPU, h.CPUs, h.Go, pin, h.Callers, h.Warmup, h.Window, h.Reps, h.Duration)
	if len(h.Loads) > 0 {
		fmt.Fprintf(&b, "The machine's 1-minute load average before each cell: median %.1f, from %.1f to %.1f (other processes share the CPUs: the numbers are noisy, the ratios within a repetition less so).\n\n",
			median(h.Loads), slices.Min(h.Loads), slices.Max(h.Loads))
	}
	b.WriteString("Medians of the repetitions:\n\n")
	b.WriteString("| server | door | RPS | p50 µs | p99 µs | server CPU µs/call | server RSS MiB | wrong answers |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	reps := map[int]map[matrix.Cell]matrix.Result{}
	for _, c := range matrix.Cells() {
		var rps, p50, p99, cpu, rss []float64
		errs := 0
		for _, s := range samples {
			if s.Impl != c.Impl || s.Door != c.Door {
				continue
			}
			if reps[s.Rep] == nil {
				reps[s.Rep] = map[matrix.Cell]matrix.Result{}
			}
			reps[s.Rep][c] = s.Result
			rps, p50, p99 = append(rps, s.RPS), append(p50, s.P50), append(p99, s.P99)
			cpu, rss = append(cpu, s.CPUPerCall), append(rss, float64(s.RSSKB)/1024)
			errs += s.Errors
		}
		if len(rps) == 0 {
			continue
		}
		door := c.Door
		if door == matrix.API {
			door = "HTTP API"
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.1f | %.1f | %d |\n", names[c.Impl], door, median(rps), median(p50), median(p99), median(cpu), median(rss), errs)
	}
	b.WriteString("\nThe goals, each a median of the repetitions' own ratios (cells of one repetition ran within minutes of each other), with the lowest and highest repetition:\n\n")
	b.WriteString("| goal | bound | median | range | met |\n|---|---|---:|---|---|\n")
	for i, g := range goals() {
		var vs []float64
		for _, r := range reps {
			if v, ok := g.value(r); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		m := median(vs)
		met := "no"
		if g.ok(m) {
			met = "yes"
		}
		format := "%.2f"
		if g.unit == " µs" {
			format = "%.1f"
		}
		fmt.Fprintf(&b, "| %s | %s | "+format+"%s | "+format+" – "+format+" | %s |\n", g.text, goalBounds[i], m, g.unit, slices.Min(vs), slices.Max(vs), met)
	}
	return b.String()
}
