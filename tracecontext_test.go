package carmy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTracestate  = "vendor=opaque"
)

// traceServer serves a registry whose middleware keeps the metadata of
// every call, with an authenticator that gives every caller the same
// metadata map, as a host may.
func traceServer(t *testing.T) (*httptest.Server, func() map[string]string, map[string]string) {
	t.Helper()
	var (
		mu   sync.Mutex
		last map[string]string
	)
	hostMD := map[string]string{"tenant": "acme"}
	keep := func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			mu.Lock()
			last = req.Call.Metadata
			mu.Unlock()
			return next(ctx, req)
		}
	}
	ping := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("ping"), carmy.Register(false))
	reg, err := carmy.New().Tool(ping).Use(keep).Authenticate(carmy.AuthenticatorFunc(func(*http.Request) (carmy.Identity, error) {
		return carmy.Identity{Principal: "alice", Metadata: hostMD}, nil
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	srv := serve(t, reg)
	return srv, func() map[string]string { mu.Lock(); defer mu.Unlock(); return last }, hostMD
}

// The caller's W3C trace context reaches the call's metadata from HTTP
// headers and from MCP _meta; the host's own map is never changed.
func TestTraceContextReachesMetadata(t *testing.T) {
	t.Parallel()
	srv, last, hostMD := traceServer(t)
	post := func(headers map[string]string) {
		req, _ := http.NewRequest("POST", srv.URL+"/tools/ping", nil)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	mcpCall := func(meta mcp.Meta, headers map[string]string) {
		s, err := mcpDial(t, &http.Client{Transport: headerTransport(headers)}, srv.URL, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Meta: meta})
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %+v, %v", res, err)
		}
	}
	tests := []struct {
		name          string
		call          func()
		parent, state string
	}{
		{"HTTP headers", func() {
			post(map[string]string{"Traceparent": testTraceparent, "Tracestate": testTracestate})
		}, testTraceparent, testTracestate},
		{"HTTP without trace context", func() { post(nil) }, "", ""},
		{"HTTP with an oversized traceparent", func() {
			post(map[string]string{"Traceparent": strings.Repeat("0", 300)})
		}, "", ""},
		{"HTTP with a byte that is not ASCII", func() {
			post(map[string]string{"Traceparent": testTraceparent, "Tracestate": "a=\xfc"})
		}, testTraceparent, ""},
		{"MCP _meta with a line break", func() {
			mcpCall(mcp.Meta{"traceparent": testTraceparent + "\nforged=1"}, nil)
		}, "", ""},
		{"MCP _meta", func() {
			mcpCall(mcp.Meta{"traceparent": testTraceparent, "tracestate": testTracestate}, map[string]string{"Traceparent": "00-11111111111111111111111111111111-2222222222222222-01"})
		}, testTraceparent, testTracestate},
		{"MCP HTTP headers, without _meta", func() {
			mcpCall(nil, map[string]string{"Traceparent": testTraceparent})
		}, testTraceparent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call()
			md := last()
			if md[carmy.MetaTraceparent] != tt.parent || md[carmy.MetaTracestate] != tt.state || md["tenant"] != "acme" {
				t.Errorf("metadata %v, want traceparent %q, tracestate %q", md, tt.parent, tt.state)
			}
			if len(hostMD) != 1 {
				t.Errorf("the host's metadata was changed: %v", hostMD)
			}
		})
	}
}

// A traceparent from the host's authenticator wins over the caller's.
func TestTraceContextHostWins(t *testing.T) {
	t.Parallel()
	var got map[string]string
	ping := carmy.Tool(func(c carmy.Context) error { got = c.Metadata; return nil }, carmy.Read, carmy.Name("ping"), carmy.Register(false))
	reg, err := carmy.New().Tool(ping).Authenticate(carmy.AuthenticatorFunc(func(*http.Request) (carmy.Identity, error) {
		return carmy.Identity{Metadata: map[string]string{carmy.MetaTraceparent: "host"}}, nil
	})).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	req := httptest.NewRequest("POST", "http://127.0.0.1/tools/ping", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", testTraceparent)
	w := httptest.NewRecorder()
	reg.Handler().ServeHTTP(w, req)
	if w.Code != 200 || got[carmy.MetaTraceparent] != "host" {
		t.Fatalf("status %d, metadata %v", w.Code, got)
	}
}
