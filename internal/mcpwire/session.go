package mcpwire

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionTable keeps the MCP sessions opened over HTTP: who opened each
// (only that principal may use it), which are idle, and each principal's
// sessions from most to least recently used. The SDK's handler keeps the
// sessions themselves; closing one removes it there too.
type SessionTable struct {
	timeout time.Duration
	max     int

	ended func(SessionSpan) // told of every session that leaves the table; nil for none

	mu          sync.Mutex
	byID        map[string]*Session
	byPrincipal map[string]*list.List // of *Session, most recently used first
	closed      bool
	gone        []*Session // dropped, to tell ended of once the lock is let go
}

// SessionSpan is a session from its start to its end, as a table's ended
// hook is told of it, over HTTP or over a single-client transport.
type SessionSpan struct {
	ID, Principal   string
	ProtocolVersion string // the version it was initialized with
	Transport       string // "tcp" (streamable HTTP) or "pipe" (stdio and the like)
	Start, End      time.Time
}

// Session is one session of a [SessionTable].
type Session struct {
	id        string
	principal string
	version   string
	start     time.Time
	ss        *mcp.ServerSession
	active    int         // requests of its client in progress
	timer     *time.Timer // closes the session once idle for the timeout
	elem      *list.Element
	// Calls is the calls carmy answers itself, in progress.
	Calls CallSet
	// Logs is set once its client set a log level.
	Logs atomic.Bool
}

// NewSessionTable returns an empty table whose sessions close once idle
// for timeout, and that keeps at most max sessions of one principal.
// ended, when not nil, is told of each session that leaves the table,
// whatever ended it: its client, its idle timeout, its principal's bound,
// or the table's closing.
func NewSessionTable(timeout time.Duration, max int, ended func(SessionSpan)) *SessionTable {
	return &SessionTable{timeout: timeout, max: max, ended: ended, byID: map[string]*Session{}, byPrincipal: map[string]*list.List{}}
}

// Open records a session that its principal just initialized with
// protocol version, closing that principal's least recently used sessions
// beyond the limit.
func (t *SessionTable) Open(ss *mcp.ServerSession, principal, version string) {
	s := &Session{id: ss.ID(), principal: principal, version: version, start: time.Now(), ss: ss}
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
	var evicted []*Session
	for l.Len() > t.max {
		old := l.Back().Value.(*Session)
		t.dropLocked(old)
		evicted = append(evicted, old)
	}
	s.timer = time.AfterFunc(t.timeout, func() { t.expire(s) })
	t.unlock()
	for _, old := range evicted {
		// Close waits for the session's calls in progress to return.
		go old.ss.Close()
	}
}

// Acquire marks the start of a request on session id by principal. It
// returns false when the session belongs to another principal: the request
// must be refused as if the session did not exist. A session it does not
// know is left to the SDK's handler, which answers 404.
func (t *SessionTable) Acquire(id, principal string) (s *Session, ok bool) {
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

// Release marks the end of a request that [SessionTable.Acquire] counted; the idle
// timeout runs from the end of the last one.
func (t *SessionTable) Release(s *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.active--
	if t.byID[s.id] == s {
		s.timer.Reset(t.timeout)
	}
}

// Forget drops a session its client deleted.
func (t *SessionTable) Forget(s *Session) {
	t.mu.Lock()
	defer t.unlock()
	if t.byID[s.id] == s {
		t.dropLocked(s)
	}
}

// expire closes a session idle for the timeout. A session with a request
// in progress is not idle: its timer starts again when the last one ends.
func (t *SessionTable) expire(s *Session) {
	t.mu.Lock()
	if t.byID[s.id] != s || s.active > 0 {
		t.mu.Unlock()
		return
	}
	t.dropLocked(s)
	t.unlock()
	_ = s.ss.Close()
}

// Ended tells the table's ended hook of a session served outside the
// table, one client's over stdio.
func (t *SessionTable) Ended(span SessionSpan) {
	if t.ended != nil {
		t.ended(span)
	}
}

// unlock lets go of the lock, then tells the ended hook of the sessions
// dropped meanwhile, so that the hook may take its time.
func (t *SessionTable) unlock() {
	gone := t.gone
	t.gone = nil
	t.mu.Unlock()
	if t.ended == nil {
		return
	}
	end := time.Now()
	for _, s := range gone {
		t.ended(SessionSpan{ID: s.id, Principal: s.principal, ProtocolVersion: s.version, Transport: "tcp", Start: s.start, End: end})
	}
}

func (t *SessionTable) dropLocked(s *Session) {
	if t.ended != nil {
		t.gone = append(t.gone, s)
	}
	s.timer.Stop()
	delete(t.byID, s.id)
	l := t.byPrincipal[s.principal]
	l.Remove(s.elem)
	if l.Len() == 0 {
		delete(t.byPrincipal, s.principal)
	}
}

// CloseAll closes every session, for a registry that is closing; sessions
// opened afterwards are closed at once.
func (t *SessionTable) CloseAll() {
	t.mu.Lock()
	t.closed = true
	all := make([]*Session, 0, len(t.byID))
	for _, s := range t.byID {
		t.dropLocked(s)
		all = append(all, s)
	}
	t.unlock()
	for _, s := range all {
		go s.ss.Close()
	}
}

// Len returns how many sessions are open, for tests.
func (t *SessionTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// Get returns the session with that id, nil when there is none.
func (t *SessionTable) Get(id string) *Session {
	if id == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// CallSet is the calls in progress that carmy answers for one connection
// or session, by request id, for notifications/cancelled.
type CallSet struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]context.CancelFunc
}

// Add records a call; false when a call with that id is in progress.
func (s *CallSet) Add(id jsonrpc.ID, cancel context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.m[id]; dup {
		return false
	}
	if s.m == nil {
		s.m = map[jsonrpc.ID]context.CancelFunc{}
	}
	s.m[id] = cancel
	return true
}

// Remove forgets a call that ended.
func (s *CallSet) Remove(id jsonrpc.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// Cancel cancels the call that the params of a notifications/cancelled
// name, if it is one of the set's.
func (s *CallSet) Cancel(params []byte) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if jsonv2.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	s.mu.Lock()
	cancel := s.m[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// ServerSession is the SDK's session that s records.
func (s *Session) ServerSession() *mcp.ServerSession { return s.ss }
