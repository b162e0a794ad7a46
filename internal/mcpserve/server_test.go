package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// host is a Host whose tools answer what run says, and that records every
// call it gets.
type host struct {
	run    func(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error)
	hidden map[string]bool

	mu    sync.Mutex
	calls []*mcpserve.Call
}

func (h *host) Authenticate(w http.ResponseWriter, req *http.Request) (mcpserve.Identity, bool) {
	who := req.Header.Get("X-Who")
	if who == "" {
		http.Error(w, "who are you?", http.StatusUnauthorized)
		return mcpserve.Identity{}, false
	}
	return mcpserve.Identity{Principal: who, Permissions: []string{"p"}}, true
}

func (h *host) Call(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	return h.run(ctx, c)
}

func (h *host) Visible(_ context.Context, id mcpserve.Identity) func(string) bool {
	return func(name string) bool { return !h.hidden[id.Principal+"/"+name] }
}

func (h *host) UnknownTool(_ context.Context, name string, _ mcpserve.Identity) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no tool " + name + " here"}
}

func (h *host) last(t *testing.T) *mcpserve.Call {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 {
		t.Fatal("the host got no call")
	}
	return h.calls[len(h.calls)-1]
}

func tool(name string, output string) mcpserve.Tool {
	t := mcpserve.Tool{Def: &mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}}
	if output != "" {
		t.Output = json.RawMessage(output)
	}
	return t
}

// tools is a table with a tool of each kind of output.
func tools() []mcpserve.Tool {
	blocks := tool("blocks", `{"type":"array"}`)
	blocks.Content = true
	return []mcpserve.Tool{
		tool("object", `{"type":"object"}`),
		tool("count", `{"type":"integer"}`),
		tool("none", ""),
		blocks,
	}
}

// wireError is a host's error, whose JSON form is its members.
type wireError map[string]any

func (e wireError) Error() string { return fmt.Sprint(e["message"]) }

// outcomes answers each tool of tools, and "fail" as a refusal.
func outcomes(_ context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
	var in struct{ Fail bool }
	_ = json.Unmarshal(c.Params.Arguments, &in)
	if in.Fail {
		return mcpserve.Outcome{Err: wireError{"code": "invalid_input", "message": "no"}}, nil
	}
	out := mcpserve.Outcome{ExecutionID: "e1", Replayed: true}
	switch c.Tool {
	case "object":
		out.Output = json.RawMessage(`{"a":1}`)
	case "count":
		out.Output = json.RawMessage(`3`)
	case "none":
		out.Output = json.RawMessage(`"done"`)
	case "blocks":
		out.Content = []mcp.Content{&mcp.TextContent{Text: "one"}}
	}
	return out, nil
}

// The protocol generations: the last with sessions, and the sessionless.
var versions = []string{"2025-11-25", mcpwire.SessionlessProtocol}

// serve connects a client of protocol version v to a server of cfg over an
// in-memory pair.
func serve(t *testing.T, cfg mcpserve.Config, v string, opts *mcp.ClientOptions) (*mcpserve.Server, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := mcpserve.New(cfg)
	serverT, clientT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, serverT) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, clientT, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return s, cs
}

func TestOutputSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		wrapped        bool
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"type":"object","properties":{"a":{"type":"integer"}}}`, false},
		{"integer", `{"type":"integer"}`, `{"additionalProperties":false,"properties":{"result":{"type":"integer"}},"required":["result"],"type":"object"}`, true},
		{"defs to the root", `{"$defs":{"x":{"type":"string"}},"type":"array","items":{"$ref":"#/$defs/x"}}`,
			`{"$defs":{"x":{"type":"string"}},"additionalProperties":false,"properties":{"result":{"items":{"$ref":"#/$defs/x"},"type":"array"}},"required":["result"],"type":"object"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, wrapped := mcpserve.OutputSchema(json.RawMessage(tc.in))
			if string(got) != tc.want || wrapped != tc.wrapped {
				t.Errorf("OutputSchema(%s) = %s, %v; want %s, %v", tc.in, got, wrapped, tc.want, tc.wrapped)
			}
		})
	}
}

// TestResults: the door writes each kind of outcome as MCP wants it, and
// the calls of a session go past the SDK's JSON-RPC server.
func TestResults(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			testResults(t, v)
		})
	}
}

