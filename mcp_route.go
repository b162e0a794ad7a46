package carmy

import (
	"context"
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
