package carmy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// sdkOnly makes a registry whose MCP server the SDK serves alone: a host's
// configuration, even an empty one, turns carmy's own answers off, since
// its middleware would see nothing of them.
func sdkOnly(b *carmy.Builder) *carmy.Builder {
	return b.ConfigureMCPOptions(func(*mcp.ServerOptions) {})
}

// waitTool blocks until its call is cancelled, and counts the calls that
// started and those that ended so.
func waitTool(started, cancelled *atomic.Int32) *carmy.ToolDef {
	return carmy.Tool(func(ctx context.Context) error {
		started.Add(1)
		<-ctx.Done()
		cancelled.Add(1)
		return ctx.Err()
	}, carmy.Read, carmy.Name("wait"), carmy.Timeout(time.Minute), carmy.Register(false))
}

// stdioPeer is a client of ServeStdio that sends a line at a time and
// reads every message up to a request's answer, answering the server's
// elicitations as a user who gives their name.
type stdioPeer struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func newStdioPeer(t *testing.T, reg *carmy.Registry) *stdioPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := reg.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-p.done
	})
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// until returns the messages read up to and including the answer to the
// request with that id (a float64 or a string, as JSON decodes it),
// normalized.
func (p *stdioPeer) until(id any) []string {
	p.t.Helper()
	var msgs []string
	for {
		line, err := p.out.ReadString('\n')
		if err != nil {
			p.t.Fatalf("after %q: %v", msgs, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			p.t.Fatalf("%v: %q", err, line)
		}
		msgs = append(msgs, normalized(line))
		if m["method"] == "elicitation/create" {
			ans, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"action": "accept", "content": map[string]any{"name": "Ann", "age": 30}}})
			p.send(string(ans))
			continue
		}
		if m["id"] == id && m["method"] == nil {
			return msgs
		}
	}
}

