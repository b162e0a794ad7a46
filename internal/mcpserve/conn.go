package mcpserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Serve serves one session over t, with the identity of a single-client
// transport, until ctx is done or the client closes the connection; it
// returns nil then.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	// Not mcp.Server.Run, which logs an error when ctx ends, the usual way
	// to stop serving.
	ft := &fastTransport{Transport: t, s: s}
	start := time.Now()
	ss, err := s.sdk.Connect(ctx, ft, nil)
	if err != nil {
		return err
	}
	ft.conn.serve(ss)
	defer ft.conn.wait()
	if s.cfg.Sessions != nil {
		defer s.sessionEnded(ss, start)
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return nil
	case err := <-ended:
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}

// sessionEnded tells the host of a session Serve served, once it ends: a
// session the client initialized (a sessionless client's connection is
// none).
func (s *Server) sessionEnded(ss *mcp.ServerSession, start time.Time) {
	init := ss.InitializeParams()
	if init == nil {
		return
	}
	s.cfg.Sessions.Ended(SessionSpan{ID: ss.ID(), Principal: s.cfg.Stdio.Principal, ProtocolVersion: init.ProtocolVersion,
		Transport: "pipe", Start: start, End: time.Now()})
}

// fastTransport is a transport of Serve whose connection answers
// tools/call itself: the SDK's JSON-RPC server reads each request's params
// several times, with a new decoder each time, and costs more than the
// call. Every other message, and every call the SDK would not serve the
// same way, goes on to the SDK, which keeps the session: its
// initialization, its log level, the requests the server sends (an
// elicitation asked during a call answered here included).
type fastTransport struct {
	mcp.Transport
	s    *Server
	conn *fastConn
}

func (t *fastTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	inner, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &fastConn{Connection: inner, s: t.s, base: base, stop: cancel, ready: make(chan struct{})}
	if sc, ok := inner.(*mcpwire.StdioConn); ok {
		sc.SetFast(func(line []byte) bool { return c.rawCall(sc, line) })
	}
	t.conn = c
	return c, nil
}

// fastConn is the connection of a fastTransport.
type fastConn struct {
	mcp.Connection
	s *Server
	// ss is the session the SDK made of this connection; until it is known,
	// every message goes to the SDK.
	ss atomic.Pointer[mcp.ServerSession]
	// ready is closed once ss is known. Nothing is read before: the SDK
	// starts reading before Connect returns the session, and could answer
	// the first message before then, so that a call sent on that answer
	// would be read while ss is still unknown and go to the SDK.
	ready chan struct{}
	// base is the context of the calls answered here, cancelled when the
	// connection closes.
	base context.Context
	stop context.CancelFunc

	calls   mcpwire.CallSet
	running sync.WaitGroup
}

// serve starts answering calls of session ss.
func (c *fastConn) serve(ss *mcp.ServerSession) {
	c.ss.Store(ss)
	close(c.ready)
}

func (c *fastConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			return msg, nil
		}
		if c.sessionTask(req) || c.sessionlessTask(req) || c.skills(req) {
			continue
		}
		switch req.Method {
		case "tools/call":
			if req.IsCall() && c.call(req) {
				continue
			}
		case "notifications/cancelled":
			// The SDK ignores a cancellation of a request it does not know.
			c.calls.Cancel(req.Params)
		}
		return msg, nil
	}
}

// Close cancels the calls in progress, as the end of the connection
// cancels the SDK's: their client is gone, and a tool that asked it
// something waits for an answer that cannot come. The SDK calls Close
// under a lock that a call sending a request takes, so Close cannot wait
// for them: Serve does (wait).
func (c *fastConn) Close() error {
	c.stop()
	return c.Connection.Close()
}

// wait waits for the calls in progress to return.
func (c *fastConn) wait() { c.running.Wait() }

// call answers a tools/call that the SDK's connection decoded, when the
// SDK would serve it the same way. It returns false, having done nothing,
// for a call the SDK must serve or refuse.
func (c *fastConn) call(req *jsonrpc.Request) bool {
	ss := c.ss.Load()
	if ss == nil {
		return false
	}
	p, sessionless, ok := c.s.fastParams(ss, req.Params)
	if !ok {
		return false
	}
	return c.start(ss, req.ID, nil, p, sessionless, func(ctx context.Context, result []byte, err error) {
		ans := &jsonrpc.Response{ID: req.ID, Result: result}
		if err != nil {
			ans.Result, ans.Error = nil, rpcError(err)
		}
		_ = c.Connection.Write(ctx, ans)
	})
}

