package mcpserve

import (
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Sessions is the table of a host's MCP sessions over HTTP: it closes a
// session idle for its timeout, and a principal's least recently used one
// past its bound. The host keeps one for its lifetime ([Config].Sessions)
// and closes every session in it when it shuts down (CloseAll). Safe for
// concurrent use.
type Sessions = mcpwire.SessionTable

// SessionSpan is a session from its start to its end.
type SessionSpan = mcpwire.SessionSpan

// NewSessions is a table of sessions that close after timeout without a
// request, at most max open per principal; ended (nil for none) is told of
// each one that ends.
func NewSessions(timeout time.Duration, max int, ended func(SessionSpan)) *Sessions {
	return mcpwire.NewSessionTable(timeout, max, ended)
}

// Stdio is a transport of one client over a pair of streams, one JSON-RPC
// message per line: a line that is not a message, or longer than limit
// bytes, gets a JSON-RPC error (read errors of in go to logger) and the
// server reads on.
func Stdio(in io.Reader, out io.Writer, limit int64, logger *slog.Logger) mcp.Transport {
	return &mcpwire.StdioTransport{In: in, Out: out, Limit: limit, Logger: logger}
}
