package mcpwire

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TasksExtension is the id of MCP's tasks extension (2026-07-28), which a
// client declares in its capabilities' extensions to have calls of tools
// that support tasks answered with a task, and a server in its own to say
// it makes them.
const TasksExtension = "io.modelcontextprotocol/tasks"

// RelatedTaskMeta is the _meta key that ties a message to its task.
const RelatedTaskMeta = "io.modelcontextprotocol/related-task"

// RPCError is err as a JSON-RPC error: the one it wraps, else an internal
// error with its message.
func RPCError(err error) *jsonrpc.Error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}