// rawCall answers a line of a stdio connection that is a tools/call the
// SDK would serve the same way, before the SDK reads it: one strict decode
// of the message, and the answer written as the SDK writes it. It returns
// false, having done nothing, for any other line.
func (c *fastConn) rawCall(sc *mcpwire.StdioConn, line []byte) bool {
	ss := c.ss.Load()
	if ss == nil || !bytes.Contains(line, []byte(`"tools/call"`)) {
		return false
	}
	msg, ok := c.s.readCall(ss, line)
	if !ok {
		return false
	}
	id, p, sessionless := msg.id, msg.params, msg.sessionless
	// The end of the input waits for this answer, as for the SDK's.
	sc.StartRequest()
	started := c.start(ss, id, msg.rawID, p, sessionless, func(_ context.Context, result []byte, err error) {
		var b []byte
		if err != nil {
			b = mcpwire.RPCAnswer([]byte(msg.rawID), rpcError(err))
		} else {
			b = mcpwire.RPCResult(msg.rawID, result)
		}
		sc.WriteLine(b)
		sc.EndRequest()
	})
	if !started {
		sc.EndRequest()
	}
	return started
}

// start runs a call answered here in a goroutine of its own (a tool that
// elicits waits for an answer that comes in through Read), cancellable by
// its id, and hands its result to answer; raw is the id as sent, nil when
// the SDK decoded the request. It returns false, having done
// nothing, when a call with that id is in progress already.
func (c *fastConn) start(ss *mcp.ServerSession, id jsonrpc.ID, raw jsontext.Value, p *mcp.CallToolParamsRaw, sessionless bool, answer func(context.Context, []byte, error)) bool {
	t := c.s.table()[p.Name]
	ctx, cancel := context.WithCancel(c.base)
	if !c.calls.Add(id, cancel) {
		cancel()
		return false
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		defer c.calls.Remove(id)
		defer cancel()
		c.s.answered.Add(1)
		res, err := c.s.serveCall(ctx, t, &mcp.CallToolRequest{Session: ss, Params: p}, false, raw)
		var result []byte
		if err == nil {
			result, err = c.s.callResult(res, sessionless)
		}
		answer(ctx, result, err)
	}()
	return true
}

// callMessage is a tools/call that carmy may answer, read strictly once.
type callMessage struct {
	rawID       jsontext.Value // the request id as sent
	id          jsonrpc.ID
	params      *mcp.CallToolParamsRaw
	sessionless bool // a call of the sessionless protocol
}

// readCall reads a message of session ss, and reports whether it is a
// tools/call that carmy may answer as the SDK would (fastParams), with an
// id it writes back as the SDK would (plainID).
func (s *Server) readCall(ss *mcp.ServerSession, data []byte) (callMessage, bool) {
	var msg struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Method  string         `json:"method"`
		Params  jsontext.Value `json:"params"`
	}
	if jsonv2.Unmarshal(data, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "tools/call" {
		return callMessage{}, false
	}
	id, ok := plainID(msg.ID)
	if !ok {
		return callMessage{}, false
	}
	p, sessionless, ok := s.fastParams(ss, msg.Params)
	return callMessage{rawID: msg.ID, id: id, params: p, sessionless: sessionless}, ok
}

// Answered returns how many calls of a session the server has answered
// itself rather than through the SDK, for tests.
func (s *Server) Answered() int64 { return s.answered.Load() }

