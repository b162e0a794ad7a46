package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// Boundary is the input of the boundary tests' tool.
type Boundary struct {
	Name  string         `json:"name"`
	Count int32          `json:"count,omitempty"`
	Tags  []string       `json:"tags,omitempty"`
	Inner *HostileInner  `json:"inner,omitempty"`
	Meta  map[string]int `json:"meta,omitempty"`
	Arr   [2]uint8       `json:"arr,omitempty"`
}

const maxAnswer = 64 << 10

// boundaryTools: who answers the principal, take validates a Boundary,
// loud fails with an error as large as a tool can make one, nap takes
// 300ms.
func boundaryTools() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(ctx carmy.Context) (string, error) { return ctx.Principal, nil }, carmy.Read,
			carmy.Name("who"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(Boundary) error { return nil }, carmy.Write, carmy.Name("take"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() error { return loudError() }, carmy.Read, carmy.Name("loud"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) error {
			select {
			case <-time.After(300 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, carmy.Read, carmy.Name("nap"), carmy.ParallelSafe(), carmy.Register(false)),
	}
}

// loudError is a tool's error of several megabytes, made of the characters
// that JSON encoders escape the most.
func loudError() *carmy.Error {
	e := &carmy.Error{Code: carmy.CodeInvalidInput, Message: strings.Repeat("<", 100_000),
		Details: map[string]any{"blob": strings.Repeat("&", 200_000)}}
	for i := range 1000 {
		e.Fields = append(e.Fields, carmy.FieldError{Path: fmt.Sprintf("%d%s", i, strings.Repeat(`"`, 1000)), Message: strings.Repeat(`\`, 1000)})
	}
	return e
}

// logBuffer collects log records as text, safe for concurrent handlers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// boundaryServer serves the boundary tools on a loopback listener.
func boundaryServer(t *testing.T, b *carmy.Builder) (*httptest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	reg, err := b.Logger(logs.logger()).Tool(boundaryTools()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = reg.Close()
	})
	return srv, logs
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// boundaryRequest is a request as a client shapes it.
type boundaryRequest struct {
	method, path, body string
	host               string   // the Host header, when not the server's address
	header             []string // pairs; a header given twice is sent twice, one given "" is not sent
}

type boundaryAnswer struct {
	status int
	header http.Header
	raw    []byte
	err    *carmy.Error
}

// send sends a request with the headers its route needs (Content-Type for
// POST, MCP's Accept), then the test's own.
func send(t *testing.T, srv *httptest.Server, r boundaryRequest) boundaryAnswer {
	t.Helper()
	body := r.body
	if r.path == "/mcp" && r.method == http.MethodPost && body == "" {
		body = mcpInitialize
	}
	req, err := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.path == "/mcp" {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	given := map[string]bool{}
	for i := 0; i+1 < len(r.header); i += 2 {
		k, v := r.header[i], r.header[i+1]
		if !given[k] {
			req.Header.Del(k)
		}
		given[k] = true
		if v != "" {
			req.Header.Add(k, v)
		}
	}
	if r.host != "" {
		req.Host = r.host
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if id := res.Header.Get("Mcp-Session-Id"); id != "" {
		endSession(t, srv, req, id)
	}
	a := boundaryAnswer{status: res.StatusCode, header: res.Header, raw: raw}
	var wire struct {
		Error *carmy.Error `json:"error"`
	}
	if json.Unmarshal(raw, &wire) == nil {
		a.err = wire.Error
	}
	return a
}

// endSession ends the MCP session that req opened, with its headers.
func endSession(t *testing.T, srv *httptest.Server, req *http.Request, id string) {
	t.Helper()
	end := req.Clone(context.Background())
	end.Method, end.Body, end.ContentLength = http.MethodDelete, nil, 0
	end.Header.Set("Mcp-Session-Id", id)
	res, err := srv.Client().Do(end)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		t.Fatalf("ending the MCP session: %s", res.Status)
	}
}

// membersBody is an input of n members that take does not know, each
// named with characters JSON escapes.
func membersBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"name":"x"`)
	for i := range n {
		fmt.Fprintf(&b, `,"\"<&%d>":1`, i)
	}
	b.WriteString("}")
	return b.String()
}

// capped checks the limits of an invalid_input answer.
func capped(t *testing.T, a boundaryAnswer) {
	t.Helper()
	if len(a.raw) > maxAnswer {
		t.Fatalf("a %d-byte answer; the limit is %d", len(a.raw), maxAnswer)
	}
	if a.err == nil || len(a.err.Fields) != 21 {
		t.Fatalf("want 20 field errors and a count of the rest; got %+v", a.err)
	}
	last := a.err.Fields[20]
	if last.Path != "" || !strings.HasPrefix(last.Message, "and ") || !strings.Contains(last.Message, " more problems") {
		t.Fatalf("the last entry %+v does not count the rest", last)
	}
}

// noLeak checks that an answer names no Go type, file or stack.
func noLeak(t *testing.T, a boundaryAnswer) {
	t.Helper()
	for _, leak := range []string{"carmy_test", "Boundary", "HostileInner", "int32", "uint8", "map[", "[]string", "struct", ".go", "goroutine", "reflect", "Go value", "json:"} {
		if bytes.Contains(a.raw, []byte(leak)) {
			t.Fatalf("the answer names %q: %s", leak, a.raw)
		}
	}
	if a.err == nil || a.err.Message == "" {
		t.Fatalf("no error object in %s", a.raw)
	}
}

// TestHostileHTTP sends what a web page, another principal or a careless
// client can send to every route, and checks the answer. Every row fails
// if the protection it names is removed.
func TestHostileHTTP(t *testing.T) {
	tokens := carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken(bobToken), Principal: "bob"},
	)
	carol := carmy.AuthenticatorFunc(func(*http.Request) (carmy.Identity, error) { return carmy.Identity{Principal: "carol"}, nil })
	servers := map[string]*carmy.Builder{
		"open":   carmy.New(),
		"tokens": carmy.New().Authenticate(tokens),
		"custom": carmy.New().Authenticate(carol),
		"allow":  carmy.New().AllowHosts("tools.example.com", "api.example.com:8443").AllowOrigins("https://app.example"),
		"small":  carmy.New().BodyLimit(1024),
	}
	srvs := map[string]*httptest.Server{}
	for name, b := range servers {
		srvs[name], _ = boundaryServer(t, b)
	}
	alice := []string{"Authorization", "Bearer " + aliceToken}
	crossSite := []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}
	fromApp := []string{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"}
	get := func(path string, header ...string) boundaryRequest {
		return boundaryRequest{method: http.MethodGet, path: path, header: header}
	}
	post := func(path, body string, header ...string) boundaryRequest {
		return boundaryRequest{method: http.MethodPost, path: path, body: body, header: header}
	}
	at := func(host string, r boundaryRequest) boundaryRequest { r.host = host; return r }
	del := func(path string, header ...string) boundaryRequest {
		return boundaryRequest{method: http.MethodDelete, path: path, header: header}
	}
	hostile := func(body string) boundaryRequest { return post("/tools/take", body) }

	tests := []struct {
		name   string
		server string
		req    boundaryRequest
		status int
		code   carmy.Code
		check  func(*testing.T, boundaryAnswer)
	}{
		// DNS rebinding: a page whose domain now resolves to 127.0.0.1.
		{"rebinding: GET /tools", "open", at("evil.example", get("/tools")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: POST /tools/{name}", "open", at("evil.example:3000", post("/tools/who", "")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: POST /mcp", "open", at("evil.example", post("/mcp", "")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: GET /mcp", "open", at("evil.example", get("/mcp")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: DELETE /mcp", "open", at("evil.example", del("/mcp")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: an unknown path", "open", at("evil.example", get("/nope")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: a subdomain of localhost's name", "open", at("localhost.evil.example", get("/tools")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: another loopback address by name", "open", at("127.0.0.2:3000", get("/tools")), 403, carmy.CodePermissionDenied, nil},
		{"rebinding: /healthz answers", "open", at("evil.example", get("/healthz")), 200, "", nil},
		{"host localhost, any port", "open", at("localhost:1234", get("/tools")), 200, "", nil},
		{"host LOCALHOST", "open", at("LOCALHOST", get("/tools")), 200, "", nil},
		{"host 127.0.0.1 without a port", "open", at("127.0.0.1", get("/tools")), 200, "", nil},
		{"host [::1]", "open", at("[::1]:80", post("/tools/who", "")), 200, "", nil},
		{"allowed host, any port", "allow", at("tools.example.com:8443", post("/tools/who", "")), 200, "", nil},
		{"allowed host on /mcp", "allow", at("tools.example.com", post("/mcp", "")), 200, "", nil},
		{"allowed host and port", "allow", at("api.example.com:8443", get("/tools")), 200, "", nil},
		{"allowed host on another port", "allow", at("api.example.com:9000", get("/tools")), 403, carmy.CodePermissionDenied, nil},

		// Cross-origin requests from browsers.
		{"cross-site POST /tools/{name}", "open", post("/tools/who", "", crossSite...), 403, carmy.CodePermissionDenied, nil},
		{"Sec-Fetch-Site cross-site alone", "open", post("/tools/who", "", "Sec-Fetch-Site", "cross-site"), 403, carmy.CodePermissionDenied, nil},
		{"same-site page on another local port", "open", post("/tools/who", "", "Origin", "http://localhost:5173", "Sec-Fetch-Site", "same-site"), 403, carmy.CodePermissionDenied, nil},
		{"foreign Origin from a browser without Sec-Fetch-Site", "open", post("/tools/who", "", "Origin", "https://evil.example"), 403, carmy.CodePermissionDenied, nil},
		{"Origin null (a sandboxed frame)", "open", post("/tools/who", "", "Origin", "null"), 403, carmy.CodePermissionDenied, nil},
		{"cross-site GET /tools", "open", get("/tools", crossSite...), 403, carmy.CodePermissionDenied, nil},
		{"cross-site HEAD /tools", "open", boundaryRequest{method: http.MethodHead, path: "/tools", header: crossSite}, 403, "", nil},
		{"cross-site GET /healthz", "open", get("/healthz", crossSite...), 403, carmy.CodePermissionDenied, nil},
		{"cross-site POST /mcp", "open", post("/mcp", "", crossSite...), 403, carmy.CodePermissionDenied, nil},
		{"cross-site GET /mcp, old browser", "open", get("/mcp", "Origin", "https://evil.example"), 403, carmy.CodePermissionDenied, nil},
		{"cross-site DELETE /mcp", "open", del("/mcp", crossSite...), 403, carmy.CodePermissionDenied, nil},
		{"a typed URL (Sec-Fetch-Site none)", "open", get("/tools", "Sec-Fetch-Site", "none"), 200, "", nil},
		{"allowed origin calls", "allow", post("/tools/who", "", fromApp...), 200, "", nil},
		{"allowed origin lists", "allow", get("/tools", fromApp...), 200, "", nil},
		{"allowed origin opens MCP", "allow", post("/mcp", "", fromApp...), 200, "", nil},
		{"an origin like the allowed one", "allow", post("/tools/who", "", "Origin", "https://app.example.evil", "Sec-Fetch-Site", "cross-site"), 403, carmy.CodePermissionDenied, nil},

		// Calls are JSON, which a page cannot send cross-origin unasked.
		{"call without Content-Type, empty body", "open", post("/tools/who", "", "Content-Type", ""), 415, carmy.CodeInvalidInput, nil},
		{"call as text/plain", "open", post("/tools/who", "{}", "Content-Type", "text/plain"), 415, carmy.CodeInvalidInput, nil},
		{"call as a form", "open", post("/tools/who", "a=b", "Content-Type", "application/x-www-form-urlencoded"), 415, carmy.CodeInvalidInput, nil},
		{"call as multipart", "open", post("/tools/who", "", "Content-Type", "multipart/form-data; boundary=x"), 415, carmy.CodeInvalidInput, nil},
		{"call as application/jsonx", "open", post("/tools/who", "{}", "Content-Type", "application/jsonx"), 415, carmy.CodeInvalidInput, nil},
		{"call with a charset", "open", post("/tools/who", "{}", "Content-Type", "application/json; charset=utf-8"), 200, "", nil},
		{"call as Application/JSON", "open", post("/tools/who", "", "Content-Type", "Application/JSON"), 200, "", nil},

		// Identity: one Authorization header, checked before anything else.
		{"two tokens, both valid", "tokens", post("/tools/who", "", "Authorization", "Bearer "+aliceToken, "Authorization", "Bearer "+bobToken), 401, carmy.CodeUnauthenticated, nil},
		{"a valid token after a bad one", "tokens", post("/tools/who", "", "Authorization", "Bearer nope", "Authorization", "Bearer "+aliceToken), 401, carmy.CodeUnauthenticated, nil},
		{"two tokens on GET /tools", "tokens", get("/tools", "Authorization", "Bearer "+aliceToken, "Authorization", "Bearer "+aliceToken), 401, carmy.CodeUnauthenticated, nil},
		{"two tokens on /mcp", "tokens", post("/mcp", "", "Authorization", "Bearer "+aliceToken, "Authorization", "Bearer "+bobToken), 401, carmy.CodeUnauthenticated, nil},
		{"two headers, custom authenticator", "custom", post("/tools/who", "", "Authorization", "a", "Authorization", "b"), 401, carmy.CodeUnauthenticated, nil},
		{"one token", "tokens", post("/tools/who", "", alice...), 200, "", nil},
		{"no token, wrong content type: 401 first", "tokens", post("/tools/who", "", "Content-Type", "text/plain"), 401, carmy.CodeUnauthenticated, nil},

		// Sizes.
		{"a megabyte of unknown members", "open", hostile(membersBody(40_000)), 400, carmy.CodeInvalidInput, capped},
		{"21 problems: 20 and one more", "open", hostile(membersBody(21)), 400, carmy.CodeInvalidInput, func(t *testing.T, a boundaryAnswer) {
			capped(t, a)
			if m := a.err.Fields[20].Message; !strings.HasPrefix(m, "and 1 more") {
				t.Fatalf("last entry %q", m)
			}
		}},
		{"20 problems are listed", "open", hostile(membersBody(20)), 400, carmy.CodeInvalidInput, func(t *testing.T, a boundaryAnswer) {
			if len(a.err.Fields) != 20 {
				t.Fatalf("%d fields", len(a.err.Fields))
			}
		}},
		{"a tool's megabytes of error", "open", post("/tools/loud", ""), 400, carmy.CodeInvalidInput, func(t *testing.T, a boundaryAnswer) {
			if len(a.raw) > maxAnswer || len(a.err.Fields) > 21 || a.err.Message == "" {
				t.Fatalf("a %d-byte answer with %d fields", len(a.raw), len(a.err.Fields))
			}
		}},
		{"body limit on /mcp", "small", post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("a", 2048)+`"}}`), 413, "", nil},
		{"body limit on /tools/{name}", "small", hostile(`{"name":"` + strings.Repeat("a", 2048) + `"}`), 413, carmy.CodeInvalidInput, nil},

		// Answers name no Go types.
		{"object for a string", "open", hostile(`{"name":{"a":1}}`), 400, carmy.CodeInvalidInput, noLeak},
		{"string for an integer", "open", hostile(`{"name":"x","count":"7"}`), 400, carmy.CodeInvalidInput, noLeak},
		{"overflow of an int32", "open", hostile(`{"name":"x","count":1e999}`), 400, carmy.CodeInvalidInput, noLeak},
		{"overflow of a uint8 in an array", "open", hostile(`{"name":"x","arr":[1,300]}`), 400, carmy.CodeInvalidInput, noLeak},
		{"object for a list", "open", hostile(`{"name":"x","tags":{"a":1}}`), 400, carmy.CodeInvalidInput, noLeak},
		{"list for a struct", "open", hostile(`{"name":"x","inner":[1]}`), 400, carmy.CodeInvalidInput, noLeak},
		{"string in a map of ints", "open", hostile(`{"name":"x","meta":{"a":"b"}}`), 400, carmy.CodeInvalidInput, noLeak},
		{"an array input", "open", hostile(`[1,2]`), 400, carmy.CodeInvalidInput, noLeak},
		{"truncated JSON", "open", hostile(`{"name":"x"`), 400, carmy.CodeInvalidInput, noLeak},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := send(t, srvs[tt.server], tt.req)
			if a.status != tt.status {
				t.Fatalf("status %d; want %d (%.300s)", a.status, tt.status, a.raw)
			}
			if tt.code != "" && (a.err == nil || a.err.Code != tt.code) {
				t.Fatalf("answer %.300s; want code %s", a.raw, tt.code)
			}
			if tt.status == 200 && tt.req.path == "/tools/who" && !bytes.Contains(a.raw, []byte(`"execution_id"`)) {
				t.Fatalf("the call did not run: %.300s", a.raw)
			}
			if tt.check != nil {
				tt.check(t, a)
			}
		})
	}
}
