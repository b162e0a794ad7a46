package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// The SDK decodes a tool's schemas and a call's structured result into
// Go maps, which lose the upstream's key order and the exactness of large
// integers. The wire taps here see the JSON-RPC messages as the upstream
// wrote them, so that a mount publishes the upstream's schemas byte for
// byte and hands on its results unchanged; and they see when a call's
// request has left carmy, which decides whether a lost answer is a call
// that never happened or one whose outcome is unknown.

// wireMessage is the part of a JSON-RPC message the taps read.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
}

// wireTool is a tool of a tools/list result as the upstream wrote it.
type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Execution    json.RawMessage `json:"execution"`
}

// tap is one connection's view of the wire, shared by the client.
type tap struct {
	c *Client
}

// outgoing reads one message carmy sends: a tools/call names its call by
// the progress token carmy gave it, which ties the JSON-RPC id to it.
func (t tap) outgoing(line []byte) *call {
	if !bytes.Contains(line, []byte(`"tools/call"`)) {
		return nil
	}
	var m wireMessage
	if json.Unmarshal(line, &m) != nil || m.Method != "tools/call" || m.Params.Meta.ProgressToken == nil {
		return nil
	}
	return t.c.bindCall(string(m.Params.Meta.ProgressToken), string(m.ID))
}

// incoming reads one message from the upstream: the raw result of a call
// in flight, the raw tools of a tools/list result, and a log message,
// handed to the call whose response stream carried it (on, nil over
// stdio) before the call's result is. The SDK would hand it over on a
// goroutine of its own, after the result at times.
func (t tap) incoming(line []byte, on *call) {
	if bytes.Contains(line, []byte(`"notifications/message"`)) {
		t.c.logLine(line, on)
		return
	}
	if bytes.Contains(line, []byte(rpcPrefix)) && t.c.answered(line) {
		return
	}
	if !bytes.Contains(line, []byte(`"result"`)) {
		return
	}
	var m wireMessage
	if json.Unmarshal(line, &m) != nil || m.Result == nil || m.ID == nil {
		return
	}
	if t.c.resultOf(string(m.ID), m.Result) {
		return
	}
	if bytes.Contains(m.Result, []byte(`"protocolVersion"`)) {
		t.c.initialized(m.Result)
		return
	}
	if !bytes.Contains(m.Result, []byte(`"tools"`)) {
		return
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(m.Result, &list) != nil {
		return
	}
	for _, raw := range list.Tools {
		var wt wireTool
		if json.Unmarshal(raw, &wt) == nil && wt.Name != "" {
			t.c.rawTool(wt)
		}
	}
}

// lineReader passes a stdio server's output on to the SDK, showing each
// line to the tap once it is whole. A line longer than max is not kept.
type lineReader struct {
	r    io.ReadCloser
	tap  tap
	max  int
	line []byte
	over bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	data := p[:n]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			l.keep(data)
			break
		}
		l.keep(data[:i])
		if !l.over {
			l.tap.incoming(l.line, nil)
		}
		l.line, l.over = l.line[:0], false
		data = data[i+1:]
	}
	return n, err
}

func (l *lineReader) keep(b []byte) {
	if l.over || len(l.line)+len(b) > l.max {
		l.over, l.line = true, l.line[:0]
		return
	}
	l.line = append(l.line, b...)
}

func (l *lineReader) Close() error { return l.r.Close() }

// lineWriter passes the SDK's messages to a stdio server: one message per
// Write, which the SDK's stdio connection does. A call is sent once its
// message was written whole.
type lineWriter struct {
	w   io.WriteCloser
	tap tap
	mu  sync.Mutex // carmy's own requests go between the SDK's messages
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.tap.outgoing(p)
	n, err := l.w.Write(p)
	if c != nil && n > 0 {
		c.markSent()
	}
	return n, err
}

func (l *lineWriter) Close() error { return l.w.Close() }

// roundTripper taps the streamable HTTP transport: the request bodies
// carmy sends, and the responses, whether one JSON document or a stream
// of server-sent events.
type roundTripper struct {
	base    http.RoundTripper
	tap     tap
	headers http.Header
	max     int
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range rt.headers {
		req.Header[k] = v
	}
	var c *call
	own, mine := req.Context().Value(ownKey{}).(*call) // a request carmy sent itself
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		c = rt.tap.outgoing(body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
		if c == nil && !mine {
			// Anything but a tool call may be sent again when a kept-alive
			// connection turns out closed (Node servers close idle ones): a
			// nil Idempotency-Key tells Go's transport so, and is not sent.
			req.Header["Idempotency-Key"] = nil
		}
	}
	resp, err := rt.base.RoundTrip(req)
	if c != nil && (err == nil || !neverSent(err)) {
		c.markSent()
	}
	if err != nil {
		return nil, err
	}
	e := &eventReader{r: resp.Body, tap: rt.tap, max: rt.max, sse: isEventStream(resp.Header), call: c, own: mine}
	if mine && c == nil {
		e.call = own
	}
	resp.Body = e
	return resp, nil
}

// neverSent reports an HTTP failure that happened before a byte of the
// request left: the upstream could not be reached at all.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}

// eventReader shows the tap each message of a response body: the body
// itself for JSON, each event's data for a stream.
type eventReader struct {
	r    io.ReadCloser
	call *call // the call whose request this answers; nil for another
	own  bool  // the answer to a request carmy sent itself, not the SDK
	tap  tap
	max  int
	sse  bool
	buf  []byte
	data []byte
	over bool
	once sync.Once
}

func (e *eventReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if !e.over {
		if len(e.buf)+n > e.max {
			e.over, e.buf = true, nil
		} else {
			e.buf = append(e.buf, p[:n]...)
		}
	}
	if e.sse && !e.over {
		e.events()
	}
	if err == io.EOF && !e.sse && !e.over {
		e.once.Do(func() { e.deliver(e.buf) })
	}
	return n, err
}

// events dispatches each whole event in the buffer: its data lines joined.
func (e *eventReader) events() {
	consumed := 0
	for {
		i := bytes.IndexByte(e.buf[consumed:], '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(e.buf[consumed:consumed+i], []byte("\r"))
		consumed += i + 1
		switch {
		case len(line) == 0:
			if len(e.data) > 0 {
				e.deliver(e.data)
				e.data = e.data[:0]
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	e.buf = append(e.buf[:0], e.buf[consumed:]...)
}

// deliver shows the tap one message; on a stream of carmy's own, nobody
// else serves the upstream's requests and progress, and carmy does.
func (e *eventReader) deliver(msg []byte) {
	e.tap.incoming(msg, e.call)
	if e.own {
		e.tap.c.served(msg, e.call)
	}
}

func (e *eventReader) Close() error { return e.r.Close() }
