// Package guard holds the protections that every route of carmy's HTTP
// handler shares, applied before routing: the Host check against DNS
// rebinding, the Origin check against other sites' pages, the CORS answers
// for the origins the host allowed, the body limit and the body's
// deadline. It knows nothing of tools or registries: the caller says how
// to refuse and which requests are exempt.
package guard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Host is a name a request may carry in its Host header: a lower-case
// name (an IPv6 address without brackets) and a port, "" for any.
type Host struct{ name, port string }

// Loopback are the Host names always allowed.
var Loopback = []Host{{name: "localhost"}, {name: "127.0.0.1"}, {name: "::1"}}

// splitHost splits a Host header value into a lower-case name and a port.
func splitHost(h string) Host {
	if name, port, err := net.SplitHostPort(h); err == nil {
		return Host{strings.ToLower(name), port}
	}
	return Host{name: strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))}
}

// ParseHost parses an allowed host: a name with an optional port,
// "tools.example.com" (any port) or "tools.example.com:8443".
func ParseHost(h string) (Host, error) {
	k := splitHost(h)
	if k.name == "" || strings.ContainsAny(k.name, "/@?#%\\ \t") || strings.Contains(h, "://") {
		return k, fmt.Errorf("want a host name, with an optional port, such as tools.example.com or tools.example.com:8443")
	}
	if k.port != "" {
		if _, err := netip.ParseAddrPort("127.0.0.1:" + k.port); err != nil {
			return k, fmt.Errorf("the port must be a number from 0 to 65535")
		}
	}
	return k, nil
}

// CheckOrigin checks an origin as browsers send it: "scheme://host[:port]",
// in lower case.
func CheckOrigin(o string) error {
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
		return err
	}
	if o != strings.ToLower(o) {
		return errors.New("write the origin in lower case, as browsers send it")
	}
	return nil
}

// Refusal says which check refused a request.
type Refusal int

const (
	// ForeignHost: the request's Host is not an allowed one.
	ForeignHost Refusal = iota + 1
	// CrossOrigin: a browser sent the request from another origin's page.
	CrossOrigin
)

// Config is what [New] needs from its caller.
type Config struct {
	Hosts   []Host   // allowed besides [Loopback]
	Origins []string // checked by [CheckOrigin]; their pages get CORS
	// BodyLimit bounds a request's body; reads past it fail with
	// [http.MaxBytesError].
	BodyLimit int64
	// BodyReadTimeout bounds how long a client has to send a request's
	// body, counted from when its headers were read.
	BodyReadTimeout time.Duration
	// Authenticated: the server authenticates its callers, whom a page
	// cannot borrow, so requests that arrived on a non-loopback address
	// skip the Host check.
	Authenticated bool
	// Public reports a request that no Origin check applies to: a public
	// document that pages of any origin may read.
	Public func(*http.Request) bool
	// NoCORS reports a path that never gets CORS, even for an allowed
	// origin.
	NoCORS func(path string) bool
	// Refuse answers a refused request, with a 403.
	Refuse func(w http.ResponseWriter, req *http.Request, why Refusal)
}

// CORS: what the pages of an allowed origin may send and read.
const (
	corsMethods = "GET, POST, DELETE"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	corsExposed = "X-Carmy-Execution-Id, Mcp-Session-Id, WWW-Authenticate, Retry-After"
)

type guard struct {
	c       Config
	next    http.Handler
	hosts   []Host
	origins *http.CrossOriginProtection
	allowed map[string]bool // the allowed origins, for CORS
}