func testResults(t *testing.T, v string) {
	h := &host{run: outcomes}
	stdio := mcpserve.Identity{Principal: "stdio-user", Metadata: map[string]string{"k": "v"}}
	s, cs := serve(t, mcpserve.Config{Host: h, Tools: tools(), Version: "v0", Stdio: stdio}, v, nil)
	for _, tc := range []struct {
		tool, args string
		want       string
	}{
		{"object", `{}`, `{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1},"_meta":{"carmy/execution_id":"e1","carmy/replayed":true}}`},
		{"count", `{}`, `{"content":[{"type":"text","text":"3"}],"structuredContent":{"result":3},"_meta":{"carmy/execution_id":"e1","carmy/replayed":true}}`},
		{"none", `{}`, `{"content":[{"type":"text","text":"done"}],"_meta":{"carmy/execution_id":"e1","carmy/replayed":true}}`},
		{"blocks", `{}`, `{"content":[{"type":"text","text":"one"}],"_meta":{"carmy/execution_id":"e1","carmy/replayed":true}}`},
		// With an output schema the error is not structured content, which
		// a client would check against the schema.
		{"object", `{"Fail":true}`, `{"content":[{"type":"text","text":"{\"code\":\"invalid_input\",\"message\":\"no\"}"}],"isError":true,"_meta":{"carmy/error":{"code":"invalid_input","message":"no"}}}`},
		{"none", `{"Fail":true}`, `{"content":[{"type":"text","text":"{\"code\":\"invalid_input\",\"message\":\"no\"}"}],"structuredContent":{"code":"invalid_input","message":"no"},"isError":true,"_meta":{"carmy/error":{"code":"invalid_input","message":"no"}}}`},
	} {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			before := s.Answered()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			got := withoutEnvelope(t, res)
			if !jsonEqual(t, got, tc.want) {
				t.Errorf("result\n got %s\nwant %s", got, tc.want)
			}
			if s.Answered() == before {
				t.Error("the call went through the SDK's server, not the door's own path")
			}
			c := h.last(t)
			if c.Tool != tc.tool || !c.Authenticated || c.Caller.Principal != "stdio-user" || c.Caller.Metadata["k"] != "v" ||
				c.Peer == nil || !c.Peer.Single() || c.Peer.Sessionless() != (v == mcpwire.SessionlessProtocol) || c.Request != nil || c.Header != nil {
				t.Errorf("the host got %+v", c)
			}
		})
	}
}

// withoutEnvelope is a result as JSON without what the protocol version
// adds to every result (its type, the server's identity).
func withoutEnvelope(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "resultType")
	if meta, ok := m["_meta"].(map[string]any); ok {
		delete(meta, "io.modelcontextprotocol/serverInfo")
	}
	b, _ = json.Marshal(m)
	return string(b)
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// TestListAndUnknown: tools/list shows the host's tools that the caller
// may see, with their output schemas as MCP wants them, and what a host
// configured; a call of a tool that does not exist gets the host's answer.
func TestListAndUnknown(t *testing.T) {
	t.Parallel()
	h := &host{run: outcomes, hidden: map[string]bool{"me/none": true}}
	cfg := mcpserve.Config{Host: h, Tools: tools(), Stdio: mcpserve.Identity{Principal: "me"},
		Configure: []func(*mcp.Server){func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "sdk", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sdk"}}}, nil
			})
		}}}
	s, cs := serve(t, cfg, versions[0], nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if schema, _ := json.Marshal(tl.OutputSchema); tl.Name == "count" && !strings.Contains(string(schema), `"result"`) {
			t.Errorf("count's output schema is %s, want it wrapped", tl.OutputSchema)
		}
	}
	if got := strings.Join(names, ","); got != "blocks,count,object,sdk" {
		t.Errorf("tools/list = %s, want blocks,count,object,sdk", got)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "no tool nope here") {
		t.Errorf("calling an unknown tool: %v, want the host's answer", err)
	}
	// A configured server serves every call through the SDK, whose
	// middleware must see them.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "object", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if s.Answered() != 0 {
		t.Error("a configured server answered a call past the SDK")
	}
}

