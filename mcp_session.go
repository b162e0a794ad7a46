package carmy

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Defaults of the MCP endpoint's sessions.
const (
	// DefaultSessionTimeout is how long an MCP session may stay idle before
	// the server closes it.
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxSessions is how many MCP sessions one principal may hold
	// open at once.
	DefaultMaxSessions = 64
)

// SessionTimeout sets how long an MCP session over HTTP may stay idle (no
// request of its client in progress, a GET stream counting as one) before
// the server closes it; the client then gets 404 and starts a new session,
// as MCP clients do. The default is [DefaultSessionTimeout].
func (b *Builder) SessionTimeout(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.SessionTimeout(%v) must be positive", d)
		return b
	}
	b.sessionTimeout = d
	return b
}

// MaxSessions sets how many MCP sessions over HTTP one principal may hold
// open at once: opening one more closes that principal's least recently
// used session. The default is [DefaultMaxSessions].
func (b *Builder) MaxSessions(n int) *Builder {
	if n <= 0 {
		b.misuse("Builder.MaxSessions(%d) must be positive", n)
		return b
	}
	b.maxSessions = n
	return b
}

// newSessionTable is the session table of a registry, with the defaults
// for what the builder left unset.
func newSessionTable(timeout time.Duration, max int) *mcpwire.SessionTable {
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return mcpwire.NewSessionTable(timeout, max)
}

// sessionMiddleware records every session initialized over HTTP with the
// principal that initialized it. Sessions over other transports (stdio,
// in-memory) carry no HTTP identity and are not recorded.
func (r *Registry) sessionMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if id, _, ok := httpCaller(req.GetExtra()); ok && ss != nil && ss.ID() != "" {
			r.sessions.Open(ss, id.Principal)
		}
		return res, err
	}
}

// serveSession lets only a session's own principal use it: another
// principal's POST, GET or DELETE gets 404, the answer for a session that
// does not exist, so that a request learns nothing about other
// principals' sessions. It counts the request as activity of the session.
func (r *Registry) serveSession(w http.ResponseWriter, req *http.Request, principal string, next http.Handler) {
	id := req.Header.Get("Mcp-Session-Id")
	if id == "" {
		next.ServeHTTP(w, req)
		return
	}
	s, ok := r.sessions.Acquire(id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if s == nil {
		next.ServeHTTP(w, req)
		return
	}
	defer r.sessions.Release(s)
	next.ServeHTTP(w, req)
	if req.Method == http.MethodDelete {
		r.sessions.Forget(s)
	}
}
