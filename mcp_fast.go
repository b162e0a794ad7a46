package carmy

import (
	"bytes"
	"context"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// fastCall answers a tools/call of the sessionless protocol itself, when
// nothing in it needs the SDK's machinery: the SDK's stateless path makes
// and closes a session for every request and decodes the message several
// times, which costs more than the call. It takes only a call that the SDK
// would serve the same way, with the same result: every header and _meta
// key the protocol requires present and consistent, a tool of carmy's,
// nothing that streams (no progress token, no log level: the SDK sends no
// log message without one), no confirmation to ask for, and a server the
// host did not configure (its middleware would see nothing). It returns
// false, having written nothing, for every other request, which the SDK
// serves or refuses.
func (r *Registry) fastCall(w http.ResponseWriter, req *http.Request, body []byte) bool {
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
	// mcpwire.CheckMessage has made sure the body is one JSON value with no member
	// name twice; this decoder, like the SDK's, matches names exactly.
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
	t, ok := r.tools[p.Name]
	if !ok || (r.elicit == formEverywhere && t.meta.Confirmation == ConfirmationRequired) {
		return false
	}
	ctx := req.Context()
	res, _ := r.mcpCall(t)(ctx, &mcp.CallToolRequest{Params: p, Extra: &mcp.RequestExtra{TokenInfo: tokenInfo(ctx), Header: h}})
	out, err := mcpwire.SessionlessResult(res, serverInfo)
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

var serverInfo = &mcp.Implementation{Name: "carmy", Version: Version}

// tokenInfo is the identity that mcpHTTPHandler put in the request's
// context, in the form the SDK hands tool handlers.
func tokenInfo(ctx context.Context) *auth.TokenInfo {
	info, _ := ctx.Value(tokenInfoKey{}).(*auth.TokenInfo)
	return info
}
