package guard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseHost(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Host
		ok   bool
	}{
		{"tools.example.com", Host{name: "tools.example.com"}, true},
		{"Tools.Example.com:8443", Host{"tools.example.com", "8443"}, true},
		{"[::1]:3000", Host{"::1", "3000"}, true},
		{"[fe80::1]", Host{name: "fe80::1"}, true},
		{"", Host{}, false},
		{"https://tools.example.com", Host{}, false},
		{"user@tools.example.com", Host{}, false},
		{"tools.example.com/x", Host{}, false},
		{"tools.example.com:99999", Host{}, false},
		{"tools.example.com:port", Host{}, false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHost(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("error %v, want ok %v", err, tt.ok)
			}
			if tt.ok && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"https://app.example.com", true},
		{"http://localhost:5173", true},
		{"https://App.example.com", false},
		{"app.example.com", false},
		{"https://app.example.com/path", false},
		{"", false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			if err := CheckOrigin(tt.in); (err == nil) != tt.ok {
				t.Fatalf("error %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// served runs one request through a guard around a handler that answers
// 200 after reading the body, and returns the answer and the refusal, 0
// for none.
func served(t *testing.T, c Config, req *http.Request) (*httptest.ResponseRecorder, Refusal) {
	t.Helper()
	var why Refusal
	c.Refuse = func(w http.ResponseWriter, _ *http.Request, r Refusal) {
		why = r
		w.WriteHeader(http.StatusForbidden)
	}
	if c.BodyLimit == 0 {
		c.BodyLimit = 1 << 20
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = time.Second
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, err := io.ReadAll(req.Body); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	w := httptest.NewRecorder()
	New(next, c).ServeHTTP(w, req)
	return w, why
}

// at makes a request that arrived on local, naming host.
func at(method, host, path string, local net.Addr, body string, header ...string) *http.Request {
	ctx := context.Background()
	if local != nil {
		ctx = context.WithValue(ctx, http.LocalAddrContextKey, local)
	}
	req := httptest.NewRequestWithContext(ctx, method, "http://"+host+path, strings.NewReader(body))
	req.Host = host
	req.RemoteAddr = "127.0.0.1:50000"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func TestHost(t *testing.T) {
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}
	container := &net.TCPAddr{IP: net.IPv4(172, 17, 0, 2), Port: 3000}
	proxy, _ := ParseHost("tools.example.com:8443")
	for _, tt := range []struct {
		name   string
		c      Config
		host   string
		path   string
		local  net.Addr
		refuse bool
	}{
		{"localhost", Config{}, "localhost:3000", "/tools", loopback, false},
		{"[::1]", Config{}, "[::1]:3000", "/tools", loopback, false},
		{"rebound name", Config{}, "evil.example:3000", "/tools", loopback, true},
		{"rebound name, upper case loopback", Config{}, "LOCALHOST:3000", "/tools", loopback, false},
		{"health is never refused", Config{}, "evil.example:3000", "/healthz", loopback, false},
		{"readiness is never refused", Config{}, "evil.example:3000", "/readyz", loopback, false},
		{"liveness is never refused", Config{}, "evil.example:3000", "/livez", loopback, false},
		{"no authenticator: checked on any address", Config{}, "evil.example:3000", "/tools", container, true},
		{"authenticator: not checked off loopback", Config{Authenticated: true}, "evil.example:3000", "/tools", container, false},
		{"authenticator: checked on loopback", Config{Authenticated: true}, "evil.example:3000", "/tools", loopback, true},
		{"allowed host and port", Config{Hosts: []Host{proxy}}, "tools.example.com:8443", "/tools", loopback, false},
		{"allowed host, other port", Config{Hosts: []Host{proxy}}, "tools.example.com:9000", "/tools", loopback, true},
		{"called directly from loopback", Config{}, "evil.example", "/tools", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, why := served(t, tt.c, at(http.MethodGet, tt.host, tt.path, tt.local, ""))
			if got := why == ForeignHost; got != tt.refuse {
				t.Fatalf("refused %v (%d), want %v", got, w.Code, tt.refuse)
			}
		})
	}
}

func TestOriginAndCORS(t *testing.T) {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}
	const app = "https://app.example.com"
	c := Config{
		Origins: []string{app},
		Public:  func(req *http.Request) bool { return req.URL.Path == "/public" },
		NoCORS:  func(path string) bool { return path == "/decide" },
	}
	for _, tt := range []struct {
		name   string
		method string
		path   string
		header []string
		refuse bool
		status int
		cors   bool
	}{
		{"program", http.MethodPost, "/tools/x", nil, false, http.StatusOK, false},
		{"same origin", http.MethodPost, "/tools/x", []string{"Origin", "http://127.0.0.1:3000", "Sec-Fetch-Site", "same-origin"}, false, http.StatusOK, false},
		{"other site's page, POST", http.MethodPost, "/tools/x", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, true, http.StatusForbidden, false},
		{"other site's page, GET", http.MethodGet, "/tools", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, true, http.StatusForbidden, false},
		{"other site's page, public document", http.MethodGet, "/public", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, false, http.StatusOK, false},
		{"allowed origin", http.MethodPost, "/tools/x", []string{"Origin", app, "Sec-Fetch-Site", "cross-site"}, false, http.StatusOK, true},
		{"allowed origin, preflight", http.MethodOptions, "/tools/x", []string{"Origin", app, "Sec-Fetch-Site", "cross-site", "Access-Control-Request-Method", "POST"}, false, http.StatusNoContent, true},
		{"allowed origin, no CORS path", http.MethodPost, "/decide", []string{"Origin", app, "Sec-Fetch-Site", "cross-site"}, false, http.StatusOK, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, why := served(t, c, at(tt.method, "127.0.0.1:3000", tt.path, local, "", tt.header...))
			if got := why == CrossOrigin; got != tt.refuse || w.Code != tt.status {
				t.Fatalf("refused %v, status %d; want %v, %d", got, w.Code, tt.refuse, tt.status)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin") == app; got != tt.cors {
				t.Fatalf("CORS %v, want %v: %v", got, tt.cors, w.Header())
			}
			if tt.method == http.MethodOptions && w.Header().Get("Access-Control-Allow-Headers") == "" {
				t.Fatalf("preflight answered without the headers a page may send: %v", w.Header())
			}
		})
	}
}

func TestBody(t *testing.T) {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}
	t.Run("over the limit", func(t *testing.T) {
		w, _ := served(t, Config{BodyLimit: 4}, at(http.MethodPost, "localhost", "/tools/x", local, "12345"))
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", w.Code)
		}
	})
	t.Run("within the limit", func(t *testing.T) {
		w, _ := served(t, Config{BodyLimit: 5}, at(http.MethodPost, "localhost", "/tools/x", local, "12345"))
		if w.Code != http.StatusOK || w.Header().Get("Connection") != "" {
			t.Fatalf("status %d, Connection %q; want 200, kept open", w.Code, w.Header().Get("Connection"))
		}
	})
	t.Run("refused before the body was read: the connection closes", func(t *testing.T) {
		w, why := served(t, Config{}, at(http.MethodPost, "evil.example", "/tools/x", local, "{}"))
		if why != ForeignHost || w.Header().Get("Connection") != "close" {
			t.Fatalf("refusal %v, Connection %q; want a foreign host, close", why, w.Header().Get("Connection"))
		}
	})
}

