package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Keys of the auth.TokenInfo that the HTTP handler hands the SDK with each
// request, which the SDK passes on to handlers: the identity the handler
// authenticated, and the request, whose context ends when the client goes
// away.
const (
	infoIdentity = "carmy/identity"
	infoRequest  = "carmy/request"
)

type tokenInfoKey struct{}

// httpCaller is the identity the HTTP handler authenticated for the
// request a handler serves, and that request.
func httpCaller(extra *mcp.RequestExtra) (Identity, *http.Request, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return Identity{}, nil, false
	}
	id, ok := extra.TokenInfo.Extra[infoIdentity].(Identity)
	req, _ := extra.TokenInfo.Extra[infoRequest].(*http.Request)
	return id, req, ok
}

// tokenInfo is the identity that the HTTP handler put in the request's
// context, in the form the SDK hands tool handlers.
func tokenInfo(ctx context.Context) *auth.TokenInfo {
	info, _ := ctx.Value(tokenInfoKey{}).(*auth.TokenInfo)
	return info
}

// HTTPHandler serves MCP over streamable HTTP. It authenticates every
// request and checks a message strictly before the SDK sees it, binds
// each session to the principal that opened it, and cancels a call when
// its client goes away.
func (s *Server) HTTPHandler() http.Handler {
	// Both serve the same server: sessions for the protocol versions that
	// have them, and the stateless path, the only one on which the SDK
	// serves the sessionless protocol.
	stateful, stateless := s.sdkHandler(false), s.sdkHandler(true)
	limit := s.cfg.BodyLimit
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, ok := s.host.Authenticate(w, req)
		if !ok {
			return
		}
		// A body of another type is the SDK's to refuse (415), unread.
		var body []byte
		if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); req.Method == http.MethodPost && mt == "application/json" {
			var status int
			var rpcErr *jsonrpc.Error
			body, status, rpcErr = mcpwire.ReadMessage(http.MaxBytesReader(w, req.Body, limit), limit)
			if rpcErr != nil {
				mcpwire.WriteRPCError(w, status, rpcErr)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		info := &auth.TokenInfo{
			// Prefixed, so that the anonymous principal "" binds too.
			UserID: "principal:" + id.Principal,
			Extra:  map[string]any{infoIdentity: id, infoRequest: req},
		}
		ctx := context.WithValue(req.Context(), tokenInfoKey{}, info)
		if req.Method == http.MethodGet && s.cfg.Streams != nil { // a stream that lasts until the client or the server ends it
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(s.cfg.Streams, cancel)()
		}
		req = req.WithContext(ctx)
		req.Header.Set("Authorization", "Bearer carmy")
		if mcpwire.IsSessionlessRequest(req, body) {
			if s.mirrored.Load() && body != nil && !s.headersMatch(w, req, body) {
				return
			}
			if body != nil && (s.taskRequest(w, req, body) || s.skillsHTTP(w, req, body, true)) {
				return
			}
			if s.fast && body != nil && s.sessionlessCall(w, req, body) {
				return
			}
			paramsChecked(stateless, body).ServeHTTP(w, req)
			return
		}
		s.serveSession(w, req, id.Principal, s.taskStreamed(s.sessionHandler(paramsChecked(stateful, body), body)))
	})
}

