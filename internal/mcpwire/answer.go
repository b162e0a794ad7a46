package mcpwire

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Level is the MCP log level of a slog level.
//
//lint:ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it
func Level(l slog.Level) mcp.LoggingLevel {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warning"
	case l < slog.LevelError+4:
		return "error"
	default:
		return "critical"
	}
}

// SessionlessResult is a result as the SDK's path writes it in the sessionless
// protocol: its type (complete, or input required), the server's identity,
// server, in _meta, and never a null content.
func SessionlessResult(res *mcp.CallToolResult, server *mcp.Implementation) ([]byte, error) {
	kind := "complete"
	if res.InputRequests != nil {
		kind = "input_required"
	} else if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[mcp.MetaKeyServerInfo] = server
	b, err := res.MarshalJSON()
	if err != nil || len(b) < 3 || b[len(b)-1] != '}' { // the result has members: content, _meta
		return nil, errors.New("unexpected result")
	}
	return append(b[:len(b)-1], `,"resultType":"`+kind+`"}`...), nil
}

// AcceptsBoth reports whether the Accept headers take both JSON and event
// streams, as the SDK requires of a POST.
func AcceptsBoth(accept []string) bool {
	var j, s bool
	for _, a := range accept {
		for _, t := range strings.Split(a, ",") {
			switch strings.TrimSpace(strings.SplitN(t, ";", 2)[0]) {
			case "application/json", "application/*":
				j = true
			case "text/event-stream", "text/*":
				s = true
			case "*/*":
				j, s = true, true
			}
		}
	}
	return j && s
}

// NoParamHeaders reports whether a request has no Mcp-Param- header, whose
// checks against the params are the SDK's.
func NoParamHeaders(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return false
		}
	}
	return true
}

// HeaderIs reports whether a header is absent or has the value v.
func HeaderIs(h http.Header, key, v string) bool {
	got := h.Values(key)
	return len(got) == 0 || (len(got) == 1 && got[0] == v)
}

// RPCResult is a JSON-RPC answer with a result, as the SDK writes it.
func RPCResult(id, result []byte) []byte {
	b := make([]byte, 0, len(result)+len(id)+32)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
