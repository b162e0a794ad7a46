package carmy

import (
	"bytes"
	"context"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// sessionHandler serves the POST, GET and DELETE requests of the
// session-based protocol: a tools/call of a live session that streams
// nothing carmy answers itself (sessionCall), the rest the SDK's stateful
// handler, next.
func (r *Registry) sessionHandler(next http.Handler, body []byte) http.Handler {
	if body == nil || !r.mcpConfig.empty() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.sessionCall(w, req, body) {
			next.ServeHTTP(w, req)
		}
	})
}

// paramsChecked refuses a message whose params the SDK cannot read, in
// the protocol's words (mcpwire.ParamsAnswer), before next serves it. carmy's own
// answers read the params strictly, and take none that the SDK could not
// read: they need no such check first.
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
func (r *Registry) sessionCall(w http.ResponseWriter, req *http.Request, body []byte) bool {
	h := req.Header
	s := r.sessions.Get(h.Get("Mcp-Session-Id"))
	if s == nil || req.Method != http.MethodPost {
		return false
	}
	switch {
	case bytes.Contains(body, []byte(`"logging/setLevel"`)):
		s.Logs.Store(true)
		return false
	case bytes.Contains(body, []byte(`"notifications/cancelled"`)):
		var msg struct {
			Method string         `json:"method"`
			Params jsontext.Value `json:"params"`
		}
		if jsonv2.Unmarshal(body, &msg) == nil && msg.Method == "notifications/cancelled" {
			s.Calls.Cancel(msg.Params)
		}
		return false
	case s.Logs.Load() || !bytes.Contains(body, []byte(`"tools/call"`)):
		return false
	}
	init := s.ServerSession().InitializeParams()
	if init == nil || init.ProtocolVersion >= mcpwire.SessionlessProtocol || h.Get("Mcp-Protocol-Version") != init.ProtocolVersion ||
		(init.Capabilities != nil && init.Capabilities.Elicitation != nil) ||
		!mcpwire.AcceptsBoth(h.Values("Accept")) || len(h.Values("Last-Event-Id")) > 0 || !mcpwire.NoParamHeaders(h) {
		return false
	}
	msg, ok := r.readCall(s.ServerSession(), body)
	p := msg.params
	if !ok || msg.sessionless || p.Meta["progressToken"] != nil || !mcpwire.HeaderIs(h, "Mcp-Method", "tools/call") || !mcpwire.HeaderIs(h, "Mcp-Name", p.Name) {
		return false
	}
	id := msg.id
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	if !s.Calls.Add(id, cancel) {
		return false
	}
	defer s.Calls.Remove(id)
	fastAnswered.Add(1)
	res, err := r.mcpCall(r.tools[p.Name])(ctx, &mcp.CallToolRequest{Session: s.ServerSession(), Params: p, Extra: &mcp.RequestExtra{TokenInfo: tokenInfo(ctx), Header: h}})
	var out []byte
	if err == nil {
		out, err = callResult(res, false)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	if err != nil {
		_, _ = w.Write(mcpwire.RPCAnswer([]byte(msg.rawID), &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}))
		return true
	}
	_, _ = w.Write(mcpwire.RPCResult(msg.rawID, out))
	return true
}