// TestMCPSessionFastPathStdio: over stdio, carmy answers tools/call
// itself in both protocol generations; for the same messages its answers,
// and the notifications before them, in order, are the SDK's: results,
// tool errors, refusals, content, progress, log messages at the level the
// client set, a question to the user and its answer, a call before
// initialize, an unknown tool.
func TestMCPSessionFastPathStdio(t *testing.T) {
	t.Parallel()
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
	sessionlessMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	call := func(id int, tool, args, meta string) string {
		if meta != "" {
			meta = "," + meta
		}
		return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + meta + `}}`
	}
	type step struct {
		name string
		line string
		id   int // the request answered; 0 for a notification, -1 for "s-7"
	}
	connections := map[string][]step{
		"sessionless": {
			{"the first call, which initializes", call(2, "report", `{}`, sessionlessMeta), 2},
			{"output", call(3, "report", `{}`, sessionlessMeta), 3},
			{"progress", call(4, "report", `{}`, strings.Replace(sessionlessMeta, `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)), 4},
			{"log level", call(5, "report", `{}`, strings.Replace(sessionlessMeta, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"debug",`, 1)), 5},
			{"a question", call(6, "greet", `{}`, sessionlessMeta), 6},
			{"content", call(7, "picture", `{}`, sessionlessMeta), 7},
			{"tool error", call(8, "broken", `{}`, sessionlessMeta), 8},
			{"unknown tool", call(9, "nope", `{}`, sessionlessMeta), 9},
		},
		"session": {
			{"a call before initialize", call(5, "save_note", `{"text":"x"}`, ""), 5},
			{"initialize", init, 1},
			{"initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0},
			{"output", call(6, "save_note", `{"text":"x"}`, ""), 6},
			{"string id", strings.Replace(call(7, "save_note", `{"text":"x"}`, ""), `"id":7`, `"id":"s-7"`, 1), -1},
			{"invalid input", call(8, "save_note", `{"text":"x","extra":1}`, ""), 8},
			{"tool error", call(9, "broken", `{}`, ""), 9},
			{"unknown tool", call(10, "nope", `{}`, ""), 10},
			{"content", call(11, "picture", `{}`, ""), 11},
			{"progress, no log level", call(12, "report", `{}`, `"_meta":{"progressToken":"p"}`), 12},
			{"a question", call(13, "greet", `{}`, ""), 13},
			{"log level", `{"jsonrpc":"2.0","id":14,"method":"logging/setLevel","params":{"level":"info"}}`, 14},
			{"progress and logs", call(15, "report", `{}`, `"_meta":{"progressToken":7}`), 15},
			{"request id", call(16, "send", `{}`, `"_meta":{"carmy/request_id":"r-1"}`), 16},
			{"replay", call(17, "send", `{}`, `"_meta":{"carmy/request_id":"r-1"}`), 17},
		},
	}
	// run sends the steps on a connection of a registry built by b, and
	// returns the answers and how many calls carmy answered itself.
	run := func(b *carmy.Builder, steps []step) ([]string, int64) {
		f := &featureTools{}
		reg, err := b.Tool(f.defs()...).Tool((&hostTools{}).defs()...).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		p := newStdioPeer(t, reg)
		var got []string
		for _, s := range steps {
			p.send(s.line)
			switch {
			case s.id > 0:
				got = append(got, strings.Join(p.until(float64(s.id)), "\n"))
			case s.id < 0:
				got = append(got, strings.Join(p.until("s-7"), "\n"))
			default:
				got = append(got, "")
			}
		}
		return got, carmy.FastAnswered(reg)
	}
	// The calls of each connection that carmy answers itself: the others
	// go to the SDK.
	answered := map[string]int64{"sessionless": 5, "session": 10}
	for name, steps := range connections {
		t.Run(name, func(t *testing.T) {
			fast, n := run(carmy.New(), steps)
			if n != answered[name] {
				t.Errorf("carmy answered %d calls itself, want %d", n, answered[name])
			}
			sdk, _ := run(sdkOnly(carmy.New()), steps)
			for i, s := range steps {
				if fast[i] != sdk[i] {
					t.Errorf("%s: carmy's answer\n%s\nthe SDK's\n%s", s.name, fast[i], sdk[i])
				}
			}
		})
	}
}

// normalized is a message with its members in one order and what differs
// from call to call replaced (unstamped): JSON gives the order of members
// no meaning.
func normalized(msg string) string {
	var v any
	if json.Unmarshal([]byte(msg), &v) != nil {
		return msg
	}
	b, _ := json.Marshal(v)
	return string(unstamped(b))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestMCPSessionFastPathCancel: a call that carmy answers itself is
// cancelled by notifications/cancelled, and by its client going away, as
// the SDK's are: over stdio, and over HTTP in a session.
func TestMCPSessionFastPathCancel(t *testing.T) {
	t.Parallel()
	t.Run("stdio", func(t *testing.T) {
		var started, cancelled atomic.Int32
		reg, err := carmy.New().Tool(waitTool(&started, &cancelled)).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		p := newStdioPeer(t, reg)
		p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		p.until(1.0)
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
		waitFor(t, "the call", func() bool { return started.Load() == 1 })
		p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		waitFor(t, "the cancellation", func() bool { return cancelled.Load() == 1 })
	})
	t.Run("http", func(t *testing.T) {
		var started, cancelled atomic.Int32
		reg := build(t, carmy.New().Tool(waitTool(&started, &cancelled)))
		srv := serve(t, reg)
		s := openHTTPSession(t, srv.URL, "")
		go s.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
		waitFor(t, "the call", func() bool { return started.Load() == 1 })
		s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
		waitFor(t, "the cancellation", func() bool { return cancelled.Load() == 1 })

		ctx, stop := context.WithCancel(context.Background())
		go s.postCtx(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
		waitFor(t, "the call", func() bool { return started.Load() == 2 })
		stop() // the client goes away
		waitFor(t, "the cancellation", func() bool { return cancelled.Load() == 2 })
	})
}

// httpSession is a raw client of one MCP session over HTTP.
type httpSession struct {
	t   *testing.T
	url string
	id  string
}

// openHTTPSession initializes a session of the session-based protocol, with
// the client capabilities given (JSON members).
func openHTTPSession(t *testing.T, url, caps string) *httpSession {
	s := &httpSession{t: t, url: url + "/mcp"}
	resp := s.postCtx(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{`+caps+`},"clientInfo":{"name":"t","version":"1"}}}`)
	s.id = resp.Header.Get("Mcp-Session-Id")
	if s.id == "" {
		t.Fatal("no session id")
	}
	// A client reads the initialize result before it says it is
	// initialized: a session's stream opens with a priming event, before
	// the server has the result.
	_, _ = io.ReadAll(resp.Body)
	s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *httpSession) post(body string) (kind string, msgs []string) {
	resp := s.postCtx(context.Background(), body)
	if resp == nil {
		return "", nil
	}
	b, _ := io.ReadAll(resp.Body)
	kind = resp.Header.Get("Content-Type")
	if strings.HasPrefix(kind, "text/event-stream") {
		for line := range strings.Lines(string(b)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				msgs = append(msgs, data)
			}
		}
	} else if len(b) > 0 {
		msgs = append(msgs, string(b))
	}
	for i, m := range msgs {
		msgs[i] = normalized(m)
	}
	return kind, msgs
}

func (s *httpSession) postCtx(ctx context.Context, body string) *http.Response {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.t.Error(err)
		}
		return nil
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestMCPSessionFastPathHTTP: over streamable HTTP, carmy answers a
// tools/call of a live session that streams nothing itself, in JSON, with
// the message the SDK's session sends for it; the calls that stream (a
// progress token, a log level set, a client that can elicit) keep the
// SDK's path, and get the same answers as from a registry the SDK serves
// alone.
func TestMCPSessionFastPathHTTP(t *testing.T) {
	t.Parallel()
	call := func(tool, args, meta string) string {
		if meta != "" {
			meta = "," + meta
		}
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + meta + `}}`
	}
	type step struct {
		name, body, caps string
		fast             bool // carmy answers it itself
	}
	steps := []step{
		{"output", call("save_note", `{"text":"x"}`, ""), "", true},
		{"invalid input", call("save_note", `{"text":"x","extra":1}`, ""), "", true},
		{"tool error", call("broken", `{}`, ""), "", true},
		{"unknown tool", call("nope", `{}`, ""), "", false},
		{"content", call("picture", `{}`, ""), "", true},
		{"no streams: progress and logs dropped", call("report", `{}`, ""), "", true},
		{"request id", call("send", `{}`, `"_meta":{"carmy/request_id":"r-1"}`), "", true},
		{"progress", call("report", `{}`, `"_meta":{"progressToken":"p"}`), "", false},
		{"a client that can elicit", call("save_note", `{"text":"x"}`, ""), `"elicitation":{}`, false},
		{"log level set", `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}` + "\n" + call("report", `{}`, ""), "", false},
	}
	run := func(b *carmy.Builder) (kinds []string, answers [][]string) {
		f := &featureTools{}
		reg := build(t, b.Tool(f.defs()...).Tool((&hostTools{}).defs()...))
		srv := serve(t, reg)
		for _, st := range steps {
			s := openHTTPSession(t, srv.URL, st.caps)
			var kind string
			var msgs []string
			for body := range strings.Lines(st.body) {
				kind, msgs = s.post(strings.TrimSpace(body))
			}
			kinds, answers = append(kinds, kind), append(answers, msgs)
		}
		return kinds, answers
	}
	fastKinds, fast := run(carmy.New())
	sdkKinds, sdk := run(sdkOnly(carmy.New()))
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			// What carmy answers itself comes as JSON, the rest as the
			// SDK's event stream.
			if gotJSON := strings.HasPrefix(fastKinds[i], "application/json"); gotJSON != st.fast {
				t.Errorf("answered as %q", fastKinds[i])
			}
			if !strings.HasPrefix(sdkKinds[i], "text/event-stream") {
				t.Errorf("the SDK answered as %q", sdkKinds[i])
			}
			if strings.Join(fast[i], "\n") != strings.Join(sdk[i], "\n") {
				t.Errorf("carmy's answer\n%s\nthe SDK's\n%s", strings.Join(fast[i], "\n"), strings.Join(sdk[i], "\n"))
			}
		})
	}
}
