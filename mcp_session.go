package carmy

import (
	"container/list"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// sessionTable keeps the MCP sessions opened over HTTP: who opened each
// (only that principal may use it), which are idle, and each principal's
// sessions from most to least recently used. The SDK's handler keeps the
// sessions themselves; closing one removes it there too.
type sessionTable struct {
	timeout time.Duration
	max     int

	mu          sync.Mutex
	byID        map[string]*session
	byPrincipal map[string]*list.List // of *session, most recently used first
	closed      bool
}

type session struct {
	id        string
	principal string
	ss        *mcp.ServerSession
	active    int         // requests of its client in progress
	timer     *time.Timer // closes the session once idle for the timeout
	elem      *list.Element
	calls     callSet     // the calls carmy answers itself, in progress
	logs      atomic.Bool // its client set a log level
}

func newSessionTable(timeout time.Duration, max int) *sessionTable {
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &sessionTable{timeout: timeout, max: max, byID: map[string]*session{}, byPrincipal: map[string]*list.List{}}
}

// open records a session that its principal just initialized, closing
// that principal's least recently used sessions beyond the limit.
func (t *sessionTable) open(ss *mcp.ServerSession, principal string) {
	s := &session{id: ss.ID(), principal: principal, ss: ss}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		go ss.Close()
		return
	}
	if old := t.byID[s.id]; old != nil { // initialize sent twice on one session
		t.dropLocked(old)
	}
	l := t.byPrincipal[principal]
	if l == nil {
		l = list.New()
		t.byPrincipal[principal] = l
	}
	s.elem = l.PushFront(s)
	t.byID[s.id] = s
	var evicted []*session
	for l.Len() > t.max {
		old := l.Back().Value.(*session)
		t.dropLocked(old)
		evicted = append(evicted, old)
	}
	s.timer = time.AfterFunc(t.timeout, func() { t.expire(s) })
	t.mu.Unlock()
	for _, old := range evicted {
		// Close waits for the session's calls in progress to return.
		go old.ss.Close()
	}
}

// acquire marks the start of a request on session id by principal. It
// returns false when the session belongs to another principal: the request
// must be refused as if the session did not exist. A session it does not
// know is left to the SDK's handler, which answers 404.
func (t *sessionTable) acquire(id, principal string) (s *session, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s = t.byID[id]
	if s == nil {
		return nil, true
	}
	if s.principal != principal {
		return nil, false
	}
	s.active++
	t.byPrincipal[principal].MoveToFront(s.elem)
	return s, true
}

// release marks the end of a request that acquire counted; the idle
// timeout runs from the end of the last one.
func (t *sessionTable) release(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.active--
	if t.byID[s.id] == s {
		s.timer.Reset(t.timeout)
	}
}

// forget drops a session its client deleted.
func (t *sessionTable) forget(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[s.id] == s {
		t.dropLocked(s)
	}
}

// expire closes a session idle for the timeout. A session with a request
// in progress is not idle: its timer starts again when the last one ends.
func (t *sessionTable) expire(s *session) {
	t.mu.Lock()
	if t.byID[s.id] != s || s.active > 0 {
		t.mu.Unlock()
		return
	}
	t.dropLocked(s)
	t.mu.Unlock()
	_ = s.ss.Close()
}

func (t *sessionTable) dropLocked(s *session) {
	s.timer.Stop()
	delete(t.byID, s.id)
	l := t.byPrincipal[s.principal]
	l.Remove(s.elem)
	if l.Len() == 0 {
		delete(t.byPrincipal, s.principal)
	}
}

// closeAll closes every session, for a registry that is closing; sessions
// opened afterwards are closed at once.
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	all := make([]*session, 0, len(t.byID))
	for _, s := range t.byID {
		t.dropLocked(s)
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		go s.ss.Close()
	}
}

// len returns how many sessions are open, for tests.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
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
			r.sessions.open(ss, id.Principal)
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
	s, ok := r.sessions.acquire(id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if s == nil {
		next.ServeHTTP(w, req)
		return
	}
	defer r.sessions.release(s)
	next.ServeHTTP(w, req)
	if req.Method == http.MethodDelete {
		r.sessions.forget(s)
	}
}
