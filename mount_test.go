package carmy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// upstream is a third-party MCP server for the mount tests, written with
// the official SDK: it records what reaches it.
type upstream struct {
	server *mcp.Server
	mu     sync.Mutex
	calls  map[string]int
	args   []string         // the raw arguments each call received
	metas  []map[string]any // each call's _meta
	drop   atomic.Bool      // lose the answer of the next call of "write"
	auth   atomic.Value     // the last Authorization header received
	// rewrite, when set, changes the answers to POST requests on their
	// way out: what the SDK has no field for.
	rewrite atomic.Pointer[func([]byte) []byte]
}

// The upstream's input schemas, with their keys in an order no encoder of
// maps would choose: a mount publishes them byte for byte.
const (
	readSchema  = `{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"]}`
	writeSchema = `{"type":"object","required":["path","text"],"properties":{"text":{"type":"string"},"path":{"type":"string"}},"additionalProperties":false}`
	emptySchema = `{"type":"object"}`
	sumSchema   = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`
	sumOut      = `{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"]}`
)

func newUpstream() *upstream {
	u := &upstream{calls: map[string]int{}, server: mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)}
	no, yes := false, true
	u.add(&mcp.Tool{Name: "read", Description: "Reads a file", InputSchema: json.RawMessage(readSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(args json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + string(args)}}}
	})
	u.add(&mcp.Tool{Name: "write", Description: "Writes a file", InputSchema: json.RawMessage(writeSchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}
	})
	u.add(&mcp.Tool{Name: "post", Description: "Posts a message", InputSchema: json.RawMessage(emptySchema),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "posted"}}}
	})
	u.add(&mcp.Tool{Name: "delete", Description: "Deletes a file", InputSchema: json.RawMessage(readSchema)}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}
	})
	u.add(&mcp.Tool{Name: "fail", Description: "Always fails", InputSchema: json.RawMessage(emptySchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(json.RawMessage) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk on fire"}}}
	})
	u.add(&mcp.Tool{Name: "sum", Description: "Adds", InputSchema: json.RawMessage(sumSchema), OutputSchema: json.RawMessage(sumOut),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(args json.RawMessage) *mcp.CallToolResult {
		var in struct{ A, B int64 }
		_ = json.Unmarshal(args, &in)
		return &mcp.CallToolResult{StructuredContent: map[string]any{"sum": in.A + in.B}, Content: []mcp.Content{}}
	})
	return u
}

// add adds a tool whose handler counts and records its calls.
func (u *upstream) add(t *mcp.Tool, answer func(args json.RawMessage) *mcp.CallToolResult) {
	u.server.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.mu.Lock()
		u.calls[t.Name]++
		u.args = append(u.args, string(req.Params.Arguments))
		u.metas = append(u.metas, req.Params.Meta)
		u.mu.Unlock()
		return answer(req.Params.Arguments), nil
	})
}

func (u *upstream) count(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[name]
}

