package carmy

import (
	"net/http"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/guard"
	"github.com/carmy-dev/carmy/internal/oauthrs"
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
// refused with 403 on every route but the health checks (/healthz,
// /readyz, /livez), so that a web page whose
// domain an attacker rebinds to the server's address cannot reach the
// tools.
func (b *Builder) AllowHosts(hosts ...string) *Builder {
	for _, h := range hosts {
		k, err := guard.ParseHost(h)
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
		if err := guard.CheckOrigin(o); err != nil {
			b.misuse("Builder.AllowOrigins(%q): %v", o, err)
			continue
		}
		b.allowOrigins = append(b.allowOrigins, o)
	}
	return b
}

// bodyReadTimeout bounds how long a client has to send a request's body,
// counted from when its headers were read.
const bodyReadTimeout = 30 * time.Second

// protect wraps the handler's routes in the boundary every route shares
// (package guard), refusing as every other refusal of the handler is
// refused: with an [*Error], logged.
func (s *httpServer) protect(next http.Handler, hosts []guard.Host, origins []string) http.Handler {
	return guard.New(next, guard.Config{
		Hosts:           hosts,
		Origins:         origins,
		BodyLimit:       s.limits.body,
		BodyReadTimeout: s.limits.bodyRead,
		Authenticated:   s.auth != nil,
		Public:          isResourceMetadata,
		NoCORS:          isDecision,
		Refuse: func(w http.ResponseWriter, req *http.Request, why guard.Refusal) {
			if why == guard.ForeignHost {
				s.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
					"this server answers to the host names localhost, 127.0.0.1 and [::1], not %q; other names (a proxy's, a published address) are allowed by the server's configuration (allowed hosts)", req.Host))
				return
			}
			s.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
				"cross-origin requests from browsers are refused; origins whose pages may call this server are allowed by the server's configuration (allowed origins)"))
		},
	})
}

// refuse answers a request that the boundary refuses before the tool
// runs, and logs the refusal at warn level, without the request's
// credentials or input. principal is "" until the caller is known.
func (s *httpServer) refuse(w http.ResponseWriter, req *http.Request, principal string, status int, e *Error) {
	s.logRefusal(req, principal, e)
	writeErrorStatus(w, status, e)
}

func (s *httpServer) logRefusal(req *http.Request, principal string, e *Error) {
	tool, _ := strings.CutPrefix(req.URL.Path, "/tools/")
	if tool == req.URL.Path {
		tool = ""
	}
	if e.Message == "" { // an authentication refusal, whose message may hold the credential
		s.r.logger.Warn("carmy: request refused", "code", e.Code, "principal", principal, "tool", tool,
			"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
		return
	}
	s.r.logger.Warn("carmy: request refused", "code", e.Code, "reason", e.Message, "principal", principal, "tool", tool,
		"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
}

// isResourceMetadata reports a read of the protected resource metadata:
// a public document, holding no secret, that browser-based MCP clients
// read from their own origin to find where to sign in.
func isResourceMetadata(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.URL.Path == oauthrs.WellKnown || req.URL.Path == oauthrs.WellKnownMCP)
}
