package carmy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// Hold is the input of hold, a serialized tool that runs until its context
// ends or For passes.
type Hold struct {
	ForMS int `json:"for_ms" validate:"min=1,max=10000"`
}

// Wipe is the input of wipe, a tool that needs confirmation.
type Wipe struct {
	Target string `json:"target"`
	Count  int    `json:"count"`
}

// mcpFixture is a server with two principals, alice and bob, the serving
// tests' tools and two of its own: hold, serialized, and wipe, which needs
// confirmation.
type mcpFixture struct {
	srv       *httptest.Server
	reg       *carmy.Registry
	host      *hostTools
	started   chan struct{} // one value per hold that starts
	cancelled atomic.Int32  // holds whose context ended before their time
	wipes     atomic.Int32
}

func newMCPFixture(t *testing.T, b *carmy.Builder) *mcpFixture {
	t.Helper()
	f := &mcpFixture{host: &hostTools{}, started: make(chan struct{}, 100)}
	hold := func(ctx context.Context, in Hold) error {
		f.started <- struct{}{}
		select {
		case <-ctx.Done():
			f.cancelled.Add(1)
			return ctx.Err()
		case <-time.After(time.Duration(in.ForMS) * time.Millisecond):
			return nil
		}
	}
	wipe := func(in Wipe) error { f.wipes.Add(1); return nil }
	if b == nil {
		b = carmy.New()
	}
	reg := build(t, b.Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob-secret"), Principal: "bob"},
	)).Tool(f.host.defs()...).Tool(
		carmy.Tool(hold, carmy.Read, carmy.Name("hold"), carmy.Timeout(10*time.Second), carmy.Register(false)),
		carmy.Tool(wipe, carmy.Destructive, carmy.Name("wipe"), carmy.RequireConfirmation(), carmy.Register(false)),
	))
	f.reg = reg
	f.srv = serve(t, reg)
	return f
}

// waitStarted waits for a hold to start.
func (f *mcpFixture) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-f.started:
	case <-time.After(5 * time.Second):
		t.Fatal("hold did not start")
	}
}

// rawMCP is an MCP client over raw HTTP, to send what a real client never
// would.
type rawMCP struct {
	t       *testing.T
	url     string
	token   string
	session string
	ctype   string // Content-Type; "" means application/json
}

type rawReply struct {
	status int
	header http.Header
	msgs   []map[string]any // JSON-RPC messages, from JSON or an event stream
	text   string
}

func (f *mcpFixture) client(t *testing.T, token string) *rawMCP {
	return &rawMCP{t: t, url: f.srv.URL + "/mcp", token: token}
}

// open initializes a session.
func (c *rawMCP) open() *rawMCP {
	c.t.Helper()
	rep := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.session = rep.header.Get("Mcp-Session-Id")
	if rep.status != http.StatusOK || c.session == "" {
		c.t.Fatalf("initialize: %d %s", rep.status, rep.text)
	}
	if rep := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); rep.status != http.StatusAccepted {
		c.t.Fatalf("initialized: %d %s", rep.status, rep.text)
	}
	return c
}

func (c *rawMCP) request(ctx context.Context, method, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	ctype := c.ctype
	if ctype == "" {
		ctype = "application/json"
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	return http.DefaultClient.Do(req)
}

func (c *rawMCP) do(method, body string) rawReply {
	c.t.Helper()
	// A stream that should have been refused ends the test, not the run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.request(ctx, method, body)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	rep := rawReply{status: res.StatusCode, header: res.Header, text: string(raw)}
	rep.msgs = parseMessages(raw)
	return rep
}

func (c *rawMCP) post(body string) rawReply { c.t.Helper(); return c.do(http.MethodPost, body) }

// parseMessages reads JSON-RPC messages from a JSON body or an event
// stream's data lines.
func parseMessages(raw []byte) []map[string]any {
	var out []map[string]any
	add := func(b []byte) {
		var one map[string]any
		if json.Unmarshal(b, &one) == nil {
			out = append(out, one)
			return
		}
		var many []map[string]any
		if json.Unmarshal(b, &many) == nil {
			out = append(out, many...)
		}
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		add(t)
		return out
	}
	for line := range strings.Lines(string(raw)) {
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			add([]byte(data))
		}
	}
	return out
}