// serveHTTP serves the upstream over streamable HTTP; a call whose answer
// is to be lost closes the connection instead of answering.
func (u *upstream) serveHTTP(t *testing.T) *httptest.Server {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.auth.Store(r.Header.Get("Authorization"))
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"name":"write"`)) && u.drop.CompareAndSwap(true, false) {
			h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs
			panic(http.ErrAbortHandler)            // and the connection is cut: its answer is lost
		}
		if f := u.rewrite.Load(); f != nil && r.Method == http.MethodPost {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			maps.Copy(w.Header(), rec.Header())
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			_, _ = w.Write((*f)(rec.Body.Bytes()))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range u.server.Sessions() { // sessions whose client never ended them
			_ = ss.Close()
		}
	})
	t.Cleanup(srv.CloseClientConnections)
	t.Cleanup(srv.Close)
	return srv
}

// mountBuild builds a registry mounting the upstream at url under prefix.
func mountBuild(t *testing.T, url string, opts ...carmy.MountOption) *carmy.Registry {
	t.Helper()
	return build(t, carmy.New().Mount("fs", carmy.Endpoint(url), opts...))
}

func TestMountPublishesTheUpstreamsTools(t *testing.T) {
	u := newUpstream()
	reg := mountBuild(t, u.serveHTTP(t).URL)
	for _, c := range []struct {
		name, schema string
		effect       carmy.Effect
		confirm      carmy.Confirmation
	}{
		{"fs_read", readSchema, carmy.Read, carmy.ConfirmationNone},
		{"fs_write", writeSchema, carmy.Write, carmy.ConfirmationNone},
		{"fs_post", emptySchema, carmy.ExternalWrite, carmy.ConfirmationNone},
		{"fs_delete", readSchema, carmy.Destructive, carmy.ConfirmationRequired},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, ok := reg.Lookup(c.name)
			if !ok {
				t.Fatalf("%s is not a tool of the registry", c.name)
			}
			if string(m.InputSchema) != c.schema {
				t.Errorf("input schema = %s, want the upstream's bytes %s", m.InputSchema, c.schema)
			}
			if m.Effect != c.effect || m.Confirmation != c.confirm {
				t.Errorf("effect %s, confirmation %s; want %s, %s", m.Effect, m.Confirmation, c.effect, c.confirm)
			}
		})
	}
	if m, _ := reg.Lookup("fs_sum"); string(m.OutputSchema) != sumOut {
		t.Errorf("output schema = %s, want the upstream's %s", m.OutputSchema, sumOut)
	}
}

func TestMountCallsGoThroughEveryRule(t *testing.T) {
	u := newUpstream()
	reg := mountBuild(t, u.serveHTTP(t).URL)
	ctx := context.Background()

	t.Run("an invalid call never reaches the upstream", func(t *testing.T) {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_write", Input: json.RawMessage(`{"path":"a","extra":1}`)})
		if carmy.CodeOf(err) != carmy.CodeInvalidInput {
			t.Fatalf("err = %v, want invalid_input", err)
		}
		if n := u.count("write"); n != 0 {
			t.Fatalf("the upstream got %d calls", n)
		}
	})
	t.Run("the upstream receives the canonical bytes and the request id", func(t *testing.T) {
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_write", RequestID: "w-1", Input: json.RawMessage(`{ "text" : "hi", "path":"a.txt" }`)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Output), "written") {
			t.Errorf("output %s", res.Output)
		}
		u.mu.Lock()
		args, meta := u.args[len(u.args)-1], u.metas[len(u.metas)-1]
		u.mu.Unlock()
		if args != `{"path":"a.txt","text":"hi"}` {
			t.Errorf("the upstream received %s, want the canonical form", args)
		}
		if meta[carmy.MetaRequestID] != "w-1" {
			t.Errorf("the upstream's _meta = %v, want carmy/request_id w-1", meta)
		}
	})
	t.Run("a replay never reaches the upstream", func(t *testing.T) {
		before := u.count("write")
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_write", RequestID: "w-1", Input: json.RawMessage(`{"path":"a.txt","text":"hi"}`)})
		if err != nil || !res.Replayed {
			t.Fatalf("res %+v, err %v: want a replay", res, err)
		}
		if n := u.count("write"); n != before {
			t.Errorf("the upstream got %d more calls", n-before)
		}
	})
	t.Run("a destructive tool needs a person", func(t *testing.T) {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Input: json.RawMessage(`{"path":"a.txt"}`)})
		if carmy.CodeOf(err) != carmy.CodeConfirmationRequired || u.count("delete") != 0 {
			t.Fatalf("err = %v, upstream calls %d; want confirmation_required and none", err, u.count("delete"))
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Permissions: []string{"confirm:fs_delete"}, Input: json.RawMessage(`{"path":"a.txt"}`)}); err != nil {
			t.Fatal(err)
		}
		if u.count("delete") != 1 {
			t.Errorf("the confirmed call did not reach the upstream")
		}
	})
	t.Run("an approval binds the definition as well as the input", func(t *testing.T) {
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Input: json.RawMessage(`{"path":"b"}`)})
		var e *carmy.Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(`{"path":"b"}`))
		if e.Details["digest"] == hex.EncodeToString(sum[:]) {
			t.Errorf("the digest of a mounted tool is the input's alone")
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_delete", Permissions: []string{"confirm:fs_delete:" + hex.EncodeToString(sum[:])}, Input: json.RawMessage(`{"path":"b"}`)}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Errorf("a grant for the input alone: err = %v, want confirmation_required", err)
		}
	})
	t.Run("the upstream's tool error is tool_error, recorded for replay", func(t *testing.T) {
		for i, want := range []bool{false, true} {
			res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_fail", RequestID: "f-1"})
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeToolError || e.Retryable || !strings.Contains(e.Message, "disk on fire") {
				t.Fatalf("call %d: err = %v, want a non-retryable tool_error with the upstream's text", i, err)
			}
			_ = res
			if n := u.count("fail"); n != 1 {
				t.Fatalf("call %d: the upstream got %d calls, want 1 (replayed: %v)", i, n, want)
			}
		}
	})
	t.Run("structured output is checked and passed on", func(t *testing.T) {
		got, err := carmy.Invoke[map[string]int64](ctx, reg, "fs_sum", map[string]any{"a": 2, "b": 40})
		if err != nil || got["sum"] != 42 {
			t.Fatalf("got %v, %v", got, err)
		}
	})
}

func TestMountFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("an answer lost after sending is outcome_unknown, recorded", func(t *testing.T) {
		u := newUpstream()
		reg := mountBuild(t, u.serveHTTP(t).URL)
		u.drop.Store(true)
		for i := range 2 {
			_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_write", RequestID: "lost", Input: json.RawMessage(`{"path":"a","text":"b"}`)})
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Retryable || e.Details["reason"] != "outcome_unknown" {
				t.Fatalf("call %d: err = %v (%+v), want unavailable, not retryable, outcome_unknown", i, err, e)
			}
			if n := u.count("write"); n != 1 {
				t.Fatalf("call %d: the upstream got %d calls, want 1", i, n)
			}
		}
	})
	t.Run("an upstream that cannot be reached is unavailable, retryable", func(t *testing.T) {
		u := newUpstream()
		srv := u.serveHTTP(t)
		reg := mountBuild(t, srv.URL)
		srv.CloseClientConnections()
		srv.Close()
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: json.RawMessage(`{"path":"a"}`)})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable {
			t.Fatalf("err = %v, want a retryable unavailable", err)
		}
		if !strings.Contains(e.Message, "mount fs") {
			t.Errorf("message %q does not name the mount", e.Message)
		}
	})
	t.Run("an upstream that hangs past the timeout is outcome_unknown", func(t *testing.T) {
		u := newUpstream()
		u.server.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				<-ctx.Done() // the cancel carmy forwards
				return nil, ctx.Err()
			})
		reg := mountBuild(t, u.serveHTTP(t).URL, carmy.MountTool("hang", carmy.ToolOverride{Timeout: 200 * time.Millisecond}))
		_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_hang", RequestID: "h"})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || e.Retryable || e.Details["reason"] != "outcome_unknown" {
			t.Fatalf("err = %v, want unavailable, not retryable, outcome_unknown", err)
		}
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_read", Input: json.RawMessage(`{"path":"a"}`)}); err != nil {
			t.Errorf("the mount's other tools: %v", err)
		}
	})
	t.Run("a mount that cannot connect is a Build error naming it", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := carmy.New().Mount("gh", carmy.Endpoint(srv.URL+"/mcp")).Build()
		if err == nil || !strings.Contains(err.Error(), "mount gh") {
			t.Fatalf("err = %v, want a Build error naming mount gh", err)
		}
	})
	t.Run("a changed tool is served as it now is, a vanished one answers unavailable, and both are audited", func(t *testing.T) {
		u := newUpstream()
		var mu sync.Mutex
		var recs []carmy.AuditRecord
		b := carmy.New().ToolSearch().Mount("fs", carmy.Endpoint(u.serveHTTP(t).URL)).Audit(carmy.AuditorFunc(func(_ context.Context, r carmy.AuditRecord) error {
			mu.Lock()
			defer mu.Unlock()
			recs = append(recs, r)
			return nil
		}))
		reg := build(t, b)
		told := make(chan struct{}, 8)
		mcpConnect(t, serve(t, reg).URL, "2025-11-25", &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { told <- struct{}{} },
		})
		no := false
		u.server.AddTool(&mcp.Tool{Name: "write", Description: "Writes anything", InputSchema: json.RawMessage(writeSchema),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written anew"}}}, nil
		})
		u.server.RemoveTools("post")
		waitFor(t, "fs_write's new definition and fs_post's absence", func() bool {
			m, _ := reg.Lookup("fs_write")
			_, err := reg.Execute(ctx, carmy.Call{Tool: "fs_post"})
			var e *carmy.Error
			return m.Description == "Writes anything" && errors.As(err, &e) && e.Details["reason"] == "tool_vanished"
		})
		res, err := reg.Execute(ctx, carmy.Call{Tool: "fs_write", Input: json.RawMessage(`{"path":"a","text":"b"}`)})
		if err != nil || !strings.Contains(string(res.Output), "written anew") {
			t.Errorf("fs_write = %s, %v; want the upstream's new tool to answer", res.Output, err)
		}
		select {
		case <-told:
		case <-time.After(5 * time.Second):
			t.Error("carmy's MCP client was not told that the tools changed")
		}
		// The lists carmy's clients see leave the vanished tool out.
		for _, m := range reg.ToolsFor(ctx, carmy.Identity{}) {
			if m.Name == "fs_post" {
				t.Errorf("%s is still listed", m.Name)
			}
		}
		// Nor does a search find it, though the index was built with it.
		found, err := reg.Execute(ctx, carmy.Call{Tool: "search_tools", Input: json.RawMessage(`{"query":"fs write post read anything","limit":50}`)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(found.Output), `"fs_write"`) || strings.Contains(string(found.Output), `"fs_post"`) {
			t.Errorf("search_tools found %s; want fs_write, not the vanished fs_post", found.Output)
		}
		// A change is audited once it is served.
		waitFor(t, "tool_changed records of fs_write and fs_post", func() bool {
			mu.Lock()
			defer mu.Unlock()
			changed := map[string]bool{}
			for _, r := range recs {
				if r.Decision == carmy.AuditToolChanged {
					changed[r.Tool] = true
				}
			}
			return changed["fs_write"] && changed["fs_post"]
		})
	})
}

func TestMountBuildErrors(t *testing.T) {
	u := newUpstream()
	url := u.serveHTTP(t).URL
	type In struct{}
	own := carmy.Tool(func(In) error { return nil }, carmy.Read, carmy.Name("fs_read"), carmy.Register(false))
	for _, c := range []struct {
		name string
		b    *carmy.Builder
		want []string
	}{
		{"a name of an own tool", carmy.New().Tool(own).Mount("fs", carmy.Endpoint(url)), []string{"fs_read", "mount fs"}},
		{"two mounts, one prefix", carmy.New().Mount("fs", carmy.Endpoint(url)).Mount("fs", carmy.Endpoint(url)), []string{"fs_read", "mount fs"}},
		{"a prefix not [a-z0-9]+", carmy.New().Mount("F-S", carmy.Endpoint(url)), []string{"lower-case letters and digits"}},
		{"an empty prefix beside another mount", carmy.New().Mount("", carmy.Endpoint(url)).Mount("b", carmy.Endpoint(url)), []string{"single mount"}},
		{"an override of no tool", carmy.New().Mount("fs", carmy.Endpoint(url), carmy.MountTool("nope", carmy.ToolOverride{})), []string{`"nope"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.b.Build()
			if err == nil {
				t.Fatal("Build succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestMountOverridesAndFloor(t *testing.T) {
	u := newUpstream()
	url := u.serveHTTP(t).URL
	no := false
	reg := build(t, carmy.New().Mount("", carmy.Endpoint(url), carmy.EffectFloor(carmy.Write), carmy.MountDeferred(),
		carmy.MountTool("delete", carmy.ToolOverride{Confirm: &no, Requires: []string{"files"}, Description: "Deletes, carefully", Deferred: &no}),
		carmy.MountTool("post", carmy.ToolOverride{Effect: carmy.Destructive})))
	for _, c := range []struct {
		name     string
		effect   carmy.Effect
		confirm  carmy.Confirmation
		requires []string
		deferred bool
	}{
		{"read", carmy.Write, carmy.ConfirmationNone, nil, true},
		{"delete", carmy.Destructive, carmy.ConfirmationNone, []string{"files"}, false},
		{"post", carmy.Destructive, carmy.ConfirmationRequired, nil, true},
	} {
		m, ok := reg.Lookup(c.name)
		if !ok || m.Effect != c.effect || m.Confirmation != c.confirm || strings.Join(m.Requires, ",") != strings.Join(c.requires, ",") || m.Deferred != c.deferred {
			t.Errorf("%s: %+v, want effect %s, confirmation %s, requires %v, deferred %v", c.name, m, c.effect, c.confirm, c.requires, c.deferred)
		}
	}
	if m, _ := reg.Lookup("delete"); m.Description != "Deletes, carefully" {
		t.Errorf("description %q", m.Description)
	}
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: "delete", Input: json.RawMessage(`{"path":"x"}`)})
	if carmy.CodeOf(err) != carmy.CodePermissionDenied {
		t.Errorf("err = %v, want permission_denied from the override's requires", err)
	}
}

