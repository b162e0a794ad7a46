// Command matrix runs the throughput matrix and writes its report: every
// server of package matrix (carmy bare and fully governed, go-sdk stateful
// and stateless, mcp-go) on every door it serves (MCP 2025-11-25 with
// sessions, the sessionless 2026-07-28, carmy's HTTP API), side by side in
// one run:
//
//	cd bench && go run ./cmd/matrix
//
// It builds bench/cmd/matrixserver and bench/cmd/matrixload, then for each
// repetition runs every cell once, in an order that alternates from one
// repetition to the next: it starts the server (pinned to CPU 0 with
// taskset when there is one and the machine has two CPUs or more), runs
// the load (pinned to CPU 1) against it on loopback, and stops it. The raw
// results go to matrix.jsonl; the medians, the ratios of every repetition
// (paired: the cells of one repetition ran minutes apart at most) and the
// goals go to the matrix section of docs/benchmarks.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/bench/internal/matrix"
)

const (
	beginMarker = "<!-- matrix:begin -->"
	endMarker   = "<!-- matrix:end -->"
)

type options struct {
	reps           int
	callers        int
	warmup, window time.Duration
	doc, raw, from string
}

func main() {
	var o options
	flag.IntVar(&o.reps, "reps", 5, "repetitions of the whole matrix")
	flag.IntVar(&o.callers, "callers", 50, "concurrent callers of each cell")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up of each cell, not counted")
	flag.DurationVar(&o.window, "window", 5*time.Second, "measured window of each cell")
	flag.StringVar(&o.doc, "doc", "../docs/benchmarks.md", "the report to update, between its matrix markers")
	flag.StringVar(&o.raw, "out", "matrix.jsonl", "where the raw results go")
	flag.StringVar(&o.from, "from", "", "redraw the report from saved raw results instead of running")
	flag.Parse()
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

// sample is one cell's measurement in one repetition.
type sample struct {
	Rep  int    `json:"rep"`
	Impl string `json:"impl"`
	Door string `json:"door"`
	matrix.Result
}

// header is the first line of the raw results: how they were measured.
type header struct {
	Date     string    `json:"date"`
	CPU      string    `json:"cpu"`
	CPUs     int       `json:"cpus"`
	Pinned   bool      `json:"pinned"`
	Go       string    `json:"go"`
	Callers  int       `json:"callers"`
	Warmup   string    `json:"warmup"`
	Window   string    `json:"window"`
	Reps     int       `json:"reps"`
	Loads    []float64 `json:"loads"` // the 1-minute load average before each cell
	Duration string    `json:"duration"`
}

func run(o options) error {
	var (
		h       header
		samples []sample
		err     error
	)
	if o.from != "" {
		h, samples, err = readRaw(o.from)
	} else {
		h, samples, err = measure(o)
	}
	if err != nil {
		return err
	}
	report := render(h, samples)
	fmt.Print(report)
	return writeSection(o.doc, report)
}

func measure(o options) (header, []sample, error) {
	dir, err := os.MkdirTemp("", "matrix")
	if err != nil {
		return header{}, nil, err
	}
	defer os.RemoveAll(dir)
	server, load := filepath.Join(dir, "matrixserver"), filepath.Join(dir, "matrixload")
	log.Print("building the server and the load programs")
	for bin, pkg := range map[string]string{server: "./cmd/matrixserver", load: "./cmd/matrixload"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return header{}, nil, fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	taskset, _ := exec.LookPath("taskset")
	pinned := taskset != "" && runtime.NumCPU() >= 2
	h := header{
		Date: time.Now().UTC().Format(time.RFC3339), CPU: cpuModel(), CPUs: runtime.NumCPU(), Pinned: pinned, Go: runtime.Version(),
		Callers: o.callers, Warmup: o.warmup.String(), Window: o.window.String(), Reps: o.reps,
	}
	raw, err := os.Create(o.raw)
	if err != nil {
		return header{}, nil, err
	}
	defer raw.Close()
	start := time.Now()
	cells := matrix.Cells()
	var samples []sample
	for rep := range o.reps {
		order := slices.Clone(cells)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			h.Loads = append(h.Loads, loadavg())
			r, err := runCell(dir, server, load, pinned, c, o)
			if err != nil {
				return header{}, nil, fmt.Errorf("%s on %s: %w", c.Impl, c.Door, err)
			}
			s := sample{Rep: rep, Impl: c.Impl, Door: c.Door, Result: r}
			log.Printf("rep %d %-16s %-10s %8.0f rps  p50 %6.0f µs  p99 %6.0f µs  %5.1f µs CPU/call  %6d KiB  errors %d",
				rep+1, c.Impl, c.Door, r.RPS, r.P50, r.P99, r.CPUPerCall, r.RSSKB, r.Errors)
			samples = append(samples, s)
		}
	}
	elapsed := time.Since(start)
	h.Duration = elapsed.Round(time.Second).String()
	enc := json.NewEncoder(raw)
	if err := enc.Encode(h); err != nil {
		return header{}, nil, err
	}
	for _, s := range samples {
		if err := enc.Encode(s); err != nil {
			return header{}, nil, err
		}
	}
	return h, samples, nil
}

// runCell starts the cell's server, runs the load against it, and stops it.
func runCell(dir, server, load string, pinned bool, c matrix.Cell, o options) (matrix.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.warmup+o.window+2*time.Minute)
	defer cancel()
	audit := filepath.Join(dir, "audit.jsonl")
	_ = os.Remove(audit)
	srv := command(ctx, pinned, "0", server, "-impl", c.Impl, "-audit", audit)
	stdin, err := srv.StdinPipe()
	if err != nil {
		return matrix.Result{}, err
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return matrix.Result{}, err
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return matrix.Result{}, err
	}
	defer func() {
		stdin.Close() // the server stops when its input ends
		_ = srv.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return matrix.Result{}, fmt.Errorf("the server said nothing: %w", err)
	}
	base, path, _ := strings.Cut(strings.TrimSpace(line), " ")
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	args := []string{"-url", base, "-path", path, "-door", c.Door, "-callers", strconv.Itoa(o.callers),
		"-warmup", o.warmup.String(), "-window", o.window.String(), "-pid", strconv.Itoa(srv.Process.Pid)}
	if c.Impl == matrix.CarmyGoverned {
		args = append(args, "-token", matrix.Token)
	}
	ld := command(ctx, pinned, "1", load, args...)
	ld.Stderr = os.Stderr
	out, err := ld.Output()
	if err != nil {
		return matrix.Result{}, fmt.Errorf("load: %w", err)
	}
	var r matrix.Result
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return matrix.Result{}, fmt.Errorf("load said %q: %w", out, err)
	}
	if r.Calls == 0 {
		return r, fmt.Errorf("no correct answer (%d errors, the first: %s)", r.Errors, r.FirstError)
	}
	return r, nil
}

// command is a program, pinned to a CPU when pinning is on.
func command(ctx context.Context, pinned bool, cpu, name string, args ...string) *exec.Cmd {
	if pinned {
		return exec.CommandContext(ctx, "taskset", append([]string{"-c", cpu, name}, args...)...)
	}
	return exec.CommandContext(ctx, name, args...)
}

func readRaw(path string) (header, []sample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return header{}, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var h header
	if err := dec.Decode(&h); err != nil {
		return header{}, nil, err
	}
	var samples []sample
	for dec.More() {
		var s sample
		if err := dec.Decode(&s); err != nil {
			return header{}, nil, err
		}
		samples = append(samples, s)
	}
	return h, samples, nil
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadavg is the machine's 1-minute load average (/proc/loadavg).
func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _, _ := strings.Cut(string(b), " ")
	n, _ := strconv.ParseFloat(f, 64)
	return n
}

// writeSection replaces the report's matrix section.
func writeSection(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(beginMarker)), bytes.Index(b, []byte(endMarker))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", path, beginMarker, endMarker)
	}
	out := slices.Concat(b[:i+len(beginMarker)], []byte("\n"+section), b[j:])
	return os.WriteFile(path, out, 0o644)
}