func callBody(id int, tool, args string, meta string) string {
	if meta != "" {
		meta = `,"_meta":` + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, args, meta)
}

// rpcErrorCode is the JSON-RPC error code of the only message.
func (r rawReply) rpcErrorCode() float64 {
	if len(r.msgs) != 1 {
		return 0
	}
	e, _ := r.msgs[0]["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

// toolError is carmy's error code in a tools/call result.
func (r rawReply) toolError() string {
	for _, m := range r.msgs {
		res, _ := m["result"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		e, _ := meta["carmy/error"].(map[string]any)
		if code, ok := e["code"].(string); ok {
			return code
		}
	}
	return ""
}

// TestHostileMCPHTTP sends what a hostile or broken client might over
// /mcp, and checks the answer and that nothing ran that should not.
func TestHostileMCPHTTP(t *testing.T) {
	t.Parallel()
	f := newMCPFixture(t, carmy.New().BodyLimit(64<<10))
	alice := f.client(t, "alice-secret").open()
	saveArgs := `{"text":"x"}`
	const parseError = -32700
	tests := []struct {
		name   string
		body   string
		ctype  string
		status int
		rpc    float64 // JSON-RPC error code, 0 for none
		tool   string  // carmy's error code in the tool result
		saves  int32   // how many times save_note runs
	}{
		{name: "duplicate id in the envelope", body: `{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/call","params":{"name":"save_note","arguments":{"text":"x"}}}`, status: 400, rpc: parseError},
		{name: "duplicate method", body: `{"jsonrpc":"2.0","id":5,"method":"tools/list","method":"tools/call","params":{"name":"save_note","arguments":{"text":"x"}}}`, status: 400, rpc: parseError},
		{name: "duplicate params", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami"},"params":{"name":"save_note","arguments":{"text":"x"}}}`, status: 400, rpc: parseError},
		{name: "duplicate tool name in params", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami","name":"save_note","arguments":{"text":"x"}}}`, status: 400, rpc: parseError},
		{name: "duplicate name by escape", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami","n\u0061me":"save_note","arguments":{"text":"x"}}}`, status: 400, rpc: parseError},
		{name: "duplicate arguments", body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"save_note","arguments":{"text":"x"},"arguments":{"text":"y"}}}`, status: 400, rpc: parseError},
		{name: "duplicate member in the arguments", body: callBody(5, "save_note", `{"text":"x","text":"y"}`, ""), status: 400, rpc: parseError},
		{name: "duplicate request id in _meta", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":"a","carmy/request_id":"b"}`), status: 400, rpc: parseError},
		{name: "duplicate inside a batch", body: `[` + callBody(5, "save_note", saveArgs, "") + `,{"jsonrpc":"2.0","id":6,"id":7,"method":"tools/list"}]`, status: 400, rpc: parseError},
		{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":5,`, status: 400, rpc: parseError},
		{name: "two messages in one body", body: callBody(5, "save_note", saveArgs, "") + callBody(6, "save_note", saveArgs, ""), status: 400, rpc: parseError},
		{name: "invalid UTF-8", body: callBody(5, "save_note", "{\"text\":\"\xff\"}", ""), status: 400, rpc: parseError},
		{name: "empty body", body: ``, status: 400, rpc: parseError},
		{name: "a body over the limit", body: callBody(5, "save_note", `{"text":"`+strings.Repeat("a", 70<<10)+`"}`, ""), status: 413, rpc: parseError},
		{name: "a 4 MB request id", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":"`+strings.Repeat("r", 4_000_000)+`"}`), status: 413, rpc: parseError},
		{name: "numeric request id", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":7}`), status: 200, tool: "invalid_input"},
		{name: "null request id", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":null}`), status: 200, tool: "invalid_input"},
		{name: "object request id", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":{"id":"a"}}`), status: 200, tool: "invalid_input"},
		{name: "string request id runs", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":"r-1"}`), status: 200, saves: 1},
		{name: "the same string request id replays", body: callBody(5, "save_note", saveArgs, `{"carmy/request_id":"r-1"}`), status: 200},
		{name: "a valid call runs", body: callBody(5, "save_note", saveArgs, ""), status: 200, saves: 1},
		{name: "a valid call with a charset", body: callBody(5, "save_note", saveArgs, ""), ctype: "application/json; charset=utf-8", status: 200, saves: 1},
		{name: "another content type", body: callBody(5, "save_note", saveArgs, ""), ctype: "text/plain", status: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.host.saves.Load()
			alice.ctype = tt.ctype
			rep := alice.post(tt.body)
			if rep.status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", rep.status, tt.status, rep.text)
			}
			if tt.rpc != 0 && (rep.rpcErrorCode() != tt.rpc || !strings.Contains(rep.text, `"id":null`)) {
				t.Errorf("JSON-RPC error %v, want %v with id null: %.300s", rep.rpcErrorCode(), tt.rpc, rep.text)
			}
			if got := rep.toolError(); got != tt.tool {
				t.Errorf("tool error %q, want %q: %.300s", got, tt.tool, rep.text)
			}
			if got := f.host.saves.Load() - before; got != tt.saves {
				t.Errorf("save_note ran %d times, want %d", got, tt.saves)
			}
		})
	}
	t.Run("numeric request id twice runs nothing twice", func(t *testing.T) {
		alice.ctype = ""
		before := f.host.saves.Load()
		for range 2 {
			if rep := alice.post(callBody(5, "save_note", saveArgs, `{"carmy/request_id":8}`)); rep.toolError() != "invalid_input" {
				t.Fatalf("%d %.300s", rep.status, rep.text)
			}
		}
		if got := f.host.saves.Load() - before; got != 0 {
			t.Errorf("save_note ran %d times", got)
		}
	})
}

// TestMCPSessionsOtherPrincipal: a session is its principal's alone. Bob,
// who learned alice's session id, can neither call on it, nor read its
// stream, nor delete it, nor answer its confirmation prompt.
func TestMCPSessionsOtherPrincipal(t *testing.T) {
	t.Parallel()
	f := newMCPFixture(t, carmy.New().ElicitConfirmation())
	alice := f.client(t, "alice-secret").open()
	bob := f.client(t, "bob-secret")
	bob.session = alice.session

	tests := []struct {
		name, method, body string
	}{
		{"POST a call", http.MethodPost, callBody(9, "save_note", `{"text":"bob"}`, "")},
		{"POST a notification", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"GET the stream", http.MethodGet, ""},
		{"DELETE the session", http.MethodDelete, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.host.saves.Load()
			if rep := bob.do(tt.method, tt.body); rep.status != http.StatusNotFound {
				t.Fatalf("bob's %s on alice's session: %d %s", tt.method, rep.status, rep.text)
			}
			if f.host.saves.Load() != before {
				t.Fatal("bob's call ran")
			}
			rep := alice.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			if rep.status != http.StatusOK || len(rep.msgs) != 1 || rep.msgs[0]["result"] == nil {
				t.Fatalf("alice's session after bob's %s: %d %s", tt.method, rep.status, rep.text)
			}
		})
	}

	t.Run("elicitation answer", func(t *testing.T) {
		// Alice's call asks for confirmation on her stream; bob answers it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res, err := alice.request(ctx, http.MethodPost, callBody(11, "wipe", `{"target":"all","count":1}`, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		events := bufio.NewScanner(res.Body)
		var ask map[string]any
		for ask == nil && events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				_ = json.Unmarshal([]byte(data), &ask)
			}
		}
		if ask["method"] != "elicitation/create" {
			t.Fatalf("alice's stream: %v", ask)
		}
		id, _ := json.Marshal(ask["id"])
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"confirm":true}}}`, id)
		if rep := bob.post(answer); rep.status != http.StatusNotFound {
			t.Fatalf("bob's answer: %d %s", rep.status, rep.text)
		}
		// Alice declines; the call is refused as declined and wipe never ran.
		decline := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"decline"}}`, id)
		if rep := alice.post(decline); rep.status != http.StatusAccepted {
			t.Fatalf("alice's answer: %d %s", rep.status, rep.text)
		}
		var result map[string]any
		for result == nil && events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil && m["id"] == float64(11) {
					result = m
				}
			}
		}
		if code := (rawReply{msgs: []map[string]any{result}}).toolError(); code != "permission_denied" || f.wipes.Load() != 0 {
			t.Fatalf("wipe: %v, ran %d times", result, f.wipes.Load())
		}
	})

	t.Run("alice deletes her own session", func(t *testing.T) {
		if rep := alice.do(http.MethodDelete, ""); rep.status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", rep.status, rep.text)
		}
		if rep := alice.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); rep.status != http.StatusNotFound {
			t.Fatalf("after DELETE: %d %s", rep.status, rep.text)
		}
	})
}

