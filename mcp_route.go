package carmy

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionlessProtocol is the first MCP protocol version without sessions
// (2026-07-28): every request carries its protocol version, the client's
// capabilities and identity in its _meta, and the MCP-Protocol-Version
// header repeats the version. Versions are dates, so they compare as
// strings.
const sessionlessProtocol = "2026-07-28"

// methodDiscover is how a client of the sessionless protocol learns, before
// anything else, which protocol versions and capabilities a server has.
const methodDiscover = "server/discover"

// isSessionlessRequest reports whether an MCP request over HTTP belongs to the
// sessionless protocol, which the SDK serves only on its stateless path;
// a session-based client's requests take the stateful one and keep their
// session. The header decides: the SDK refuses a sessionless request
// without it. server/discover, which a client sends before it knows the
// server's versions and which the stateful path would answer without the
// sessionless one, belongs to the sessionless protocol too.
func isSessionlessRequest(req *http.Request, body []byte) bool {
	if v := req.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= sessionlessProtocol
	}
	if req.Method != http.MethodPost || !bytes.Contains(body, []byte(methodDiscover)) {
		return false
	}
	// checkMessage has made sure the body is one JSON value with no member
	// name twice, and names match exactly: the method read here is the one
	// the SDK reads.
	var msg struct {
		Method string `json:"method"`
	}
	return jsonv2.Unmarshal(body, &msg) == nil && msg.Method == methodDiscover
}

// unknownToolMiddleware answers a tools/call of a tool that does not exist
// as the SDK does (invalid params), with the message that carmy's other
// transports give: the closest tool name, or the list of tools.
func (r *Registry) unknownToolMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil || method != "tools/call" {
			return res, err
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		var rpcErr *jsonrpc.Error
		if !ok || !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
			return res, err
		}
		if _, known := r.tools[p.Name]; known {
			return res, err
		}
		id, _ := r.mcpIdentity(req.GetExtra())
		e := r.unknownTool(ctx, p.Name, id)
		data, _ := jsonv2.Marshal(publicError(e))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: data}
	}
}
