// Command report runs carmy's comparison benchmarks and writes their
// report: the results section of docs/benchmarks.md and the chart
// docs/benchmarks.svg.
//
//	cd bench && go run ./cmd/report
//
// It builds the benchmarks once, runs them in rounds (each round runs
// every benchmark once, so that a slow minute of the machine touches every
// implementation alike, not one), keeps the raw output in results.txt,
// summarizes it with benchstat (golang.org/x/perf, a pinned version, run
// with go run), checks the ratios against the targets of the performance
// issue, profiles the carmy side of every missed target and draws the
// chart. With -from it redraws the report from a saved results file
// without running anything but benchstat and the profiles.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchstat is the pinned version of golang.org/x/perf's benchstat.
const benchstat = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// paramsPrefix starts the line of the results file that says how they were
// measured.
const paramsPrefix = "# report: "

const (
	beginMarker = "<!-- report:begin -->"
	endMarker   = "<!-- report:end -->"
)

// comparisons are the groups the report compares, with the targets.
var comparisons = slices.Concat([]comparison{
	{Title: "In-process, small input", Bench: "BenchmarkInProcess/size=small", Ref: "floor", Impls: []string{"carmy"}, Unit: "ns/op",
		Targets: []target{{Impl: "carmy", Max: 1.75, Text: "Execute ≤ 1.75× the floor, small input"}},
		Note:    "Registry.Execute vs strict decode + validator + call + encode by hand"},
	{Title: "In-process, medium input", Bench: "BenchmarkInProcess/size=medium", Ref: "floor", Impls: []string{"carmy"}, Unit: "ns/op",
		Targets: []target{{Impl: "carmy", Max: 1.25, Text: "Execute ≤ 1.25× the floor, medium input"}}},
}, mcpComparisons(), []comparison{
	{Title: "HTTP API, small input", Bench: "BenchmarkHTTP/size=small", Ref: "plain", Impls: []string{"carmy"}, Unit: "calls/s",
		Targets: []target{{Impl: "carmy", Min: 0.85, Text: "POST /tools/{name} ≥ 0.85× the throughput of a plain handler, small input"}},
		Note:    "loopback, 8 concurrent callers; time = 1 / throughput"},
	{Title: "HTTP API, medium input", Bench: "BenchmarkHTTP/size=medium", Ref: "plain", Impls: []string{"carmy"}, Unit: "calls/s",
		Targets: []target{{Impl: "carmy", Min: 0.85, Text: "POST /tools/{name} ≥ 0.85× the throughput of a plain handler, medium input"}}},
	{Title: "Building 1,000 tools", Bench: "BenchmarkBuild1000", Ref: "gosdk", Impls: []string{"carmy", "carmy-serving"}, Unit: "ns/op",
		Targets: []target{{Impl: "carmy-serving", Max: 1, Under: true, Text: "building 1,000 tools (ready to serve) faster than go-sdk"}},
		Note:    "carmy: Build; carmy-serving: Build + Handler (MCP server too)"},
	{Title: "carmy's runtime rules, small input", Bench: "BenchmarkRules", Key: "rule", Ref: "plain", Impls: []string{"idempotent-first", "idempotent-replay", "serialized", "parallel-8callers", "serialized-8callers"}, Unit: "ns/op",
		Note: "8callers: time per call with 8 concurrent callers"},
})

// mcpComparisons are the groups of MCP's tools/call: in memory and over
// streamable HTTP, small and medium inputs, in each protocol generation
// (the benchmarks name the session-based one's implementations
// …-sessions), each with the two targets: at most half go-sdk's
// time, less than mcp-go's. Over streamable HTTP the same call to the HTTP
// API, one at a time, is the floor a transport could reach.
func mcpComparisons() []comparison {
	var cs []comparison
	for _, tr := range []struct{ title, bench, note string }{
		{"in memory", "BenchmarkMCPInMemory", "official SDK client over a pipe; carmy: ServeStdio; carmy-servemcp: ServeMCP on the SDK's in-memory transports; mcpgo-inprocess: mcp-go's own client, no pipe"},
		{"streamable HTTP", "BenchmarkMCPStreamable", "loopback, sequential calls; http-*: POST /tools/{name}"},
	} {
		for _, size := range []string{"small", "medium"} {
			for _, gen := range []struct{ version, suffix string }{{"2026-07-28", ""}, {"2025-11-25", "-sessions"}} {
				carmy := "carmy" + gen.suffix
				c := comparison{
					Title: fmt.Sprintf("MCP %s, %s input, %s", tr.title, size, gen.version),
					Bench: tr.bench + "/size=" + size, Ref: "gosdk" + gen.suffix, Unit: "ns/op",
					Impls: []string{carmy, "mcpgo" + gen.suffix},
					Targets: []target{
						{Impl: carmy, Max: 0.5, Text: fmt.Sprintf("MCP %s tools/call ≤ 0.5× go-sdk AddTool, %s, %s input", gen.version, tr.title, size)},
						{Impl: carmy, Ref: "mcpgo" + gen.suffix, Max: 1, Under: true, Text: fmt.Sprintf("MCP %s tools/call faster than mcp-go, %s, %s input", gen.version, tr.title, size)},
					},
				}
				switch {
				case tr.bench == "BenchmarkMCPStreamable":
					c.Impls = append(c.Impls, "http-carmy", "http-plain")
				case gen.suffix == "":
					c.Impls = append(c.Impls, "carmy-servemcp", "mcpgo-inprocess")
				default:
					c.Impls = append(c.Impls, "carmy-servemcp-sessions")
				}
				if size == "small" && gen.suffix == "" {
					c.Note = tr.note
				}
				cs = append(cs, c)
			}
		}
	}
	return cs
}

