package carmy

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

// AllowHosts adds names that a request may carry in its Host header,
// besides localhost, 127.0.0.1 and [::1]: the names under which a reverse
// proxy forwards to the server, or under which its callers reach it. A
// server without an [Authenticator] checks the Host of every request,
// wherever it arrived (in a container, requests published on the host's
// 127.0.0.1 arrive on the container's own address); one with an
// authenticator checks requests that arrived on a loopback address. A
// name without a port, "tools.example.com", matches any port;
// "tools.example.com:8443" matches that port only. Every other Host is
// refused with 403 on every route but /healthz, so that a web page whose
// domain an attacker rebinds to the server's address cannot reach the
// tools.
func (b *Builder) AllowHosts(hosts ...string) *Builder {
	for _, h := range hosts {
		k, err := parseAllowedHost(h)
		if err != nil {
			b.misuse("Builder.AllowHosts(%q): %v", h, err)
			continue
		}
		b.allowHosts = append(b.allowHosts, k)
	}
	return b
}

// AllowOrigins adds browser origins, "scheme://host[:port]" exactly as a
// browser sends them in its Origin header, whose pages may call the
// server. Every other cross-origin request from a browser (an Origin that
// is not the server's own, or Sec-Fetch-Site other than same-origin or
// none) is refused with 403 on every route, /mcp included. Requests from
// programs, which send neither header, are not affected.
//
// The pages of an allowed origin get CORS: their preflight requests are
// answered, and they may send the Authorization, Content-Type,
// Idempotency-Key and MCP headers, and read the answers.
func (b *Builder) AllowOrigins(origins ...string) *Builder {
	for _, o := range origins {
		if err := checkOrigin(o); err != nil {
			b.misuse("Builder.AllowOrigins(%q): %v", o, err)
			continue
		}
		b.allowOrigins = append(b.allowOrigins, o)
	}
	return b
}

// checkOrigin checks an origin as browsers send it: "scheme://host[:port]",
// in lower case.
func checkOrigin(o string) error {
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
		return err
	}
	if o != strings.ToLower(o) {
		return errors.New("write the origin in lower case, as browsers send it")
	}
	return nil
}

// hostKey is an allowed Host: a lower-case name (an IPv6 address without
// brackets) and a port, "" for any.
type hostKey struct{ name, port string }

// loopbackNames are the Host names always allowed on a loopback address.
var loopbackNames = []hostKey{{name: "localhost"}, {name: "127.0.0.1"}, {name: "::1"}}

// splitHost splits a Host header value into a lower-case name and a port.
func splitHost(h string) hostKey {
	if name, port, err := net.SplitHostPort(h); err == nil {
		return hostKey{strings.ToLower(name), port}
	}
	return hostKey{name: strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))}
}

func parseAllowedHost(h string) (hostKey, error) {
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

// bodyReadTimeout bounds how long a client has to send a request's body,
// counted from when its headers were read. A variable so that tests can
// shorten it.
var bodyReadTimeout = 30 * time.Second

// boundary holds the protections that every route of the handler shares,
// applied before routing: the Host and Origin checks, the body limit and
// the body's deadline.
type boundary struct {
	r       *Registry
	next    http.Handler
	hosts   []hostKey
	origins *http.CrossOriginProtection
	allowed map[string]bool // the origins of AllowOrigins, for CORS
}

func (r *Registry) protect(next http.Handler, hosts []hostKey, origins []string) http.Handler {
	b := &boundary{r: r, next: next, hosts: append(hosts, loopbackNames...), origins: http.NewCrossOriginProtection(), allowed: map[string]bool{}}
	for _, o := range origins {
		_ = b.origins.AddTrustedOrigin(o) // checked by Builder.AllowOrigins
		b.allowed[o] = true
	}
	return b
}

// CORS: what the pages of an allowed origin may send and read.
const (
	corsMethods = "GET, POST, DELETE"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	corsExposed = "X-Carmy-Execution-Id, Mcp-Session-Id, WWW-Authenticate, Retry-After"
)

func (b *boundary) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// First, so that every refusal, here or behind, closes the connection
	// instead of waiting for a body nobody will read.
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody {
		// The server has no overall read timeout, which would cut off
		// long-running calls and streams: this deadline covers the body
		// only, since net/http lifts it once the body has been read.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
		body := &trackedBody{ReadCloser: http.MaxBytesReader(w, req.Body, b.r.bodyLimit)}
		req.Body = body
		if req.ProtoMajor == 1 {
			w = &unreadBodyWriter{ResponseWriter: w, body: body}
		}
	}
	if req.URL.Path != "/healthz" && !b.hostAllowed(req) {
		b.r.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
			"this server answers to the host names localhost, 127.0.0.1 and [::1], not %q; other names (a proxy's, a published address) are allowed by the server's configuration (allowed hosts)", req.Host))
		return
	}
	if !isResourceMetadata(req) && !b.originAllowed(req) {
		b.r.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
			"cross-origin requests from browsers are refused; origins whose pages may call this server are allowed by the server's configuration (allowed origins)"))
		return
	}
	// Decisions never get CORS, so that no other origin's page can send
	// one: allowed origins are trusted to call tools, not to approve.
	if origin := req.Header.Get("Origin"); b.allowed[origin] && !isDecision(req.URL.Path) {
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
	b.next.ServeHTTP(w, req)
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
func (b *boundary) hostAllowed(req *http.Request) bool {
	switch local := req.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		if b.r.auth != nil && !local.AddrPort().Addr().IsLoopback() {
			return true
		}
	case net.Addr:
		if ap, err := netip.ParseAddrPort(local.String()); err == nil && b.r.auth != nil && !ap.Addr().IsLoopback() {
			return true
		}
	default:
		if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil && !ap.Addr().IsLoopback() {
			return true
		}
	}
	k := splitHost(req.Host)
	for _, a := range b.hosts {
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
func (b *boundary) originAllowed(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if req.Header.Get("Sec-Fetch-Site") == "" && req.Header.Get("Origin") == "" {
			return true // not from a browser, or a browser's same-origin request
		}
		probe := *req
		probe.Method = http.MethodPost
		return b.origins.Check(&probe) == nil
	}
	return b.origins.Check(req) == nil
}

// refuse answers a request that the boundary refuses before the tool
// runs, and logs the refusal at warn level, without the request's
// credentials or input. principal is "" until the caller is known.
func (r *Registry) refuse(w http.ResponseWriter, req *http.Request, principal string, status int, e *Error) {
	r.logRefusal(req, principal, e)
	writeErrorStatus(w, status, e)
}

func (r *Registry) logRefusal(req *http.Request, principal string, e *Error) {
	tool, _ := strings.CutPrefix(req.URL.Path, "/tools/")
	if tool == req.URL.Path {
		tool = ""
	}
	if e.Message == "" { // an authentication refusal, whose message may hold the credential
		r.logger.Warn("carmy: request refused", "code", e.Code, "principal", principal, "tool", tool,
			"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
		return
	}
	r.logger.Warn("carmy: request refused", "code", e.Code, "reason", e.Message, "principal", principal, "tool", tool,
		"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
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

// isResourceMetadata reports a read of the protected resource metadata:
// a public document, holding no secret, that browser-based MCP clients
// read from their own origin to find where to sign in.
func isResourceMetadata(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.URL.Path == wellKnownResource || req.URL.Path == wellKnownResourceMCP)
}