// headersMatch checks the Mcp-Param- headers of a tools/call of the
// sessionless protocol against its arguments (mcpwire.CheckParamHeaders)
// before anything runs, and answers a mismatch itself: 400, with the
// protocol's header mismatch error. It reports whether the request may go
// on.
func (s *Server) headersMatch(w http.ResponseWriter, req *http.Request, body []byte) bool {
	var msg struct {
		ID     jsontext.Value `json:"id"`
		Method string         `json:"method"`
		Params struct {
			Name      string         `json:"name"`
			Arguments jsontext.Value `json:"arguments"`
		} `json:"params"`
	}
	if req.Method != http.MethodPost || jsonv2.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || len(msg.ID) == 0 {
		return true // the SDK answers what is not a call
	}
	t, ok := s.table()[msg.Params.Name]
	if !ok || t.headers == nil {
		return true
	}
	rpcErr := mcpwire.CheckParamHeaders(req.Header, t.headers, msg.Params.Arguments)
	if rpcErr == nil {
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(mcpwire.RPCAnswer(json.RawMessage(msg.ID), rpcErr))
	return false
}

// sdkHandler is the SDK's streamable HTTP handler of the server, stateless
// or not, behind the checks of HTTPHandler. The identity reaches handlers
// as the SDK's auth.TokenInfo, whose UserID the SDK also binds a session
// to. Its middleware insists on a bearer header, which it gets; the
// caller's own credential has already been checked and goes no further.
func (s *Server) sdkHandler(stateless bool) http.Handler {
	// A session's event streams carry event ids, kept in memory (10 MiB
	// at most, the oldest dropped first), so that a client whose stream is
	// cut in the middle of a call resumes it with Last-Event-ID, on this
	// host, and gets the answer rather than lose it. The sessionless
	// protocol has no resumption.
	var events mcp.EventStore
	if !stateless {
		events = mcp.NewMemoryEventStore(nil)
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk }, &mcp.StreamableHTTPOptions{
		EventStore: events,
		Stateless:  stateless,
		Logger:     s.logger(),
		// The host checks the Host itself, with the names it allows, and
		// bounds the body by its limit, on every route.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        -1,
	})
	return auth.RequireBearerToken(func(_ context.Context, _ string, req *http.Request) (*auth.TokenInfo, error) {
		if info := tokenInfo(req.Context()); info != nil {
			return info, nil
		}
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
}

// paramsChecked refuses a message whose params the SDK cannot read, in
// the protocol's words (mcpwire.ParamsAnswer), before next serves it.
// carmy's own answers read the params strictly, and take none that the SDK
// could not read: they need no such check first.
func paramsChecked(next http.Handler, body []byte) http.Handler {
	if body == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if ans := mcpwire.ParamsAnswer(body); ans != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(ans)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// serveSession lets only a session's own principal use it: another
// principal's POST, GET or DELETE gets 404, the answer for a session that
// does not exist, so that a request learns nothing about other
// principals' sessions. It counts the request as activity of the session.
func (s *Server) serveSession(w http.ResponseWriter, req *http.Request, principal string, next http.Handler) {
	id := req.Header.Get("Mcp-Session-Id")
	if id == "" {
		next.ServeHTTP(w, req)
		return
	}
	ss, ok := s.cfg.Sessions.Acquire(id, principal)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if ss == nil {
		next.ServeHTTP(w, req)
		return
	}
	defer s.cfg.Sessions.Release(ss)
	next.ServeHTTP(w, req)
	if req.Method == http.MethodDelete {
		s.cfg.Sessions.Forget(ss)
	}
}

// sessionlessCall answers a tools/call of the sessionless protocol itself,
// when nothing in it needs the SDK's machinery: the SDK's stateless path
// makes and closes a session for every request and decodes the message
// several times, which costs more than the call. It takes only a call that
// the SDK would serve the same way, with the same result: every header and
// _meta key the protocol requires present and consistent, a tool of the
// host's, nothing that streams (no progress token, no log level: the SDK
// sends no log message without one), no confirmation to ask for, and a
// server the host did not configure (its middleware would see nothing). It
// returns false, having written nothing, for every other request, which
// the SDK serves or refuses.
func (s *Server) sessionlessCall(w http.ResponseWriter, req *http.Request, body []byte) bool {
	h := req.Header
	if req.Method != http.MethodPost || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Protocol-Version") != mcpwire.SessionlessProtocol ||
		!mcpwire.AcceptsBoth(h.Values("Accept")) {
		return false
	}
	if !mcpwire.NoParamHeaders(h) {
		return false
	}
	var msg struct {
		JSONRPC string                 `json:"jsonrpc"`
		ID      jsontext.Value         `json:"id"`
		Method  string                 `json:"method"`
		Params  *mcp.CallToolParamsRaw `json:"params"`
	}
	// mcpwire.CheckMessage has made sure the body is one JSON value with no
	// member name twice; this decoder, like the SDK's, matches names
	// exactly.
	if jsonv2.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "tools/call" || msg.Params == nil {
		return false
	}
	if len(msg.ID) == 0 || (msg.ID.Kind() != '"' && msg.ID.Kind() != '0') {
		return false
	}
	p := msg.Params
	meta := p.Meta
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != mcpwire.SessionlessProtocol {
		return false
	}
	if _, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any); !ok {
		return false
	}
	//lint:ignore SA1019 a log level in the request asks for log messages, which the SDK's path streams
	if meta["progressToken"] != nil || meta[mcp.MetaKeyLogLevel] != nil || h.Get("Mcp-Name") != p.Name {
		return false
	}
	t, ok := s.table()[p.Name]
	if !ok || t.Confirms {
		return false
	}
	ctx := req.Context()
	res, err := s.serveCall(ctx, t, &mcp.CallToolRequest{Params: p, Extra: &mcp.RequestExtra{TokenInfo: tokenInfo(ctx), Header: h}}, true, msg.ID)
	if err != nil { // a protocol error: the call ran no further
		rpcErr := rpcError(err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(mcpwire.ErrorStatus(rpcErr.Code))
		_, _ = w.Write(mcpwire.RPCAnswer(json.RawMessage(msg.ID), rpcErr))
		return true
	}
	out, err := mcpwire.SessionlessResult(res, s.info)
	if err != nil {
		return false
	}
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(msg.ID)
	b.WriteString(`,"result":`)
	b.Write(out)
	b.WriteString("}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
	return true
}

// sessionHandler serves the POST, GET and DELETE requests of the
// session-based protocol: the experimental tasks' requests, which the SDK
// refuses, and a tools/call of a live session that streams nothing carmy
// answers itself (sessionTaskHTTP, sessionCall), the rest the SDK's
// stateful handler, next.
func (s *Server) sessionHandler(next http.Handler, body []byte) http.Handler {
	if body == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if s.sessionTaskHTTP(w, req, body) || s.skillsHTTP(w, req, body, false) {
			return
		}
		if !s.fast || !s.sessionCall(w, req, body) {
			next.ServeHTTP(w, req)
		}
	})
}

// sessionCall answers a tools/call of a session over HTTP itself, as the
// SDK's session would, with one strict decode of the message, the call,
// and one encode of its result, in JSON (a client of streamable HTTP takes
// JSON or an event stream). It takes only a call that sends the client
// nothing before its result, because the SDK's session sends what a call
// streams on that call's own response, which only its own path knows: no
// progress token, a client that cannot elicit (confirmation and a tool's
// questions ask through elicitation), a session whose client never set a
// log level (the SDK sends no log message before). It also notes what
// later calls of the session need: a log level set, a call cancelled. It
// returns false, having written nothing, for every request the SDK must
// serve.
func (s *Server) sessionCall(w http.ResponseWriter, req *http.Request, body []byte) bool {
	h := req.Header
	ses := s.cfg.Sessions.Get(h.Get("Mcp-Session-Id"))
	if ses == nil || req.Method != http.MethodPost {
		return false
	}
	switch {
	case bytes.Contains(body, []byte(`"logging/setLevel"`)):
		ses.Logs.Store(true)
		return false
	case bytes.Contains(body, []byte(`"notifications/cancelled"`)):
		var msg struct {
			Method string         `json:"method"`
			Params jsontext.Value `json:"params"`
		}
		if jsonv2.Unmarshal(body, &msg) == nil && msg.Method == "notifications/cancelled" {
			ses.Calls.Cancel(msg.Params)
		}
		return false
	case ses.Logs.Load() || !bytes.Contains(body, []byte(`"tools/call"`)):
		return false
	}
	init := ses.ServerSession().InitializeParams()
	if init == nil || init.ProtocolVersion >= mcpwire.SessionlessProtocol || h.Get("Mcp-Protocol-Version") != init.ProtocolVersion ||
		(init.Capabilities != nil && init.Capabilities.Elicitation != nil) ||
		!mcpwire.AcceptsBoth(h.Values("Accept")) || len(h.Values("Last-Event-Id")) > 0 || !mcpwire.NoParamHeaders(h) {
		return false
	}
	msg, ok := s.readCall(ses.ServerSession(), body)
	p := msg.params
	if !ok || msg.sessionless || p.Meta["progressToken"] != nil || !mcpwire.HeaderIs(h, "Mcp-Method", "tools/call") || !mcpwire.HeaderIs(h, "Mcp-Name", p.Name) {
		return false
	}
	id := msg.id
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if !ses.Calls.Add(id, cancel) {
		return false
	}
	defer ses.Calls.Remove(id)
	s.answered.Add(1)
	res, err := s.serveCall(ctx, s.table()[p.Name], &mcp.CallToolRequest{Session: ses.ServerSession(), Params: p, Extra: &mcp.RequestExtra{TokenInfo: tokenInfo(ctx), Header: h}}, true, msg.rawID)
	var out []byte
	if err == nil {
		out, err = s.callResult(res, false)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	if err != nil {
		_, _ = w.Write(mcpwire.RPCAnswer([]byte(msg.rawID), rpcError(err)))
		return true
	}
	_, _ = w.Write(mcpwire.RPCResult(msg.rawID, out))
	return true
}

// rpcRequest is a JSON-RPC request that carmy answers itself, read from
// an HTTP body.
type rpcRequest struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  string         `json:"method"`
	Params  jsontext.Value `json:"params"`
}

// readRequest reads body as a JSON-RPC 2.0 request with an id; false for
// anything else, which the SDK answers.
func readRequest(body []byte) (rpcRequest, bool) {
	var msg rpcRequest
	ok := jsonv2.Unmarshal(body, &msg) == nil && msg.JSONRPC == "2.0" && len(msg.ID) != 0
	return msg, ok
}

// writeAnswer writes the JSON answer to the request of id: result, or
// rpcErr with its HTTP status when status is set (the sessionless
// protocol's), and reports that it did.
func writeAnswer(w http.ResponseWriter, id jsontext.Value, result any, rpcErr *jsonrpc.Error, status bool) bool {
	w.Header().Set("Content-Type", "application/json")
	if rpcErr != nil {
		if status {
			w.WriteHeader(mcpwire.ErrorStatus(rpcErr.Code))
		}
		_, _ = w.Write(mcpwire.RPCAnswer(json.RawMessage(id), rpcErr))
		return true
	}
	b, err := json.Marshal(result)
	if err != nil {
		_, _ = w.Write(mcpwire.RPCAnswer(json.RawMessage(id), rpcError(err)))
		return true
	}
	_, _ = w.Write(mcpwire.RPCResult(id, b))
	return true
}