type options struct {
	count     int
	benchtime string
	buildtime string
	from      string
	results   string
	doc       string
	svg       string
	profile   bool
	profTime  string
	idleWait  time.Duration
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	var o options
	flag.IntVar(&o.count, "count", 10, "rounds: samples of every benchmark (at least 6)")
	flag.StringVar(&o.benchtime, "benchtime", "250ms", "-benchtime of every benchmark but BenchmarkBuild1000")
	flag.StringVar(&o.buildtime, "buildtime", "3x", "-benchtime of BenchmarkBuild1000")
	flag.StringVar(&o.from, "from", "", "make the report from this results file instead of running the benchmarks")
	flag.StringVar(&o.results, "results", "results.txt", "where the raw benchmark output goes, relative to bench/")
	flag.StringVar(&o.doc, "doc", "../docs/benchmarks.md", "the report, relative to bench/: its results section is replaced")
	flag.StringVar(&o.svg, "svg", "../docs/benchmarks.svg", "the chart, relative to bench/")
	flag.BoolVar(&o.profile, "profile", true, "profile the carmy side of every missed target")
	flag.StringVar(&o.profTime, "proftime", "2s", "-benchtime of the profiling runs")
	flag.DurationVar(&o.idleWait, "idlewait", time.Second, "how long to wait, before each run, for the other processes to leave the machine idle")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

func run(o options) error {
	start := time.Now()
	dir, err := benchDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "carmy-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	testBin := filepath.Join(tmp, "bench.test")
	log.Printf("building the benchmarks")
	if err := command(dir, nil, "go", "test", "-c", "-o", testBin, ".").Run(); err != nil {
		return fmt.Errorf("go test -c: %w", err)
	}

	resultsPath := inDir(dir, o.results)
	params := ""
	if o.from == "" {
		load, err := runRounds(o, dir, testBin, resultsPath)
		if err != nil {
			return err
		}
		params = fmt.Sprintf("%d rounds (`-count`), each running every benchmark once: `-benchtime %s` (BenchmarkBuild1000: `-benchtime %s`), `-benchmem`; %s; the benchmarks took %v", o.count, o.benchtime, o.buildtime, describeLoad(load), time.Since(start).Round(time.Second))
		// Kept with the results, for a report redrawn from them (-from);
		// benchstat ignores the line.
		f, err := os.OpenFile(resultsPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "%s%s\n", paramsPrefix, params)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else {
		resultsPath = o.from
	}
	raw, err := os.ReadFile(resultsPath)
	if err != nil {
		return err
	}
	if o.from != "" {
		params = "unknown"
		for line := range strings.Lines(string(raw)) {
			if p, ok := strings.CutPrefix(line, paramsPrefix); ok {
				params = strings.TrimSpace(p)
			}
		}
		params += "; report redrawn from " + filepath.Base(o.from)
	}
	res, err := parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}

	log.Printf("running benchstat")
	stat := command(filepath.Dir(resultsPath), nil, "go", "run", benchstat, filepath.Base(resultsPath))
	var statOut bytes.Buffer
	stat.Stdout = &statOut
	if err := stat.Run(); err != nil {
		return fmt.Errorf("benchstat: %w", err)
	}

	// One profile per benchmark that misses a target, whichever targets
	// it misses.
	var profiles []profile
	for _, c := range comparisons {
		for _, t := range c.Targets {
			if v := res.verdict(c, t); !o.profile || !v.ok || v.met {
				continue
			}
			name := c.name(t.Impl)
			if i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == name }); i >= 0 {
				profiles[i].missed = append(profiles[i].missed, t.Text)
				continue
			}
			log.Printf("profiling %s", name)
			p, err := profileOf(dir, testBin, tmp, name, o)
			if err != nil {
				return err
			}
			p.missed = []string{t.Text}
			profiles = append(profiles, p)
		}
	}

	m := machine(dir)
	m.params = params
	section := report(res, comparisons, statOut.String(), profiles, m, filepath.Base(o.svg))
	docPath := inDir(dir, o.doc)
	if err := replaceSection(docPath, section); err != nil {
		return err
	}
	if err := os.WriteFile(inDir(dir, o.svg), []byte(chart(res, comparisons)), 0o644); err != nil {
		return err
	}
	for _, c := range comparisons {
		for _, t := range c.Targets {
			v := res.verdict(c, t)
			state := "missed"
			if v.met {
				state = "met"
			}
			log.Printf("%-90s %6.3f  %s", t.Text, v.measure, state)
		}
	}
	log.Printf("wrote %s and %s in %v", o.doc, o.svg, time.Since(start).Round(time.Second))
	return nil
}