// discardWriter is the cheapest ResponseWriter, so that the benchmark
// measures the handlers.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header       { return d.h }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// BenchmarkBoundary measures what the checks every request goes through
// cost: the guard around a handler that does nothing, against that
// handler alone.
func BenchmarkBoundary(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	protected := New(noop, Config{BodyLimit: 1 << 20, BodyReadTimeout: 30 * time.Second,
		Refuse: func(w http.ResponseWriter, _ *http.Request, _ Refusal) { w.WriteHeader(http.StatusForbidden) }})
	local := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000})
	request := func(method, body string, header ...string) *http.Request {
		req, _ := http.NewRequestWithContext(local, method, "http://127.0.0.1:3000/tools/x", strings.NewReader(body))
		if body == "" {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	requests := []struct {
		name string
		req  *http.Request
	}{
		{"GET", request(http.MethodGet, "")},
		{"GET from the server's page", request(http.MethodGet, "", "Origin", "http://127.0.0.1:3000", "Sec-Fetch-Site", "same-origin")},
		{"POST with a body", request(http.MethodPost, `{"name":"x"}`, "Content-Type", "application/json")},
	}
	for _, rq := range requests {
		for _, h := range []struct {
			name string
			h    http.Handler
		}{{"bare", noop}, {"protected", protected}} {
			b.Run(rq.name+"/"+h.name, func(b *testing.B) {
				w := discardWriter{http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					req := *rq.req // the guard replaces the body
					h.h.ServeHTTP(w, &req)
				}
			})
		}
	}
}
