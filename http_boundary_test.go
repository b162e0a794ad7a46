package carmy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
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

// boundaryServer serves the boundary tools on a loopback listener.
func boundaryServer(t *testing.T, b *carmy.Builder) (*httptest.Server, *logSink) {
	t.Helper()
	logs := &logSink{}
	reg := build(t, b.Logger(logs.logger()).Tool(boundaryTools()...))
	srv := serve(t, reg)
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
	t.Parallel()
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
		"large":  carmy.New().BodyLimit(8 << 20),
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
		{"allowed origin's preflight", "allow", boundaryRequest{method: http.MethodOptions, path: "/tools/who", header: append([]string{"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,idempotency-key"}, fromApp...)}, 204, "", func(t *testing.T, a boundaryAnswer) {
			if a.header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Content-Type") || !strings.Contains(a.header.Get("Access-Control-Allow-Methods"), "POST") {
				t.Fatalf("preflight answer headers %v", a.header)
			}
		}},
		{"allowed origin reads the answer", "allow", post("/tools/who", "", fromApp...), 200, "", func(t *testing.T, a boundaryAnswer) {
			if a.header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(a.header.Get("Access-Control-Expose-Headers"), "X-Carmy-Execution-Id") {
				t.Fatalf("answer headers %v", a.header)
			}
		}},
		{"cross-site preflight", "allow", boundaryRequest{method: http.MethodOptions, path: "/tools/who", header: append([]string{"Access-Control-Request-Method", "POST"}, crossSite...)}, 403, carmy.CodePermissionDenied, nil},
		{"same-origin answers carry no CORS headers", "allow", post("/tools/who", "", "Sec-Fetch-Site", "same-origin"), 200, "", func(t *testing.T, a boundaryAnswer) {
			if v := a.header.Get("Access-Control-Allow-Origin"); v != "" {
				t.Fatalf("Access-Control-Allow-Origin %q", v)
			}
		}},
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
		{"a body limit above MCP's own default", "large", post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("a", 5<<20)+`"}}`), 200, "", nil},
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

// openSession initializes an MCP session without browser headers and
// returns its id; the test ends it.
func openSession(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(mcpInitialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	id := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", res.Status, id)
	}
	t.Cleanup(func() {
		end, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
		end.Header.Set("Mcp-Session-Id", id)
		if res, err := srv.Client().Do(end); err == nil {
			res.Body.Close()
		}
	})
	return id
}

// TestBrowserOrigins sends every route requests shaped as a browser sends
// them, with no preflight: a page of another site is refused everywhere,
// the server's own page and an allowed origin are served.
func TestBrowserOrigins(t *testing.T) {
	t.Parallel()
	srv, _ := boundaryServer(t, carmy.New().AllowOrigins("https://app.example"))
	browsers := []struct {
		name    string
		header  []string
		refused bool
	}{
		{"cross-site page", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, true},
		{"cross-site page, no Origin (a navigation or no-cors GET)", []string{"Sec-Fetch-Site", "cross-site"}, true},
		{"same-site page on another port", []string{"Origin", "http://localhost:8080", "Sec-Fetch-Site", "same-site"}, true},
		{"the server's own page", []string{"Origin", srv.URL, "Sec-Fetch-Site", "same-origin"}, false},
		{"an allowed origin", []string{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"}, false},
	}
	routes := []struct {
		name    string
		method  string
		path    string
		body    string
		session bool // the request names an open MCP session
	}{
		{"GET /tools", http.MethodGet, "/tools", "", false},
		{"POST /tools/{name}", http.MethodPost, "/tools/who", "{}", false},
		{"POST /mcp", http.MethodPost, "/mcp", mcpInitialize, false},
		{"GET /mcp", http.MethodGet, "/mcp", "", true},
		{"DELETE /mcp", http.MethodDelete, "/mcp", "", true},
		{"GET /healthz", http.MethodGet, "/healthz", "", false},
	}
	for _, b := range browsers {
		for _, r := range routes {
			t.Run(b.name+"/"+r.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, r.method, srv.URL+r.path, strings.NewReader(r.body))
				req.Header.Set("Sec-Fetch-Mode", "cors")
				req.Header.Set("Sec-Fetch-Dest", "empty")
				if r.method == http.MethodPost {
					req.Header.Set("Content-Type", "application/json")
				}
				if r.path == "/mcp" {
					req.Header.Set("Accept", "application/json, text/event-stream")
				}
				if r.session {
					req.Header.Set("Mcp-Session-Id", openSession(t, srv))
					req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				}
				for i := 0; i < len(b.header); i += 2 {
					req.Header.Set(b.header[i], b.header[i+1])
				}
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				if id := res.Header.Get("Mcp-Session-Id"); id != "" && !r.session {
					endSession(t, srv, req, id)
				}
				switch {
				case b.refused && res.StatusCode != http.StatusForbidden:
					t.Fatalf("status %s; want 403", res.Status)
				case !b.refused && res.StatusCode >= 300:
					t.Fatalf("status %s; want success", res.Status)
				}
			})
		}
	}
}