// plainID is a request id that carmy writes back byte for byte as the SDK
// would: a string of printable characters that JSON and HTML escaping
// leave alone, or an integer a float64 holds exactly (the SDK reads ids as
// float64).
func plainID(raw jsontext.Value) (jsonrpc.ID, bool) {
	switch raw.Kind() {
	case '"':
		s := raw[1 : len(raw)-1]
		for _, b := range s {
			if b < ' ' || b > '~' || b == '\\' || b == '"' || b == '<' || b == '>' || b == '&' {
				return jsonrpc.ID{}, false
			}
		}
		id, err := jsonrpc.MakeID(string(s))
		return id, err == nil
	case '0':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > 1<<53 || n < -(1<<53) || strconv.FormatInt(n, 10) != string(raw) {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(float64(n))
		return id, err == nil
	}
	return jsonrpc.ID{}, false
}

// fastParams reads the params of a tools/call once, strictly, and reports
// whether carmy may answer it as the SDK would: a tool of the host's, a
// server the host did not configure (its middleware would see nothing),
// a session already initialized in the call's generation (the SDK refuses
// a session-based call before initialize, and takes the first sessionless
// call of a connection as its initialization), and, for the sessionless
// protocol, the _meta that protocol requires present and consistent, and
// no log level (the SDK keeps it in a context of its own, where a tool's
// Log could not find it).
func (s *Server) fastParams(ss *mcp.ServerSession, raw []byte) (p *mcp.CallToolParamsRaw, sessionless, ok bool) {
	if !s.fast || wantsTask(raw) || jsonv2.Unmarshal(raw, &p) != nil || p == nil {
		return nil, false, false
	}
	if _, known := s.table()[p.Name]; !known {
		return nil, false, false
	}
	init := ss.InitializeParams()
	if init == nil {
		return nil, false, false
	}
	meta := p.Meta
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	if v < mcpwire.SessionlessProtocol {
		return p, false, init.ProtocolVersion < mcpwire.SessionlessProtocol
	}
	if v != mcpwire.SessionlessProtocol || init.ProtocolVersion < mcpwire.SessionlessProtocol {
		return nil, false, false
	}
	if _, starts := s.startsTask(p, nil); starts { // answered with its task (sessionlessTask)
		return nil, false, false
	}
	if _, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any); !ok {
		return nil, false, false
	}
	if info, present := meta[mcp.MetaKeyClientInfo]; present {
		if _, ok := info.(map[string]any); !ok {
			return nil, false, false
		}
	}
	//lint:ignore SA1019 a log level in the request asks for log messages at that level
	if meta[mcp.MetaKeyLogLevel] != nil {
		return nil, false, false
	}
	return p, true, true
}

// callResult is a tool's result as the SDK writes it: in the sessionless
// protocol with its type and the server's identity, in a session as it is,
// never with a null content.
func (s *Server) callResult(res *mcp.CallToolResult, sessionless bool) ([]byte, error) {
	if res == nil {
		return nil, errors.New("no result")
	}
	if sessionless {
		return mcpwire.SessionlessResult(res, s.info)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res.MarshalJSON()
}

// sessionlessTask answers, in a goroutine of its own, a request of the
// tasks extension of the sessionless protocol (a tools/call that starts a
// task, tasks/get, tasks/update, tasks/cancel), read by the client
// capabilities that request declares, as over HTTP; it reports false,
// having done nothing, for any other request.
func (c *fastConn) sessionlessTask(req *jsonrpc.Request) bool {
	ss := c.ss.Load()
	tasks, ok := c.s.host.(Tasks)
	if ss == nil || !ok || !req.IsCall() || req.Method != "tools/call" && !strings.HasPrefix(req.Method, "tasks/") {
		return false
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if jsonv2.Unmarshal(req.Params, &p) != nil {
		return false
	}
	if v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string); v != mcpwire.SessionlessProtocol {
		return false
	}
	id, _ := jsonv2.Marshal(req.ID.Raw())
	door := taskDoor{caller: c.s.cfg.Stdio, call: func(p *mcp.CallToolParamsRaw) *Call {
		return &Call{Tool: p.Name, Params: p, Caller: c.s.cfg.Stdio, Authenticated: true, Session: c.s.cfg.Stdio.Session,
			Peer: newPeer(&mcp.CallToolRequest{Session: ss, Params: p}, &c.s.cfg),
			Wire: Wire{ID: id, ProtocolVersion: mcpwire.SessionlessProtocol, Transport: "pipe"}}
	}}
	// Decided before the answer: a request that is not one goes on to the
	// SDK, in order.
	if _, _, starts := c.s.taskCall(jsontext.Value(req.Params), nil); req.Method == "tools/call" && !starts {
		return false
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		res, rpcErr, _ := c.s.sessionlessTask(c.base, tasks, door, req.Method, jsontext.Value(req.Params))
		ans := &jsonrpc.Response{ID: req.ID, Result: res}
		if rpcErr != nil {
			ans.Result, ans.Error = nil, rpcErr
		}
		_ = c.Connection.Write(c.base, ans)
	}()
	return true
}
