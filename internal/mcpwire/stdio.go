package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves MCP over newline-delimited JSON streams, as the
// SDK's IOTransport does, and survives what its client sends: a line that
// is not a message (malformed, a member name twice, longer than the limit)
// gets a JSON-RPC error and the server reads on. When the input ends, the
// requests already read are answered before the connection closes.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// Limit is the largest line read, in bytes.
	Limit int64
	// Logger records read errors of In.
	Logger *slog.Logger
}

// Connect starts reading t.In; the SDK serves the connection it returns.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	out := &lockedWriter{w: t.Out}
	lines := &lineFilter{r: bufio.NewReaderSize(t.In, 64<<10), out: out, limit: t.Limit, logger: t.Logger}
	// The filter bounds every line; the SDK's cap would count read-ahead.
	inner, err := (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: out, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &StdioConn{Connection: inner, out: out, lines: lines, stop: ctx.Done(), changed: make(chan struct{}), closed: make(chan struct{})}, nil
}

// lockedWriter writes one message at a time: the SDK's answers and the
// filter's error answers share the stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close does not close the stream, which is the caller's.
func (l *lockedWriter) Close() error { return nil }

// answer writes an error that belongs to no request.
func (l *lockedWriter) answer(e *jsonrpc.Error) {
	_, _ = l.Write(append(OrphanError(e), '\n'))
}

// lineFilter passes on the lines of its input that are messages, each
// ending in a newline, and answers the others itself. A read error ends
// the input as its end does, and is logged.
type lineFilter struct {
	r       *bufio.Reader
	out     *lockedWriter
	limit   int64
	logger  *slog.Logger
	buf     []byte
	pending []byte // what is left of the current message
	err     error  // the end of the input, once reached
	// fast, when set, answers a message itself and reports whether it did.
	fast atomic.Pointer[func(line []byte) bool]
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.pending = f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next returns the next message, or nil once the input ended.
func (f *lineFilter) next() []byte {
	for f.err == nil {
		line, tooLong, err := f.readLine()
		if err != nil {
			if err != io.EOF {
				f.logger.Warn("carmy: reading MCP messages", "error", err)
			}
			f.err = io.EOF
		}
		switch {
		case tooLong:
			f.out.answer(TooLargeError(f.limit))
		case len(bytes.Trim(line, " \t\r")) == 0:
		default:
			if e := CheckMessage(line); e != nil {
				f.out.answer(e)
				continue
			}
			if fast := f.fast.Load(); fast != nil && (*fast)(line) {
				continue
			}
			if ans := ParamsAnswer(line); ans != nil {
				_, _ = f.out.Write(append(ans, '\n'))
				continue
			}
			return append(line, '\n')
		}
	}
	return nil
}

// readLine reads a line without its line ending, keeping at most the
// limit in memory: the rest of a longer line is read and dropped.
func (f *lineFilter) readLine() (line []byte, tooLong bool, err error) {
	f.buf = f.buf[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if !tooLong {
			f.buf = append(f.buf, chunk...)
			// Room for "\r\n" after a message of the limit's size.
			tooLong = int64(len(f.buf)) > f.limit+2
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(f.buf, []byte("\n")), []byte("\r"))
		tooLong = tooLong || int64(len(line)) > f.limit
		if tooLong {
			f.buf, line = f.buf[:0], nil
		}
		return line, tooLong, err
	}
}

// StdioConn is the connection of a [StdioTransport]. It counts the requests read and not yet answered, so that the
// end of the input closes the connection only once they are answered. It
// does not wait for what cannot come: once the server asks the client
// something (an elicitation), whose answer would have to come from the
// closed input, it ends at once.
type StdioConn struct {
	mcp.Connection
	out   *lockedWriter
	lines *lineFilter
	// stop is the end of serving: the context that reads get is not
	// cancelled with it.
	stop <-chan struct{}

	mu       sync.Mutex
	incoming int           // requests read, not yet answered
	outgoing int           // requests sent to the client, not yet answered
	changed  chan struct{} // closed and replaced at every change of the counts
	closed   chan struct{}
	once     sync.Once
}

// Read reads the next message the SDK takes, answering those it cannot.
func (c *StdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if m.IsCall() {
				c.count(&c.incoming, 1)
			}
		case *jsonrpc.Response:
			c.count(&c.outgoing, -1)
		}
		if err == nil {
			return msg, nil
		}
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			c.drain(ctx)
			return nil, err
		}
		// A line that is JSON but not a message the SDK takes (not
		// JSON-RPC, a batch its protocol version no longer has): the SDK
		// has read it whole, so the connection can go on.
		c.out.answer(&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "Invalid request: " + err.Error()})
	}
}

// Write writes msg, counting the requests answered and asked.
func (c *StdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.count(&c.incoming, -1)
	case *jsonrpc.Request:
		if m.IsCall() {
			c.count(&c.outgoing, 1)
		}
	}
	return err
}

// Close closes the connection, ending a drain under way.
func (c *StdioConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

func (c *StdioConn) count(n *int, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n += delta
	close(c.changed)
	c.changed = make(chan struct{})
}

// drain waits until every request read is answered, the server waits for
// the client, the connection closes or serving stops.
func (c *StdioConn) drain(ctx context.Context) {
	for {
		c.mu.Lock()
		done, changed := c.incoming <= 0 || c.outgoing > 0, c.changed
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-c.closed:
			return
		case <-c.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// SetFast has fast see each line that passed the checks before the SDK
// does; when it reports true it has answered the line itself (through
// [StdioConn.WriteLine]) and the SDK never reads it.
func (c *StdioConn) SetFast(fast func(line []byte) bool) { c.lines.fast.Store(&fast) }

// StartRequest counts a request that fast took, so that the end of the
// input waits for its answer as for the SDK's; [StdioConn.EndRequest]
// counts it answered.
func (c *StdioConn) StartRequest() { c.count(&c.incoming, 1) }

// EndRequest counts a request started by [StdioConn.StartRequest] as
// answered.
func (c *StdioConn) EndRequest() { c.count(&c.incoming, -1) }

// WriteLine writes one message, b, and its line ending.
func (c *StdioConn) WriteLine(b []byte) { _, _ = c.out.Write(append(b, '\n')) }