// TestDNSRebinding checks the Host of requests by the address they
// arrived on: on a real loopback listener every route but /healthz
// refuses a foreign Host; on another address, the Host is not checked;
// with no address known, it is checked.
func TestDNSRebinding(t *testing.T) {
	t.Parallel()
	srv, _ := boundaryServer(t, carmy.New())
	for _, r := range []boundaryRequest{
		{method: http.MethodGet, path: "/tools"},
		{method: http.MethodPost, path: "/tools/who"},
		{method: http.MethodPost, path: "/mcp"},
		{method: http.MethodGet, path: "/mcp"},
		{method: http.MethodDelete, path: "/mcp"},
		{method: http.MethodGet, path: "/healthz"},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			r.host = "attacker.example:" + srv.Listener.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
			a := send(t, srv, r)
			if want := map[bool]int{true: 200, false: 403}[r.path == "/healthz"]; a.status != want {
				t.Fatalf("status %d; want %d (%s)", a.status, want, a.raw)
			}
		})
	}

	reg, err := carmy.New().Logger(quietLogger()).Tool(boundaryTools()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, tt := range []struct {
		name   string
		local  net.Addr
		remote string // "" for httptest's own
		want   int
	}{
		{"no local address, from loopback", nil, "127.0.0.1:50000", 403},
		{"no local address, from IPv6 loopback", nil, "[::1]:50000", 403},
		{"no local address, an unparsable remote", nil, "somewhere", 403},
		{"no local address, from elsewhere (a handler called in a test)", nil, "", 200},
		{"IPv4 loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}, "", 403},
		{"IPv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 3000}, "", 403},
		{"a Unix socket", &net.UnixAddr{Name: "/run/carmy.sock", Net: "unix"}, "", 403},
		// A server without authentication checks the Host of every request,
		// wherever it arrived: a container published on the host's
		// 127.0.0.1 gets its requests on its own address.
		{"a public address", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 3000}, "", 403},
		{"a container's address", &net.TCPAddr{IP: net.IPv4(172, 17, 0, 2), Port: 3000}, "", 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://attacker.example/tools", nil)
			if tt.remote != "" {
				req.RemoteAddr = tt.remote
			}
			if tt.local != nil {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tt.local))
			}
			w := httptest.NewRecorder()
			reg.Handler().ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("status %d; want %d", w.Code, tt.want)
			}
		})
	}
}

// TestHostCheckedWherever: a server without authentication checks Host on
// every request, wherever it arrived, and only AllowHosts widens the list;
// a server with an authenticator, whose callers a rebound page cannot
// borrow, checks requests that arrived on a loopback address.
func TestHostCheckedWherever(t *testing.T) {
	t.Parallel()
	container := &net.TCPAddr{IP: net.IPv4(172, 17, 0, 2), Port: 3000}
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("t"), Principal: "p"})
	for _, tt := range []struct {
		name string
		b    *carmy.Builder
		host string
		want int
	}{
		{"unauthenticated, a rebound name", carmy.New(), "attacker.example:3000", 403},
		{"unauthenticated, localhost", carmy.New(), "localhost:3000", 200},
		{"unauthenticated, an allowed host", carmy.New().AllowHosts("tools.internal"), "tools.internal:3000", 200},
		{"unauthenticated, another host than the allowed one", carmy.New().AllowHosts("tools.internal"), "attacker.example", 403},
		{"authenticated, any name off loopback", carmy.New().Authenticate(tokens), "tools.example.com", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := tt.b.Logger(quietLogger()).Tool(boundaryTools()...).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			req := httptest.NewRequest(http.MethodGet, "http://"+tt.host+"/tools", nil)
			req.Header.Set("Authorization", "Bearer t")
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, container))
			w := httptest.NewRecorder()
			reg.Handler().ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Fatalf("status %d; want %d (%s)", w.Code, tt.want, w.Body)
			}
		})
	}
}