// TestMountStdio mounts this test binary, run as a stdio MCP server.
func TestMountStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	reg := build(t, carmy.New().Mount("kid", carmy.Command(exe, "-test.run=^$"), carmy.MountEnv(stdioUpstreamEnv, "1")))
	out, err := reg.Execute(context.Background(), carmy.Call{Tool: "kid_read", Input: json.RawMessage(`{"path":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Output), `contents of {\"path\":\"x\"}`) {
		t.Errorf("output %s", out.Output)
	}
}

// stdioUpstreamEnv makes the test binary a stdio upstream (see TestMain).
const stdioUpstreamEnv = "CARMY_TEST_STDIO_UPSTREAM"

// runStdioUpstream serves the test upstream on stdin and stdout, when the
// test binary was started as one; it reports whether it was.
func runStdioUpstream() bool {
	if os.Getenv(stdioUpstreamEnv) == "" {
		return false
	}
	_ = newUpstream().server.Run(context.Background(), &mcp.StdioTransport{})
	return true
}

func TestMountFromCarmyToml(t *testing.T) {
	u := newUpstream()
	url := u.serveHTTP(t).URL
	t.Setenv("UPSTREAM_TOKEN", "t0k")
	path := t.TempDir() + "/carmy.toml"
	src := `
[[mount]]
prefix = "up"
url = "` + url + `"
headers = { Authorization = "Bearer ${UPSTREAM_TOKEN}" }
effect_floor = "write"
requires = ["mounted"]

[mount.tools.delete]
confirm = false
requires = ["files"]
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARMY_CONFIG", path)
	reg := build(t, carmy.App())
	if m, ok := reg.Lookup("up_read"); !ok || m.Effect != carmy.Write {
		t.Errorf("up_read: %+v, want effect write (the floor)", m)
	}
	m, _ := reg.Lookup("up_delete")
	if m.Confirmation != carmy.ConfirmationNone || strings.Join(m.Requires, ",") != "files,mounted" {
		t.Errorf("up_delete: %+v, want the override's confirmation none and requires files and the mount's mounted", m)
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "up_delete", Permissions: []string{"files", "mounted"}, Input: json.RawMessage(`{"path":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := u.auth.Load(); got != "Bearer t0k" {
		t.Errorf("the upstream got Authorization %q, want the mount's header with ${UPSTREAM_TOKEN} expanded", got)
	}
}

// TestMountForwardsProgressAndQuestions calls, through carmy's MCP door, an
// upstream tool that reports progress and asks its user a question: both
// reach carmy's client, the question labelled with the mount.
func TestMountForwardsProgressAndQuestions(t *testing.T) {
	u := newUpstream()
	u.server.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half"})
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + res.Content["name"].(string)}}}, nil
		})
	reg := mountBuild(t, u.serveHTTP(t).URL)
	srv := serve(t, reg)
	var asked atomic.Value
	progress := make(chan string, 4)
	cs := mcpConnect(t, srv.URL, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Store(req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params.Message
		},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_ask", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "accept Ada" {
		t.Fatalf("result %+v (%s), want the upstream's answer to the person's form", res, text)
	}
	if got := asked.Load(); got != "Server fs asks: Your name?" {
		t.Errorf("the person was asked %q, want the question labelled with the mount", got)
	}
	select {
	case msg := <-progress:
		if msg != "half" {
			t.Errorf("progress %q", msg)
		}
	case <-time.After(5 * time.Second):
		t.Error("no progress reached carmy's client")
	}
}