// TestPeer: a tool reaches its client through the Peer the door hands the
// host: progress for a call that asked for it, log messages at the level
// the client set.
func TestPeer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, s)
	}
	h := &host{run: func(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
		c.Peer.Progress(ctx, 1, 2, "half")
		c.Peer.Log(ctx, slog.LevelInfo, "hello", []any{"n", 1})
		c.Peer.Log(ctx, slog.LevelDebug, "hidden", nil)
		return outcomes(ctx, c)
	}}
	_, cs := serve(t, mcpserve.Config{Host: h, Tools: tools()}, versions[0], &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			note("progress " + r.Params.Message)
		},
		//lint:ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			note("log " + string(r.Params.Level) + " " + string(b))
		},
	})
	//lint:ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	p := &mcp.CallToolParams{Name: "object", Arguments: map[string]any{}}
	p.SetProgressToken("tok")
	if _, err := cs.CallTool(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	want := []string{"progress half", `log info {"message":"hello","n":1}`}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the client got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPeerSessionless: in the sessionless protocol a question is not sent
// but recorded, and the call's result asks it, with the state the next
// round must echo, as the host sealed it: two questions of one name go
// in the same round, the second as name_2.
func TestPeerSessionless(t *testing.T) {
	t.Parallel()
	h := &host{run: func(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
		if !c.Peer.Sessionless() {
			return mcpserve.Outcome{}, errors.New("not sessionless")
		}
		for range 2 {
			_, err := c.Peer.Elicit(ctx, "name", &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
			if !errors.Is(err, mcpserve.ErrNeedsInput) {
				return mcpserve.Outcome{}, err
			}
		}
		c.Peer.SetState("s1")
		if ids, _, state := c.Peer.Asked(); len(ids) != 2 || ids[0] != "name" || ids[1] != "name_2" || state != "s1" {
			return mcpserve.Outcome{}, fmt.Errorf("asked %v with %q", ids, state)
		}
		c.Peer.Seal("sealed s1")
		return mcpserve.Outcome{Err: wireError{"code": "unavailable"}}, nil
	}}
	srv := httptest.NewServer(mcpserve.New(mcpserve.Config{Host: h, Tools: tools(), BodyLimit: 1 << 20, Sessions: mcpwire.NewSessionTable(time.Minute, 4, nil)}).HTTPHandler())
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"object","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
	req.Header.Set("X-Who", "me")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "object")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans struct {
		Result struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	if _, ok := ans.Result.InputRequests["name_2"]; !ok || len(ans.Result.InputRequests) != 2 || ans.Result.RequestState != "sealed s1" {
		t.Errorf("answer %+v, want the questions name and name_2 and the sealed state", ans.Result)
	}
	if c := h.last(t); c.Caller.Principal != "me" || c.Request == nil || c.Header.Get("Mcp-Name") != "object" {
		t.Errorf("the host got %+v", c)
	}
}

// TestHTTPSessions: the handler asks the host who calls, answers a
// session's calls itself, and lets only the principal that opened a
// session use it.
func TestHTTPSessions(t *testing.T) {
	t.Parallel()
	h := &host{run: outcomes}
	sessions := mcpwire.NewSessionTable(time.Minute, 4, nil)
	defer sessions.CloseAll()
	s := mcpserve.New(mcpserve.Config{Host: h, Tools: tools(), BodyLimit: 1 << 20, Sessions: sessions})
	srv := httptest.NewServer(s.HTTPHandler())
	defer srv.Close()

	res, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request the host did not authenticate got %d, want 401", res.StatusCode)
	}

	client := &http.Client{Transport: whoTransport("alice")}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: versions[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "object", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if s.Answered() != 1 {
		t.Error("a session's call went through the SDK's server")
	}
	if c := h.last(t); c.Caller.Principal != "alice" || c.Session != cs.ID() || c.Peer.Single() {
		t.Errorf("the host got %+v, want alice's call of session %s", c, cs.ID())
	}
	if sessions.Len() != 1 {
		t.Errorf("%d sessions recorded, want 1", sessions.Len())
	}

	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("X-Who", "mallory")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("another principal's request on alice's session got %d, want 404", res.StatusCode)
	}
}

type whoTransport string

func (w whoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Who", string(w))
	return http.DefaultTransport.RoundTrip(req)
}
