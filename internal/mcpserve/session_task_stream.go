package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// A session over HTTP hears of its tasks' status on its standalone GET
// stream, the one the SDK keeps for what the server sends outside a
// request. The SDK sends only the notifications it knows, and gives no
// way to reach that stream; carmy therefore wraps the stream's response
// writer as the SDK opens it, and writes each notifications/tasks/status
// there as one server-sent event, between the SDK's own events. The SDK
// writes each event in one Write, so a lock around writes and flushes
// keeps events whole. A notification made while the client holds no GET
// stream open is dropped: the protocol makes them optional, and the
// client reads the task with tasks/get.

// taskStreams are the standalone GET streams of the sessions over HTTP,
// and the lifetimes of the sessions whose tasks are watched.
type taskStreams struct {
	mu      sync.Mutex
	streams map[string]*eventStream    // by session id
	lives   map[string]context.Context // by session id: done when the session ends
}

// eventStream is the response writer of one standalone GET stream.
type eventStream struct {
	http.ResponseWriter
	sid string
	ts  *taskStreams

	mu sync.Mutex
	// open: the SDK wrote the stream's header, and its request has not
	// ended.
	open bool
}

// WriteHeader writes the header, and takes a stream the SDK opens (200,
// an event stream) as the session's: a notification waits for the lock
// until the header is out.
func (e *eventStream) WriteHeader(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	mt, _, _ := mime.ParseMediaType(e.Header().Get("Content-Type"))
	if code == http.StatusOK && mt == "text/event-stream" && !e.open {
		e.open = true
		e.ts.put(e)
	}
	e.ResponseWriter.WriteHeader(code)
}

// Write writes one of the SDK's events.
func (e *eventStream) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ResponseWriter.Write(b)
}

// FlushError flushes, as [http.ResponseController] asks.
func (e *eventStream) FlushError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return http.NewResponseController(e.ResponseWriter).Flush()
}

// send writes msg as one event, if the stream is open.
func (e *eventStream) send(msg []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.open {
		return errNoStream
	}
	buf := make([]byte, 0, len(msg)+len("event: message\ndata: \n\n"))
	buf = append(append(append(buf, "event: message\ndata: "...), msg...), "\n\n"...)
	if _, err := e.ResponseWriter.Write(buf); err != nil {
		return err
	}
	return http.NewResponseController(e.ResponseWriter).Flush()
}

// close marks the stream's request ended: nothing is written after.
func (e *eventStream) close() {
	e.mu.Lock()
	e.open = false
	e.mu.Unlock()
	e.ts.mu.Lock()
	if e.ts.streams[e.sid] == e {
		delete(e.ts.streams, e.sid)
	}
	e.ts.mu.Unlock()
}

var errNoStream = errors.New("the session holds no stream open")

func (ts *taskStreams) put(e *eventStream) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.streams == nil {
		ts.streams = map[string]*eventStream{}
	}
	ts.streams[e.sid] = e
}

// send writes a message to session sid's stream, if it has one open.
func (ts *taskStreams) send(sid string, msg []byte) error {
	ts.mu.Lock()
	e := ts.streams[sid]
	ts.mu.Unlock()
	if e == nil {
		return errNoStream
	}
	return e.send(msg)
}

// life is a context done when session ss ends, or base is done: one
// goroutine per session waits for its end, however many tasks it watches.
func (ts *taskStreams) life(base context.Context, ss *mcp.ServerSession) context.Context {
	sid := ss.ID()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ctx, ok := ts.lives[sid]; ok {
		return ctx
	}
	if ts.lives == nil {
		ts.lives = map[string]context.Context{}
	}
	ctx, cancel := context.WithCancel(base)
	ts.lives[sid] = ctx
	go func() {
		defer cancel()
		done := make(chan struct{})
		go func() { _ = ss.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
		ts.mu.Lock()
		delete(ts.lives, sid)
		ts.mu.Unlock()
	}()
	return ctx
}

// taskStreamed lets the task watchers of a session write to its
// standalone GET stream: next serves the session's requests, and a GET
// that opens the stream (not one that resumes another) is served with
// its writer wrapped.
func (s *Server) taskStreamed(next http.Handler) http.Handler {
	if _, ok := s.host.(SessionTasks); !ok {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sid := req.Header.Get("Mcp-Session-Id")
		if req.Method != http.MethodGet || sid == "" || len(req.Header.Values("Last-Event-Id")) > 0 {
			next.ServeHTTP(w, req)
			return
		}
		e := &eventStream{ResponseWriter: w, sid: sid, ts: &s.taskStreams}
		defer e.close()
		next.ServeHTTP(e, req)
	})
}

// watchSessionTask sends the client of session ses over HTTP a
// notifications/tasks/status each time its task st changes status, on the
// session's GET stream, until the task ends, the session ends, or the
// server shuts down. It returns at once; one goroutine watches.
func (s *Server) watchSessionTask(ses *mcpwire.Session, id Identity, st *TaskState) {
	base := s.cfg.Streams
	if base == nil {
		base = context.Background()
	}
	ss := ses.ServerSession()
	ctx := s.taskStreams.life(base, ss)
	sid := ss.ID()
	go s.watchTask(ctx, id, st, func(_ context.Context, n *jsonrpc.Request) error {
		msg, err := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}{"2.0", n.Method, n.Params})
		if err != nil {
			return err
		}
		_ = s.taskStreams.send(sid, msg) // none open: dropped, and the next one may find one
		return nil
	})
}
