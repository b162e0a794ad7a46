package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The doors a load drives.
const (
	Sessions    = "2025-11-25" // MCP with sessions: initialize, then calls carrying the session id
	Sessionless = "2026-07-28" // MCP without sessions: every call carries what a session held
	API         = "http"       // carmy's HTTP API: POST /tools/{name}
)

// Doors are the doors, in the order the report lists them.
var Doors = []string{Sessions, Sessionless, API}

// Load is one measured run of callers against a server.
type Load struct {
	URL      string        // the server's base URL, http://127.0.0.1:port
	MCPPath  string        // the streamable HTTP endpoint's path
	Door     string        // Sessions, Sessionless or API
	Token    string        // a bearer token to send, if any
	Callers  int           // concurrent callers, each with its own connection (and session)
	Warmup   time.Duration // calls made and not counted, first
	Window   time.Duration // the measured window
	PID      int           // the server's process, whose CPU and memory are read; 0 for none
	MaxCalls int           // stop each caller after this many calls in all (0: no bound), for tests
}

// Result is what a load measured in its window.
type Result struct {
	Calls      int     `json:"calls"`  // correct answers in the window
	Errors     int     `json:"errors"` // wrong answers and failed requests in the window
	Seconds    float64 `json:"seconds"`
	RPS        float64 `json:"rps"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	CPUPerCall float64 `json:"cpu_us_per_call"` // the server's user and system CPU over the window, per correct answer
	RSSKB      int64   `json:"rss_kb"`          // the server's resident memory at the end of the window
	FirstError string  `json:"first_error,omitempty"`
}

// Run drives the server: it opens every caller's connection (and session),
// runs the warm-up, then counts the calls that start and end inside the
// window. A call counts only when its answer is correct: status 200 and
// the tool's output, not an error.
func Run(ctx context.Context, l Load) (Result, error) {
	if l.Callers < 1 {
		return Result{}, errors.New("at least one caller")
	}
	callers := make([]*caller, l.Callers)
	for i := range callers {
		c, err := newCaller(ctx, l, i)
		if err != nil {
			return Result{}, fmt.Errorf("caller %d: %w", i, err)
		}
		callers[i] = c
		defer c.close()
	}
	var phase atomic.Int32 // 0 warm-up, 1 measured, 2 done
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() { c.loop(ctx, &phase, l.MaxCalls) })
	}
	sleep(ctx, l.Warmup)
	cpu0, _ := cpuTicks(l.PID)
	start := time.Now()
	phase.Store(1)
	sleep(ctx, l.Window)
	phase.Store(2)
	elapsed := time.Since(start)
	cpu1, _ := cpuTicks(l.PID)
	rss, _ := rssKB(l.PID)
	wg.Wait()

	var r Result
	var lat []time.Duration
	for _, c := range callers {
		r.Calls += len(c.lat)
		r.Errors += c.errors
		if r.FirstError == "" && c.firstErr != nil {
			r.FirstError = c.firstErr.Error()
		}
		lat = append(lat, c.lat...)
	}
	r.Seconds = elapsed.Seconds()
	r.RPS = float64(r.Calls) / r.Seconds
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50 = micros(lat[len(lat)*50/100])
		r.P99 = micros(lat[min(len(lat)*99/100, len(lat)-1)])
	}
	if l.PID > 0 && r.Calls > 0 {
		r.CPUPerCall = float64(cpu1-cpu0) * tickMicros / float64(r.Calls)
		r.RSSKB = rss
	}
	return r, ctx.Err()
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// caller is one client: its own connection, its own session.
type caller struct {
	l        Load
	client   *http.Client
	url      string
	body     []byte
	header   http.Header
	lat      []time.Duration
	errors   int
	firstErr error
	n        int // calls made in all
}

func newCaller(ctx context.Context, l Load, i int) (*caller, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true, IdleConnTimeout: time.Minute}
	c := &caller{l: l, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, header: http.Header{}, lat: make([]time.Duration, 0, 1<<14)}
	if l.Token != "" {
		c.header.Set("Authorization", "Bearer "+l.Token)
	}
	switch l.Door {
	case API:
		c.url = l.URL + "/tools/" + Tool
		c.body = []byte(Input)
		c.header.Set("Content-Type", "application/json")
		return c, nil
	case Sessions, Sessionless:
	default:
		return nil, fmt.Errorf("no door %q (want one of %v)", l.Door, Doors)
	}
	c.url = l.URL + l.MCPPath
	c.header.Set("Content-Type", "application/json")
	c.header.Set("Accept", "application/json, text/event-stream")
	id := strconv.Itoa(i + 1)
	if l.Door == Sessionless {
		// As the official SDK's client sends it: the headers that mirror the
		// message, and what a session would hold in _meta.
		c.header.Set("Mcp-Protocol-Version", Sessionless)
		c.header.Set("Mcp-Method", "tools/call")
		c.header.Set("Mcp-Name", Tool)
		c.body = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + Tool + `","arguments":` + Input +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + Sessionless + `","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"matrix","version":"1"}}}}`)
		return c, nil
	}
	c.body = []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + Tool + `","arguments":` + Input + `}}`)
	if err := c.initialize(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// initialize opens the caller's session: initialize, its answer's session
// id, then notifications/initialized.
func (c *caller) initialize(ctx context.Context) error {
	h := c.header.Clone()
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + Sessions + `","capabilities":{},"clientInfo":{"name":"matrix","version":"1"}}}`
	resp, body, err := c.post(ctx, h, []byte(init))
	if err != nil {
		return err
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !bytes.Contains(body, []byte(`"protocolVersion":"`+Sessions+`"`)) {
		return fmt.Errorf("initialize: status %d, session %q: %.300s", resp.StatusCode, sid, body)
	}
	c.header.Set("Mcp-Session-Id", sid)
	c.header.Set("Mcp-Protocol-Version", Sessions)
	h = c.header.Clone()
	resp, body, err = c.post(ctx, h, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("notifications/initialized: status %d: %.300s", resp.StatusCode, body)
	}
	return nil
}

func (c *caller) post(ctx context.Context, h http.Header, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header = h.Clone()
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// loop calls until the window ends, counting the calls inside it.
func (c *caller) loop(ctx context.Context, phase *atomic.Int32, maxCalls int) {
	for ctx.Err() == nil {
		p := phase.Load()
		if p == 2 || (maxCalls > 0 && c.n >= maxCalls) {
			return
		}
		c.n++
		start := time.Now()
		err := c.call(ctx)
		d := time.Since(start)
		if p != 1 || phase.Load() != 1 {
			continue
		}
		if err != nil {
			c.errors++
			if c.firstErr == nil {
				c.firstErr = err
			}
			continue
		}
		c.lat = append(c.lat, d)
	}
}

// call makes one call and checks its answer.
func (c *caller) call(ctx context.Context) error {
	resp, body, err := c.post(ctx, c.header, c.body)
	if err != nil {
		return err
	}
	return Check(c.l.Door, resp.StatusCode, body)
}

// Check says whether an answer to the matrix's call is correct: status
// 200, the tool's output, and no error (a JSON-RPC error or a tool
// result marked isError).
func Check(door string, status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", status, body)
	}
	s := string(body)
	if door != API && (strings.Contains(s, `"error":{`) || strings.Contains(s, `"isError":true`) || !strings.Contains(s, `"result"`)) {
		return fmt.Errorf("not a result: %.200s", body)
	}
	if !strings.Contains(s, Want) {
		return fmt.Errorf("wrong output: %.200s", body)
	}
	return nil
}

func (c *caller) close() { c.client.CloseIdleConnections() }

// Probe opens l.Callers callers and makes n calls with each, one after the
// other, and returns the first wrong answer: a check that a server answers
// the matrix's call correctly on a door, with no timing at all.
func Probe(ctx context.Context, l Load, n int) error {
	for i := range max(l.Callers, 1) {
		c, err := newCaller(ctx, l, i)
		if err != nil {
			return fmt.Errorf("caller %d: %w", i, err)
		}
		for range n {
			if err = c.call(ctx); err != nil {
				break
			}
		}
		c.close()
		if err != nil {
			return fmt.Errorf("caller %d: %w", i, err)
		}
	}
	return nil
}
