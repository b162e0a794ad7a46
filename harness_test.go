package carmy_test

// The harness of the package's tests: a registry served on loopback, a log
// sink, a JSON client and MCP clients, written once for every test file.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// handlerOf is what serve serves: a [carmy.Registry], or a [carmy.Builder]
// whose Handler builds one.
type handlerOf interface{ Handler() http.Handler }

// serve serves h's handler on a loopback server, closed when the test ends;
// its URL and Client are the test's. The registry's own lifetime stays the
// caller's.
func serve(t testing.TB, h handlerOf) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// build builds b, failing the test on an error, and closes the registry when
// the test ends (after the servers that serve it, which were started later).
func build(t testing.TB, b *carmy.Builder) *carmy.Registry {
	t.Helper()
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// logSink collects what a logger writes, read while the calls that log run.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// logger is a text logger into the sink, debug records included.
func (l *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// roundTrip sends a request with client c (http.DefaultClient when nil)
// and returns the answer with its body read. A POST says its body is JSON.
// header holds name, value pairs: a header given twice is sent twice; one
// given as "" is not sent, not even the Content-Type.
func roundTrip(t testing.TB, c *http.Client, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	given := map[string]bool{}
	for i := 0; i+1 < len(header); i += 2 {
		if !given[header[i]] {
			req.Header.Del(header[i])
		}
		given[header[i]] = true
		if header[i+1] != "" {
			req.Header.Add(header[i], header[i+1])
		}
	}
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return res, raw
}

// httpDo sends a request with client c and decodes a JSON answer: an
// object or an array, nil for any other body.
func httpDo(t testing.TB, c *http.Client, method, url, body string, header ...string) (int, any) {
	t.Helper()
	res, raw := roundTrip(t, c, method, url, body, header...)
	var v any
	if len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
	return res.StatusCode, v
}

// response is an answer whose body is a JSON object (nil for any other).
type response struct {
	status int
	header http.Header
	body   map[string]any
}

// do sends a request with http.DefaultClient and decodes a JSON object.
func do(t testing.TB, method, url, body string, header ...string) response {
	t.Helper()
	res, raw := roundTrip(t, nil, method, url, body, header...)
	var m map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
	return response{res.StatusCode, res.Header, m}
}

// headerTransport sets its headers on every request it sends.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// headerClient is an HTTP client that sends the header name with value on
// every request.
func headerClient(name, value string) *http.Client {
	return &http.Client{Transport: headerTransport{name: value}}
}

// bearerClient is an HTTP client that sends token as a bearer token.
func bearerClient(token string) *http.Client {
	return headerClient("Authorization", "Bearer "+token)
}

// mcpDial connects an MCP client with options opts to the streamable HTTP
// endpoint of the server at base, over hc (http.DefaultClient when nil),
// in protocol version (the SDK's latest when ""). The session closes when
// the test ends.
func mcpDial(t testing.TB, hc *http.Client, base, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, HTTPClient: hc}
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	s, err := client.Connect(context.Background(), tr, so)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// mcpConnect is mcpDial over http.DefaultClient, failing the test when the
// client cannot connect.
func mcpConnect(t testing.TB, base, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	s, err := mcpDial(t, nil, base, version, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mcpSession connects an MCP client to the server at url, with token as
// its bearer token when not "".
func mcpSession(t testing.TB, url, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	var hc *http.Client
	if token != "" {
		hc = bearerClient(token)
	}
	return mcpDial(t, hc, url, "", opts)
}

// singleClient connects an MCP client with options opts, in protocol
// version (the SDK's latest when ""), to reg over a single-client
// transport: "memory" (ServeMCP), or "stdio", a pair of pipes (ServeStdio),
// as a stdio client would. When the test ends the session closes and the
// serving ends.
func singleClient(t testing.TB, reg *carmy.Registry, transport, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	var clientT mcp.Transport
	switch transport {
	case "memory":
		serverT, c := mcp.NewInMemoryTransports()
		clientT = c
		go func() { defer close(served); _ = reg.ServeMCP(ctx, serverT) }()
	case "stdio":
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		clientT = &mcp.IOTransport{Reader: outR, Writer: inW}
		go func() {
			defer close(served)
			_ = reg.ServeStdio(ctx, inR, outW)
			_ = outW.Close()
		}()
	}
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, opts).Connect(ctx, clientT, so)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		cancel()
		<-served
	})
	return s
}

// stdioPipes serves reg over a pair of pipes, as a stdio client reaches it,
// for a test that writes the JSON-RPC lines itself: it returns the writer of
// the client's lines and the reader of the server's. When the test ends the
// client's side closes, and the serving ends before the test does.
func stdioPipes(t testing.TB, reg *carmy.Registry) (io.Writer, *bufio.Reader) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = reg.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		close(done)
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-done
	})
	return inW, bufio.NewReader(outR)
}

// mcpExchange posts one JSON-RPC message to the MCP endpoint of the server
// at base, with MCP's Accept header and the headers given, each map
// overriding the ones before it (a header given as "" is not sent). It
// returns the answer and its message: the body, or out of an event stream
// the last event that carries an id.
func mcpExchange(t testing.TB, base, body string, headers ...map[string]string) (*http.Response, []byte) {
	t.Helper()
	h := map[string]string{"Accept": "application/json, text/event-stream"}
	for _, layer := range headers {
		for k, v := range layer {
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
	pairs := make([]string, 0, 2*len(h))
	for k, v := range h {
		pairs = append(pairs, k, v)
	}
	res, raw := roundTrip(t, nil, http.MethodPost, base+"/mcp", body, pairs...)
	var msg []byte
	for line := range strings.Lines(string(raw)) {
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && strings.Contains(data, `"id"`) {
			msg = []byte(data)
		}
	}
	if msg == nil || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res, raw
	}
	return res, msg
}