// inDir resolves a path given relative to the bench directory.
func inDir(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// describeLoad says how busy other processes kept the machine just before
// the runs.
func describeLoad(load []float64) string {
	var ok []float64
	for _, l := range load {
		if l >= 0 {
			ok = append(ok, l)
		}
	}
	if len(ok) == 0 {
		return "the load of other processes unknown"
	}
	slices.Sort(ok)
	return fmt.Sprintf("other processes kept the CPUs %.0f%% busy (median) and at most %.0f%% just before a run", 100*median(ok), 100*ok[len(ok)-1])
}

// benchDir is the directory of the bench module.
func benchDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	data, err := os.ReadFile(mod)
	if err != nil || !bytes.Contains(data, []byte("module github.com/carmy-dev/carmy/bench\n")) {
		return "", fmt.Errorf("run this command in carmy's bench directory: cd bench && go run ./cmd/report")
	}
	return filepath.Dir(mod), nil
}

func command(dir string, stdout io.Writer, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Dir = dir
	cmd.Stdout = stdout
	cmd.Stderr = os.Stderr
	return cmd
}

// The benchmarks, each run on its own in every round.
var benchmarks = []string{"InProcess", "MCPInMemory", "MCPStreamable", "HTTP", "Rules", "Build1000"}

// runRounds runs every benchmark count times, one round after the other,
// into the results file. Before each run it waits, for a while, for the
// other processes of the machine to leave it idle, and records how busy
// they kept it.
func runRounds(o options, dir, testBin, resultsPath string) (load []float64, err error) {
	f, err := os.Create(resultsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	first := true
	for i := range o.count {
		log.Printf("round %d of %d", i+1, o.count)
		for _, name := range benchmarks {
			benchtime := o.benchtime
			if name == "Build1000" {
				benchtime = o.buildtime
			}
			load = append(load, waitIdle(o.idleWait))
			var out bytes.Buffer
			cmd := command(dir, &out, testBin, "-test.run", "^$", "-test.bench", "^Benchmark"+name+"$", "-test.benchmem", "-test.count", "1", "-test.benchtime", benchtime)
			err := cmd.Run()
			// Keep the header lines (goos, cpu…) once, as benchstat wants.
			text := out.String()
			if !first {
				text = stripHeader(text)
			}
			first = false
			if _, werr := f.WriteString(text); werr != nil {
				return nil, werr
			}
			if err != nil {
				return nil, fmt.Errorf("running Benchmark%s: %w\n%s", name, err, out.String())
			}
		}
	}
	return load, f.Close()
}

// waitIdle waits until the machine's CPUs are less than 10% busy over a
// quarter of a second, or max has passed, and returns the share of the
// CPUs that was busy in the last quarter second (0 to 1; -1 where
// /proc/stat cannot be read).
func waitIdle(max time.Duration) float64 {
	deadline := time.Now().Add(max)
	for {
		busy := cpuBusy(250 * time.Millisecond)
		if busy < 0.10 || time.Now().After(deadline) {
			return busy
		}
	}
}

// cpuBusy measures the busy share of all CPUs over d, from /proc/stat.
func cpuBusy(d time.Duration) float64 {
	read := func() (busy, total uint64, ok bool) {
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, false
		}
		for i, s := range f[1:] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0, false
			}
			if i < 8 { // user nice system idle iowait irq softirq steal
				total += v
				if i != 3 && i != 4 {
					busy += v
				}
			}
		}
		return busy, total, true
	}
	b0, t0, ok := read()
	if !ok {
		time.Sleep(d)
		return -1
	}
	time.Sleep(d)
	b1, t1, ok := read()
	if !ok || t1 == t0 {
		return -1
	}
	return float64(b1-b0) / float64(t1-t0)
}