// TestMCPSessionLimits: idle sessions close after the timeout, activity
// keeps one open, and a principal past the limit loses its least recently
// used session, never another principal's.
func TestMCPSessionLimits(t *testing.T) {
	t.Parallel()
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	alive := func(c *rawMCP) bool {
		c.t.Helper()
		rep := c.post(list)
		return rep.status == http.StatusOK
	}
	t.Run("idle timeout", func(t *testing.T) {
		t.Parallel()
		// The busy session is used every fifth of the timeout. A machine
		// that holds the test longer than the timeout between two uses
		// rightly closes it: then the test tries a longer timeout.
		for timeout := 250 * time.Millisecond; ; timeout *= 4 {
			f := newMCPFixture(t, carmy.New().SessionTimeout(timeout))
			idle := f.client(t, "alice-secret").open()
			used := time.Now()
			busy := f.client(t, "alice-secret").open()
			held := false
			for range 12 {
				time.Sleep(timeout / 5)
				sent := time.Now()
				if !alive(busy) {
					if gap := time.Since(used); gap < timeout {
						t.Fatalf("a session used %v ago was closed; the timeout is %v", gap, timeout)
					}
					held = true
					break
				}
				used = sent
			}
			if held && timeout < 10*time.Second {
				t.Logf("the machine held the test longer than the timeout of %v between two uses; trying %v", timeout, 4*timeout)
				continue
			}
			if held {
				t.Fatal("the busy session closed at every timeout tried")
			}
			if alive(idle) {
				t.Fatal("a session idle for twice the timeout is still open")
			}
			return
		}
	})
	t.Run("a call in progress is not idle", func(t *testing.T) {
		t.Parallel()
		// The call lasts three timeouts; the timeout runs again from its
		// end. A machine that holds the test longer than the timeout after
		// the call rightly closes the session: then the test tries a
		// longer timeout.
		for timeout := 100 * time.Millisecond; ; timeout *= 4 {
			f := newMCPFixture(t, carmy.New().SessionTimeout(timeout))
			c := f.client(t, "alice-secret").open()
			ended := time.Now().Add(3 * timeout) // at the earliest
			if rep := c.post(callBody(4, "hold", fmt.Sprintf(`{"for_ms":%d}`, 3*timeout.Milliseconds()), "")); rep.toolError() != "" || rep.status != http.StatusOK {
				t.Fatalf("hold: %d %s", rep.status, rep.text)
			}
			if alive(c) {
				return
			}
			if gap := time.Since(ended); gap < timeout {
				t.Fatalf("the session closed during a call, or %v after it; the timeout is %v", gap, timeout)
			}
			if timeout > 2*time.Second {
				t.Fatal("the session closed after the call at every timeout tried")
			}
			t.Logf("the machine held the test longer than the timeout of %v after the call; trying %v", timeout, 4*timeout)
		}
	})
	t.Run("an open stream is not idle", func(t *testing.T) {
		t.Parallel()
		f := newMCPFixture(t, carmy.New().SessionTimeout(200*time.Millisecond))
		c := f.client(t, "alice-secret").open()
		ctx, cancel := context.WithCancel(context.Background())
		connected, streaming := make(chan int, 1), make(chan struct{})
		go func() {
			defer close(streaming)
			res, err := c.request(ctx, http.MethodGet, "")
			if err != nil {
				connected <- 0
				return
			}
			connected <- res.StatusCode
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}()
		if status := <-connected; status != http.StatusOK {
			t.Fatalf("GET: %d", status)
		}
		time.Sleep(500 * time.Millisecond)
		if !alive(c) {
			t.Fatal("the session closed while its client held its stream")
		}
		cancel()
		<-streaming
		time.Sleep(500 * time.Millisecond)
		if alive(c) {
			t.Fatal("the session stayed open after its stream ended")
		}
	})
	t.Run("least recently used goes first", func(t *testing.T) {
		t.Parallel()
		f := newMCPFixture(t, carmy.New().MaxSessions(2))
		a1 := f.client(t, "alice-secret").open()
		a2 := f.client(t, "alice-secret").open()
		b1 := f.client(t, "bob-secret").open()
		b2 := f.client(t, "bob-secret").open()
		alive(a1) // a2 is now the least recently used
		a3 := f.client(t, "alice-secret").open()
		// The eviction closes a2 in the background.
		waitFor(t, "a2 to close", func() bool { return !alive(a2) })
		for _, tc := range []struct {
			name string
			c    *rawMCP
		}{{"a1", a1}, {"a3", a3}, {"b1", b1}, {"b2", b2}} {
			if !alive(tc.c) {
				t.Errorf("%s was closed", tc.name)
			}
		}
	})
	t.Run("settings must be positive", func(t *testing.T) {
		t.Parallel()
		_, err := carmy.New().SessionTimeout(0).MaxSessions(-1).Build()
		if err == nil || !strings.Contains(err.Error(), "SessionTimeout") || !strings.Contains(err.Error(), "MaxSessions") {
			t.Fatalf("Build: %v", err)
		}
	})
}