// rawExchange writes a request by hand on a new connection and returns
// the response, or an error when none came within wait.
func rawExchange(t *testing.T, srv *httptest.Server, head, body string, wait time.Duration) (*http.Response, time.Duration, error) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	start := time.Now()
	_ = conn.SetDeadline(start.Add(wait))
	if _, err := io.WriteString(conn, head+body); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	return res, time.Since(start), err
}

// TestSlowBody: a client that sends its body slowly, or not at all, gets
// its answer at once when it was not entitled to send it, and gets cut off
// after the body's deadline otherwise; a call that outlives the body's
// deadline is not cut off.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	const deadline = 200 * time.Millisecond
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"})
	srv, _ := boundaryServer(t, carmy.SetBodyReadTimeout(carmy.New(), deadline).Authenticate(tokens))
	headAt := func(host, path, token string, length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", path, host, token, length)
	}
	head := func(path, token string, length int) string { return headAt("127.0.0.1", path, token, length) }
	for _, path := range []string{"/tools/who", "/mcp"} {
		for _, tt := range []struct {
			name   string
			head   string
			status int
		}{
			{"bad token", head(path, "nope", 100_000), http.StatusUnauthorized},
			{"foreign host", headAt("evil.example", path, aliceToken, 100_000), http.StatusForbidden},
		} {
			t.Run(tt.name+", body never sent: refused at once "+path, func(t *testing.T) {
				res, took, err := rawExchange(t, srv, tt.head, "{", 2*time.Second)
				if err != nil {
					t.Fatalf("no answer after %v: %v", took, err)
				}
				if res.StatusCode != tt.status || !res.Close || took > deadline {
					t.Fatalf("%s after %v, close %v; want %d at once, closing the connection", res.Status, took, res.Close, tt.status)
				}
			})
		}
		t.Run("body trickled: cut off at the deadline "+path, func(t *testing.T) {
			res, took, err := rawExchange(t, srv, head(path, aliceToken, 100), "{", 3*time.Second)
			if took > 2*time.Second {
				t.Fatalf("the server waited %v for the body (%v)", took, err)
			}
			if err == nil && res.StatusCode < 400 {
				t.Fatalf("%s after %v", res.Status, took)
			}
			if took < deadline-10*time.Millisecond {
				t.Fatalf("cut off after %v, before the deadline of %v", took, deadline)
			}
		})
	}
	t.Run("a call outlives the body's deadline", func(t *testing.T) {
		res, took, err := rawExchange(t, srv, head("/tools/nap", aliceToken, 2), "{}", 3*time.Second)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%v %v after %v; want 200 after the 300ms nap", res, err, took)
		}
	})
}

