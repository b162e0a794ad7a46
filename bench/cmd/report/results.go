package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results are the samples of every benchmark, by name (without the
// GOMAXPROCS suffix) and unit.
type results struct {
	names   []string // in order of first appearance
	samples map[string]map[string][]float64
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads the output of go test -bench.
func parse(r io.Reader) (*results, error) {
	res := &results{samples: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		units, ok := res.samples[name]
		if !ok {
			units = map[string][]float64{}
			res.samples[name] = units
			res.names = append(res.names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %v", name, f[i], err)
			}
			units[f[i+1]] = append(units[f[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(res.names) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	return res, nil
}

// stat is a summary of one benchmark's samples in one unit.
type stat struct {
	median, min, max float64
	n                int
}

func (r *results) stat(name, unit string) (stat, bool) {
	s := r.samples[name][unit]
	if len(s) == 0 {
		return stat{}, false
	}
	s = slices.Sorted(slices.Values(s))
	return stat{median: median(s), min: s[0], max: s[len(s)-1], n: len(s)}, true
}

// comparison is a group of implementations of the same benchmark, each
// relative to a reference.
type comparison struct {
	Title string
	Bench string   // the benchmark's name up to /impl=
	Key   string   // the key naming the implementations: "impl" when empty
	Ref   string   // the reference implementation
	Impls []string // the others, in the chart's order
	Unit  string   // "ns/op", or "calls/s" for throughput
	// Targets are the targets for carmy in this group.
	Targets []target
	// Note says what the group measures, for the chart's readers.
	Note string
}

type target struct {
	Impl  string  // the implementation held to it
	Ref   string  // the one it is compared with: the group's Ref when empty
	Max   float64 // carmy's time / the reference's time must be at most Max, or
	Min   float64 // carmy's throughput / the reference's at least Min
	Under bool    // the ratio must be below Max, not at most
	Text  string  // as the issue says it
}

func (c comparison) name(impl string) string {
	key := c.Key
	if key == "" {
		key = "impl"
	}
	return c.Bench + "/" + key + "=" + impl
}

// ratio is an implementation's time against the reference's, with its
// range.
//
// Every round runs the two side by side, so each round gives one ratio of
// two measurements taken moments apart; ratio is the median of those, and
// its range their smallest and largest. On a shared machine whose load
// changes from one minute to the next, a paired ratio is steadier than the
// ratio of two medians taken over different minutes.
type ratio struct {
	value, lo, hi float64
	ok            bool
}

// ref is the implementation the target compares with.
func (t target) ref(c comparison) string {
	if t.Ref != "" {
		return t.Ref
	}
	return c.Ref
}

// timeRatio compares impl with ref, always as time: a throughput ratio is
// inverted, so that 1.2 means 20% slower in every group.
func (r *results) timeRatio(c comparison, impl, ref string) ratio {
	a, b := r.samples[c.name(impl)][c.Unit], r.samples[c.name(ref)][c.Unit]
	if len(a) == 0 || len(a) != len(b) {
		return ratio{}
	}
	rs := make([]float64, len(a))
	for i := range a {
		if a[i] == 0 || b[i] == 0 {
			return ratio{}
		}
		rs[i] = a[i] / b[i]
		if c.Unit == "calls/s" {
			rs[i] = b[i] / a[i]
		}
	}
	slices.Sort(rs)
	return ratio{value: median(rs), lo: rs[0], hi: rs[len(rs)-1], ok: true}
}

// median of sorted values.
func median(s []float64) float64 {
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// fastestRatio compares the fastest rounds of impl and ref, as time. Other
// processes only ever slow a round down, so on a busy machine the fastest
// rounds come closest to the cost of the code alone.
func (r *results) fastestRatio(c comparison, impl, ref string) (float64, bool) {
	a, ok1 := r.stat(c.name(impl), c.Unit)
	b, ok2 := r.stat(c.name(ref), c.Unit)
	if !ok1 || !ok2 || a.min == 0 || b.min == 0 {
		return 0, false
	}
	if c.Unit == "calls/s" { // the fastest round has the most calls/s
		return b.max / a.max, true
	}
	return a.min / b.min, true
}

// verdict is one target's outcome.
type verdict struct {
	c       comparison
	t       target
	measure float64 // as the target states it: time ratio or throughput ratio
	lo, hi  float64
	fastest float64 // the same, of the fastest rounds; 0 when unknown
	met     bool
	ok      bool
}

func (r *results) verdict(c comparison, t target) verdict {
	tr := r.timeRatio(c, t.Impl, t.ref(c))
	if !tr.ok {
		return verdict{c: c, t: t}
	}
	v := verdict{c: c, t: t, ok: true}
	v.fastest, _ = r.fastestRatio(c, t.Impl, t.ref(c))
	if t.Min > 0 { // throughput
		v.measure, v.lo, v.hi = 1/tr.value, 1/tr.hi, 1/tr.lo
		if v.fastest > 0 {
			v.fastest = 1 / v.fastest
		}
		v.met = v.measure >= t.Min
		return v
	}
	v.measure, v.lo, v.hi = tr.value, tr.lo, tr.hi
	if t.Under {
		v.met = v.measure < t.Max
	} else {
		v.met = v.measure <= t.Max
	}
	return v
}

// formatValue writes a value of a unit for people: 4.21 µs, 35.5k calls/s.
func formatValue(v float64, unit string) string {
	switch unit {
	case "ns/op":
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.3g s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.3g ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.3g µs", v/1e3)
		}
		return fmt.Sprintf("%.3g ns", v)
	case "calls/s":
		if v >= 1e3 {
			return fmt.Sprintf("%.3gk calls/s", v/1e3)
		}
		return fmt.Sprintf("%.3g calls/s", v)
	case "B/op":
		switch {
		case v >= 1<<20:
			return fmt.Sprintf("%.3g MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.3g KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	}
	if v == math.Trunc(v) || v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