// TestMCPCancellation: a call whose client went away has its tool's
// context cancelled, so that a serialized tool is free for others.
func TestMCPCancellation(t *testing.T) {
	t.Parallel()
	t.Run("the HTTP request ends", func(t *testing.T) {
		f := newMCPFixture(t, nil)
		alice := f.client(t, "alice-secret").open()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			if res, err := alice.request(ctx, http.MethodPost, callBody(4, "hold", `{"for_ms":10000}`, "")); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
		f.waitStarted(t)
		cancel()
		waitFor(t, "the tool's context to end", func() bool { return f.cancelled.Load() == 1 })
	})
	t.Run("notifications/cancelled", func(t *testing.T) {
		f := newMCPFixture(t, nil)
		alice := f.client(t, "alice-secret").open()
		done := make(chan rawReply, 1)
		go func() { done <- alice.post(callBody(4, "hold", `{"for_ms":10000}`, "")) }()
		f.waitStarted(t)
		if rep := alice.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`); rep.status != http.StatusAccepted {
			t.Fatalf("cancel: %d %s", rep.status, rep.text)
		}
		waitFor(t, "the tool's context to end", func() bool { return f.cancelled.Load() == 1 })
		<-done
	})
	t.Run("an abandoned batch frees the serialized tool", func(t *testing.T) {
		f := newMCPFixture(t, nil)
		alice := f.client(t, "alice-secret").open()
		calls := make([]string, 12)
		for i := range calls {
			calls[i] = callBody(100+i, "hold", `{"for_ms":500}`, "")
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			if res, err := alice.request(ctx, http.MethodPost, "["+strings.Join(calls, ",")+"]"); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
		f.waitStarted(t)
		cancel()
		start := time.Now()
		bob := f.client(t, "bob-secret").open()
		rep := bob.post(callBody(4, "hold", `{"for_ms":10}`, ""))
		if rep.status != http.StatusOK || rep.toolError() != "" {
			t.Fatalf("bob's call: %d %s", rep.status, rep.text)
		}
		if waited := time.Since(start); waited > 2*time.Second {
			t.Fatalf("bob waited %v behind an abandoned batch", waited)
		}
	})
}

// waitFor waits until cond holds; the deadline is generous, for a
// loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMCPConfirmationPrompt: the prompt shows the canonical input, the
// document the digest is over, indented, with characters that could hide
// or disguise text escaped.
func TestMCPConfirmationPrompt(t *testing.T) {
	t.Parallel()
	f := newMCPFixture(t, carmy.New().ElicitConfirmation())
	alice := f.client(t, "alice-secret").open()
	// Out of order, a float notation, an escape sequence, a right-to-left
	// override and a zero-width space in the target.
	args := `{"count":1.0e0,"target":"a\u001b[2Jb` + "\u202e" + `c` + "\u200b" + `d"}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := alice.request(ctx, http.MethodPost, callBody(11, "wipe", args, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := bufio.NewScanner(res.Body)
	var ask struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	for ask.Method == "" && events.Scan() {
		if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(data), &ask)
		}
	}
	want := "Allow wipe to run with this input?\n{\n  \"count\": 1,\n  \"target\": \"a\\u001b[2Jb\\u202ec\\u200bd\"\n}"
	if ask.Params.Message != want {
		t.Fatalf("prompt\n%q\nwant\n%q", ask.Params.Message, want)
	}
}

// stdioLines serves a registry over stdio with the given input and
// returns every message it wrote, once the input ended.
func stdioLines(t *testing.T, b *carmy.Builder, h *hostTools, input string) []map[string]any {
	t.Helper()
	reg, err := b.Tool(h.defs()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := reg.ServeStdio(ctx, strings.NewReader(input), &out); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	var msgs []map[string]any
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one message per line: %q", line)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

const stdioInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

// TestHostileMCPStdio: over stdio, every line that is not a message gets
// its error and the server goes on; every request read before the input
// ends is answered.
func TestHostileMCPStdio(t *testing.T) {
	t.Parallel()
	list := `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`
	save := func(id int, meta string) string { return callBody(id, "save_note", `{"text":"x"}`, meta) }
	type answer struct {
		id   any     // the id answered, nil for an error that belongs to no request
		code float64 // JSON-RPC error code, 0 for a result
		tool string  // carmy's error code in a tool result
	}
	tests := []struct {
		name  string
		lines string
		want  []answer // besides initialize's
		saves int32
	}{
		{name: "a malformed line", lines: "{\"jsonrpc\":\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "not JSON at all", lines: "hello\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "a duplicate member in the envelope", lines: `{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/list"}` + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "a duplicate member in params", lines: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami","name":"save_note","arguments":{"text":"x"}}}` + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "a duplicate member in the arguments", lines: callBody(5, "save_note", `{"text":"x","text":"y"}`, "") + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "invalid UTF-8", lines: callBody(5, "save_note", "{\"text\":\"\xff\"}", "") + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "a line over the body limit", lines: callBody(5, "save_note", `{"text":"`+strings.Repeat("a", 5000)+`"}`, "") + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "a 4 MB request id", lines: save(5, `{"carmy/request_id":"`+strings.Repeat("r", 4_000_000)+`"}`) + "\n" + list, want: []answer{{nil, -32700, ""}, {99.0, 0, ""}}},
		{name: "JSON that is not JSON-RPC", lines: `{"hello":"world"}` + "\n" + list, want: []answer{{nil, -32600, ""}, {99.0, 0, ""}}},
		{name: "a numeric request id", lines: save(5, `{"carmy/request_id":5}`), want: []answer{{5.0, 0, "invalid_input"}}},
		{name: "blank lines and CRLF", lines: "\n  \r\n" + strings.ReplaceAll(save(5, ""), "\n", "") + "\r\n\n", want: []answer{{5.0, 0, ""}}, saves: 1},
		{name: "every request read is answered at the end of the input", lines: save(5, "") + "\n" + save(6, "") + "\n" + list, want: []answer{{5.0, 0, ""}, {6.0, 0, ""}, {99.0, 0, ""}}, saves: 2},
		{name: "a last line without a newline", lines: list, want: []answer{{99.0, 0, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hostTools{}
			msgs := stdioLines(t, carmy.New().BodyLimit(4096), h, stdioInit+tt.lines)
			// Answers come in any order: an error answer may come before
			// initialize's, and concurrent calls finish as they do.
			var got, want []string
			for _, m := range msgs {
				e, _ := m["error"].(map[string]any)
				code, _ := e["code"].(float64)
				if id, ok := m["id"]; !ok {
					t.Errorf("an answer without an id (JSON-RPC wants null when there is none): %v", m)
				} else if id == nil && code == 0 {
					t.Errorf("a result with id null: %v", m)
				}
				got = append(got, fmt.Sprint(answer{m["id"], code, (rawReply{msgs: []map[string]any{m}}).toolError()}))
			}
			for _, w := range append([]answer{{1.0, 0, ""}}, tt.want...) {
				want = append(want, fmt.Sprint(w))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("answers (id, code, tool error)\n%v\nwant\n%v", got, want)
			}
			if got := h.saves.Load(); got != tt.saves {
				t.Errorf("save_note ran %d times, want %d", got, tt.saves)
			}
		})
	}
}

// TestMCPStdioEndWhileAsking: when the input ends while the server waits
// for the client's answer to a confirmation prompt, which can no longer
// come, the server ends instead of waiting, and the tool does not run.
func TestMCPStdioEndWhileAsking(t *testing.T) {
	t.Parallel()
	h := &hostTools{}
	init := strings.Replace(stdioInit, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	start := time.Now()
	msgs := stdioLines(t, carmy.New().ElicitConfirmation(), h, init+callBody(5, "burn_note", `{"text":"x"}`, "")+"\n")
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the server waited %v for an answer from a closed input", waited)
	}
	asked := false
	for _, m := range msgs {
		asked = asked || m["method"] == "elicitation/create"
		if m["id"] == 5.0 && (rawReply{msgs: []map[string]any{m}}).toolError() != "confirmation_required" {
			t.Errorf("burn_note: %v", m)
		}
	}
	if !asked {
		t.Errorf("the server did not ask: %v", msgs)
	}
}

// TestMCPParamsInProtocolWords: params the protocol gives another form are
// refused as invalid params, answering the request's id, in the protocol's
// words: never the SDK's Go types, nor the params quoted back.
func TestMCPParamsInProtocolWords(t *testing.T) {
	t.Parallel()
	bad := []struct{ name, msg string }{
		{"a tool name that is a number", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5,"arguments":{"text":"x"}}}`},
		{"params that are an array", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["save_note"]}`},
		{"_meta that is a string", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"save_note","arguments":{"text":"x"},"_meta":"secret-looking"}}`},
		{"a cursor that is an object", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":{"a":1}}}`},
		{"a log level that is a number", `{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":3}}`},
	}
	leaks := []string{"Go ", "mcp.", "Params", "unmarshal", "struct", "secret-looking", "json:"}
	check := func(t *testing.T, text string, msgs []map[string]any) {
		t.Helper()
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("the answer says %q: %.400s", leak, text)
			}
		}
		for _, m := range msgs {
			if m["id"] != 7.0 {
				continue
			}
			e, _ := m["error"].(map[string]any)
			if code, _ := e["code"].(float64); code != -32602 {
				t.Errorf("answer %v; want invalid params (-32602)", m)
			}
			return
		}
		t.Errorf("no answer to id 7 in %.400s", text)
	}
	t.Run("HTTP", func(t *testing.T) {
		f := newMCPFixture(t, carmy.New())
		alice := f.client(t, "alice-secret").open()
		for _, tt := range bad {
			t.Run(tt.name, func(t *testing.T) {
				rep := alice.post(tt.msg)
				check(t, rep.text, rep.msgs)
				if got := f.host.saves.Load(); got != 0 {
					t.Errorf("save_note ran %d times", got)
				}
			})
		}
	})
	t.Run("stdio", func(t *testing.T) {
		for _, tt := range bad {
			t.Run(tt.name, func(t *testing.T) {
				h := &hostTools{}
				msgs := stdioLines(t, carmy.New(), h, stdioInit+tt.msg)
				text, _ := json.Marshal(msgs)
				check(t, string(text), msgs)
				if got := h.saves.Load(); got != 0 {
					t.Errorf("save_note ran %d times", got)
				}
			})
		}
	})
}