// TestBoundaryLogs: refusals at the boundary are logged at warn level with
// the code, the tool and the remote address, never with a token or an
// input; a client's protocol mistakes are not errors.
func TestBoundaryLogs(t *testing.T) {
	t.Parallel()
	const secret, input = "s3cret-guess", "INPUT-MARKER"
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"})
	srv, logs := boundaryServer(t, carmy.New().Authenticate(tokens))
	alice := []string{"Authorization", "Bearer " + aliceToken}
	for _, tt := range []struct {
		name      string
		req       boundaryRequest
		code      carmy.Code
		principal string // "" until the caller is known
	}{
		{"bad token", boundaryRequest{method: http.MethodPost, path: "/tools/who", body: `{"x":"` + input + `"}`, header: []string{"Authorization", "Bearer " + secret}}, carmy.CodeUnauthenticated, ""},
		{"two tokens", boundaryRequest{method: http.MethodPost, path: "/tools/who", header: []string{"Authorization", "Bearer " + secret, "Authorization", "Bearer " + aliceToken}}, carmy.CodeUnauthenticated, ""},
		{"bad token on /mcp", boundaryRequest{method: http.MethodPost, path: "/mcp", header: []string{"Authorization", "Bearer " + secret}}, carmy.CodeUnauthenticated, ""},
		{"foreign host", boundaryRequest{method: http.MethodPost, path: "/tools/who", host: "evil.example", header: alice}, carmy.CodePermissionDenied, ""},
		{"cross-site", boundaryRequest{method: http.MethodPost, path: "/tools/who", header: append([]string{"Sec-Fetch-Site", "cross-site"}, alice...)}, carmy.CodePermissionDenied, ""},
		{"content type", boundaryRequest{method: http.MethodPost, path: "/tools/who", body: input, header: append([]string{"Content-Type", "text/plain"}, alice...)}, carmy.CodeInvalidInput, "alice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(logs.String())
			if a := send(t, srv, tt.req); a.err == nil || a.err.Code != tt.code {
				t.Fatalf("answer %d %s; want %s", a.status, a.raw, tt.code)
			}
			logged := logs.String()[before:]
			principal := "principal=" + tt.principal
			if tt.principal == "" {
				principal = `principal=""`
			}
			for _, want := range []string{"level=WARN", "code=" + string(tt.code), "remote=127.0.0.1:", principal} {
				if !strings.Contains(logged, want) {
					t.Fatalf("the log %q lacks %q", logged, want)
				}
			}
			if strings.HasPrefix(tt.req.path, "/tools/") && !strings.Contains(logged, "tool=who") {
				t.Fatalf("the log %q does not name the tool", logged)
			}
			for _, leak := range []string{secret, aliceToken, input} {
				if strings.Contains(logged, leak) {
					t.Fatalf("the log %q holds %q", logged, leak)
				}
			}
		})
	}
	t.Run("protocol mistakes are not errors", func(t *testing.T) {
		before := len(logs.String())
		send(t, srv, boundaryRequest{method: http.MethodGet, path: "/nope", header: alice})
		send(t, srv, boundaryRequest{method: http.MethodGet, path: "/tools/who", header: alice})
		send(t, srv, boundaryRequest{method: http.MethodPost, path: "/tools/take", body: `{"name":`, header: alice})
		if logged := logs.String()[before:]; strings.Contains(logged, "level=ERROR") {
			t.Fatalf("logged as errors: %s", logged)
		}
	})
}

// TestBoundaryBuild: the builder's boundary settings are checked at Build,
// a bearer token given to two principals is a Build error, and a store
// URL's password never shows in an error.
func TestBoundaryBuild(t *testing.T) {
	t.Parallel()
	store.Register("carmytest-unreachable", func(url string) (store.IdempotencyStore, store.Locker, error) {
		return nil, nil, fmt.Errorf("cannot reach %s", url)
	})
	hash := carmy.HashToken(aliceToken)
	for _, tt := range []struct {
		name string
		b    *carmy.Builder
		want string // in the error; "" means Build succeeds
		hide string // never in the error
	}{
		{"host with a scheme", carmy.New().AllowHosts("http://tools.example.com"), "AllowHosts", ""},
		{"empty host", carmy.New().AllowHosts(""), "AllowHosts", ""},
		{"host with a path", carmy.New().AllowHosts("tools.example.com/x"), "AllowHosts", ""},
		{"host with a bad port", carmy.New().AllowHosts("tools.example.com:99999"), "AllowHosts", ""},
		{"hosts", carmy.New().AllowHosts("tools.example.com", "Tools.Example.com:8443", "[::1]:3000", "10.0.0.1"), "", ""},
		{"origin with a path", carmy.New().AllowOrigins("https://app.example/"), "AllowOrigins", ""},
		{"origin without a scheme", carmy.New().AllowOrigins("app.example"), "AllowOrigins", ""},
		{"origin in capitals", carmy.New().AllowOrigins("https://App.example"), "lower case", ""},
		{"origins", carmy.New().AllowOrigins("https://app.example", "http://localhost:5173"), "", ""},
		{"one token, two principals", carmy.New().Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: hash, Principal: "alice"}, carmy.Token{SHA256: strings.ToUpper(hash), Principal: "mallory"})), `"mallory"`, aliceToken},
		{"one token, two permission sets", carmy.New().Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: hash, Principal: "alice"}, carmy.Token{SHA256: hash, Principal: "alice", Permissions: []string{"admin"}})), "BearerTokens", ""},
		{"one token listed twice alike", carmy.New().Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: hash, Principal: "alice"}, carmy.Token{SHA256: hash, Principal: "alice"})), "", ""},
		{"store URL echoed by its opener", carmy.New().StoreURL("carmytest-unreachable://carmy:pa55word@db:6379/0"), "carmy:xxxxx@db", "pa55word"},
		{"store URL that does not parse", carmy.New().StoreURL("carmytest-unreachable://carmy:pa55word@db:port"), "carmy:xxxxx@db", "pa55word"},
		{"store URL without a scheme", carmy.New().StoreURL("carmy:pa55word@db:6379"), "no scheme", "pa55word"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := tt.b.Logger(quietLogger()).Build()
			if reg != nil {
				defer reg.Close()
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build: %v; want an error with %q", err, tt.want)
			}
			if tt.hide != "" && strings.Contains(err.Error(), tt.hide) {
				t.Fatalf("Build: %v shows %q", err, tt.hide)
			}
		})
	}
	t.Run("without a builder, an ambiguous token is refused", func(t *testing.T) {
		auth := carmy.BearerTokens(carmy.Token{SHA256: hash, Principal: "alice"}, carmy.Token{SHA256: hash, Principal: "mallory"})
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		if id, err := auth.Authenticate(req); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
			t.Fatalf("Authenticate = %+v, %v; want unauthenticated", id, err)
		}
	})
	t.Run("without a builder, two Authorization headers are refused", func(t *testing.T) {
		auth := carmy.BearerTokens(carmy.Token{SHA256: hash, Principal: "alice"})
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Add("Authorization", "Bearer "+aliceToken)
		req.Header.Add("Authorization", "Bearer "+aliceToken)
		if id, err := auth.Authenticate(req); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
			t.Fatalf("Authenticate = %+v, %v; want unauthenticated", id, err)
		}
	})
}