// BenchmarkMountStdio measures a mounted call against the same call made
// directly with the official SDK's client, both to this test binary run as
// a stdio upstream: the difference is what carmy adds (validation against
// the upstream's schema, the canonical form, the pipeline, the wire taps).
func BenchmarkMountStdio(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), stdioUpstreamEnv+"=1")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &mcp.CallToolParams{Name: "read", Arguments: json.RawMessage(`{"path":"x"}`)}
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mounted", func(b *testing.B) {
		reg, err := carmy.New().Mount("kid", carmy.Command(exe, "-test.run=^$"), carmy.MountEnv(stdioUpstreamEnv, "1")).Build()
		if err != nil {
			b.Fatal(err)
		}
		defer reg.Close()
		call := carmy.Call{Tool: "kid_read", Input: json.RawMessage(`{"path":"x"}`)}
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if _, err := reg.Execute(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportCPU reports the CPU time this process spent per op, where the
// system says (mount_cpu_test.go); elsewhere nothing.
var reportCPU = func(*testing.B) func() { return func() {} }

// TestMountForwardsURLElicitation: an upstream may send the caller's person
// to a page only where the mount says so.
func TestMountForwardsURLElicitation(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []carmy.MountOption
		want string
	}{
		{"configured", []carmy.MountOption{carmy.MountURLElicitation()}, "accept"},
		// carmy does not declare URL elicitation: the upstream's own SDK
		// refuses to ask.
		{"not configured", nil, `does not support \"url\" elicitation`},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream()
			u.server.AddTool(&mcp.Tool{Name: "link", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/login", ElicitationID: "e1"})
					if err != nil {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil
				})
			reg := mountBuild(t, u.serveHTTP(t).URL, c.opts...)
			var sent atomic.Value
			cs := mcpConnect(t, serve(t, reg).URL, "2025-11-25", &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					sent.Store(req.Params.Message + " " + req.Params.URL)
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_link", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, c.want) {
				t.Errorf("the upstream got %q, want %q", got, c.want)
			}
			want := any(nil)
			if c.opts != nil {
				want = "Server fs asks: Sign in https://example.com/login"
			}
			if got := sent.Load(); got != want {
				t.Errorf("the person was sent %v, want %v", got, want)
			}
		})
	}
}