// New wraps next in the checks that c describes.
func New(next http.Handler, c Config) http.Handler {
	g := &guard{c: c, next: next, hosts: append(append([]Host(nil), c.Hosts...), Loopback...), origins: http.NewCrossOriginProtection(), allowed: map[string]bool{}}
	for _, o := range c.Origins {
		_ = g.origins.AddTrustedOrigin(o) // checked by CheckOrigin
		g.allowed[o] = true
	}
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// First, so that every refusal, here or behind, closes the connection
	// instead of waiting for a body nobody will read.
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		// The server has no overall read timeout, which would cut off
		// long-running calls and streams: this deadline covers the body
		// only, since net/http lifts it once the body has been read.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.c.BodyReadTimeout))
		body := &trackedBody{ReadCloser: http.MaxBytesReader(w, req.Body, g.c.BodyLimit)}
		req.Body = body
		if req.ProtoMajor == 1 {
			w = &unreadBodyWriter{ResponseWriter: w, body: body}
		}
	}
	if !probe(req.URL.Path) && !g.hostAllowed(req) {
		g.c.Refuse(w, req, ForeignHost)
		return
	}
	if (g.c.Public == nil || !g.c.Public(req)) && !g.originAllowed(req) {
		g.c.Refuse(w, req, CrossOrigin)
		return
	}
	// Decisions never get CORS, so that no other origin's page can send
	// one: allowed origins are trusted to call tools, not to approve.
	if origin := req.Header.Get("Origin"); g.allowed[origin] && (g.c.NoCORS == nil || !g.c.NoCORS(req.URL.Path)) {
		// Without CORS headers, a browser would keep the answer from the
		// page, and would not send JSON at all: its preflight is answered
		// here.
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposed)
		if req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	g.next.ServeHTTP(w, req)
}

// hostAllowed guards against DNS rebinding: a page whose domain resolves
// to the server's address reaches it with that domain as its Host. A
// server without an authenticator checks every request that came through
// a net/http server, wherever it arrived: in a container published on
// 127.0.0.1, requests arrive on the container's own address, and a
// rebound page reaches them there just the same. A server with an
// authenticator, whose callers a page cannot borrow, checks those that
// arrived on a loopback address, or on a local address that is not an IP
// address (a Unix socket a local proxy forwards to). A request that names
// no local address did not come through a net/http server (a handler
// called directly, as in tests): it is checked when it says it came from
// a loopback address, as a browser's would.
func (g *guard) hostAllowed(req *http.Request) bool {
	switch local := req.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		if g.c.Authenticated && !local.AddrPort().Addr().IsLoopback() {
			return true
		}
	case net.Addr:
		if ap, err := netip.ParseAddrPort(local.String()); err == nil && g.c.Authenticated && !ap.Addr().IsLoopback() {
			return true
		}
	default:
		if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil && !ap.Addr().IsLoopback() {
			return true
		}
	}
	k := splitHost(req.Host)
	for _, a := range g.hosts {
		if a.name == k.name && (a.port == "" || a.port == k.port) {
			return true
		}
	}
	return false
}

// originAllowed refuses cross-origin requests from browsers.
// CrossOriginProtection lets GET, HEAD and OPTIONS through, since they
// should change nothing; here they would read the tools' list or open an
// MCP stream, so every method gets the check unsafe methods get.
func (g *guard) originAllowed(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if req.Header.Get("Sec-Fetch-Site") == "" && req.Header.Get("Origin") == "" {
			return true // not from a browser, or a browser's same-origin request
		}
		probe := *req
		probe.Method = http.MethodPost
		return g.origins.Check(&probe) == nil
	}
	return g.origins.Check(req) == nil
}

// trackedBody notes whether the whole body was read.
type trackedBody struct {
	io.ReadCloser
	done bool
}

func (t *trackedBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err == io.EOF {
		t.done = true
	}
	return n, err
}

// unreadBodyWriter closes the connection after a refusal sent before the
// body was read. Otherwise net/http reads what is left of the body before
// it sends the answer, so that a client trickling a body it was never
// entitled to send would hold the connection until its deadline, and wait
// that long for its 401.
type unreadBodyWriter struct {
	http.ResponseWriter
	body *trackedBody
}

func (u *unreadBodyWriter) WriteHeader(status int) {
	if status >= 400 && !u.body.done {
		u.Header().Set("Connection", "close")
	}
	u.ResponseWriter.WriteHeader(status)
}

// Unwrap gives http.ResponseController the server's writer, for flushing
// MCP streams.
func (u *unreadBodyWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Flush flushes the server's writer, for handlers that look for
// [http.Flusher].
func (u *unreadBodyWriter) Flush() {
	if f, ok := u.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// probe reports whether path is a health check, which answers whatever
// Host the prober names: orchestrators probe by address.
func probe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/livez"
}