// largestBody records the largest answer to a POST a client received;
// the answers to GET are streams that last.
type largestBody struct {
	mu  sync.Mutex
	max int
}

func (l *largestBody) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return res, err
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	l.mu.Lock()
	l.max = max(l.max, len(raw))
	l.mu.Unlock()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	return res, err
}

// TestErrorAnswerLimits: the answers to inputs and tools built to make
// errors huge stay within 64 KiB over MCP as over HTTP, and Go callers get
// the same 20 field errors and a count of the rest.
func TestErrorAnswerLimits(t *testing.T) {
	t.Parallel()
	srv, _ := boundaryServer(t, carmy.New())
	measured := &largestBody{}
	session, err := mcpDial(t, &http.Client{Transport: measured}, srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]any
	if err := json.Unmarshal([]byte(membersBody(30_000)), &members); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool     string
		input    any
		problems int
	}{
		{"take", members, 30_000},
		{"loud", nil, 1000},
	} {
		t.Run("MCP "+tt.tool, func(t *testing.T) {
			measured.mu.Lock()
			measured.max = 0
			measured.mu.Unlock()
			res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.input})
			if err != nil {
				t.Fatal(err)
			}
			fields, _ := errorObject(t, res)["fields"].([]any)
			last, _ := fields[len(fields)-1].(map[string]any)
			var more int
			if _, err := fmt.Sscanf(last["message"].(string), "and %d more problems", &more); err != nil || len(fields) > 21 || len(fields)-1+more != tt.problems {
				t.Fatalf("%d field errors, the last %v; want at most 20 and a count of the rest", len(fields), last)
			}
			if measured.max > maxAnswer {
				t.Fatalf("a %d-byte MCP answer; the limit is %d", measured.max, maxAnswer)
			}
		})
	}
	t.Run("Execute", func(t *testing.T) {
		reg, err := carmy.New().Tool(boundaryTools()...).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		_, err = reg.Execute(context.Background(), carmy.Call{Tool: "take", Input: []byte(membersBody(500))})
		var e *carmy.Error
		if !errors.As(err, &e) || len(e.Fields) != 21 || e.Fields[20].Message != "and 480 more problems; fix these and call again to see them" {
			t.Fatalf("Execute: %v", err)
		}
		if !strings.Contains(e.Message, "500 problems") {
			t.Fatalf("the message %q does not count every problem", e.Message)
		}
	})
}