var headerLine = regexp.MustCompile(`^(goos|goarch|pkg|cpu): `)

func stripHeader(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if headerLine.MatchString(line) || strings.TrimSpace(line) == "PASS" || strings.HasPrefix(line, "ok ") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// profile is the CPU and allocation profile of the carmy side of missed
// targets, as pprof -top shows them.
type profile struct {
	name        string   // the benchmark
	missed      []string // the targets it misses
	cpu, allocs string
}

func profileOf(dir, testBin, tmp, name string, o options) (profile, error) {
	parts := strings.Split(name, "/")
	for i, s := range parts {
		parts[i] = "^" + regexp.QuoteMeta(s) + "$"
	}
	bench := strings.Join(parts, "/")
	benchtime := o.profTime
	if strings.HasPrefix(name, "BenchmarkBuild") {
		benchtime = o.buildtime
	}
	cpuFile := filepath.Join(tmp, "cpu.out")
	memFile := filepath.Join(tmp, "mem.out")
	if err := command(dir, io.Discard, testBin, "-test.run", "^$", "-test.bench", bench, "-test.benchmem", "-test.benchtime", benchtime, "-test.cpuprofile", cpuFile).Run(); err != nil {
		return profile{}, fmt.Errorf("profiling %s: %w", name, err)
	}
	if err := command(dir, io.Discard, testBin, "-test.run", "^$", "-test.bench", bench, "-test.benchmem", "-test.benchtime", benchtime, "-test.memprofile", memFile, "-test.memprofilerate", "1").Run(); err != nil {
		return profile{}, fmt.Errorf("profiling %s: %w", name, err)
	}
	cpu, err := pprofTop(dir, "-top", "-cum", "-nodecount", "40", testBin, cpuFile)
	if err != nil {
		return profile{}, err
	}
	allocs, err := pprofTop(dir, "-top", "-sample_index", "alloc_objects", "-nodecount", "20", testBin, memFile)
	if err != nil {
		return profile{}, err
	}
	return profile{name: name, cpu: cpu, allocs: allocs}, nil
}

// pprofTop runs go tool pprof and keeps its table, without the frames of
// the testing package and the benchmark itself.
func pprofTop(dir string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := command(dir, &out, "go", append([]string{"tool", "pprof"}, args...)...)
	cmd.Stderr = io.Discard
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	var b strings.Builder
	table := false
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, "flat%") {
			table = true
		}
		if strings.HasPrefix(line, "Showing") || strings.HasPrefix(line, "Dropped") {
			b.WriteString(line)
			continue
		}
		if !table {
			continue
		}
		if strings.Contains(line, " testing.") || strings.Contains(line, "runtime.goexit") || strings.Contains(line, "/bench.Benchmark") {
			continue
		}
		b.WriteString(line)
	}
	return b.String(), nil
}

// host describes the machine and the software measured.
type host struct {
	cpu, memory, os, goVersion, versions, revision string
	cpus, procs                                    int
	params                                         string
	date                                           string
}

func machine(dir string) host {
	h := host{cpus: runtime.NumCPU(), procs: runtime.GOMAXPROCS(0), os: runtime.GOOS + "/" + runtime.GOARCH, date: time.Now().UTC().Format("2006-01-02")}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			h.memory = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.os += ", Linux " + strings.TrimSpace(string(data))
	}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		h.goVersion = strings.TrimSpace(string(out))
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "github.com/modelcontextprotocol/go-sdk", "github.com/mark3labs/mcp-go")
	list.Dir = dir
	if out, err := list.Output(); err == nil {
		h.versions = strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ", ")
	}
	rev := exec.Command("git", "rev-parse", "--short", "HEAD")
	rev.Dir = dir
	if out, err := rev.Output(); err == nil {
		h.revision = strings.TrimSpace(string(out))
		// The results and the report, which this command writes, are not
		// changes to what is measured.
		st := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", "..", ":!results.txt", ":!../docs")
		st.Dir = dir
		if out, err := st.Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
			h.revision += " with local changes"
		}
	}
	return h
}

// replaceSection replaces the generated part of the report, between its
// markers, or appends one.
func replaceSection(path, section string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(data)
	block := beginMarker + "\n" + section + endMarker
	i, j := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if i >= 0 && j > i {
		doc = doc[:i] + block + doc[j+len(endMarker):]
	} else {
		if doc != "" && !strings.HasSuffix(doc, "\n\n") {
			doc += "\n"
		}
		doc += "## Results\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
