package mcpwire

import (
	"bytes"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
)

// SessionlessProtocol is the first MCP protocol version without sessions
// (2026-07-28): every request carries its protocol version, the client's
// capabilities and identity in its _meta, and the MCP-Protocol-Version
// header repeats the version. Versions are dates, so they compare as
// strings.
const SessionlessProtocol = "2026-07-28"

// methodDiscover is how a client of the sessionless protocol learns, before
// anything else, which protocol versions and capabilities a server has.
const methodDiscover = "server/discover"

// IsSessionlessRequest reports whether an MCP request over HTTP belongs to the
// sessionless protocol, which the SDK serves only on its stateless path;
// a session-based client's requests take the stateful one and keep their
// session. The header decides: the SDK refuses a sessionless request
// without it. server/discover, which a client sends before it knows the
// server's versions and which the stateful path would answer without the
// sessionless one, belongs to the sessionless protocol too.
func IsSessionlessRequest(req *http.Request, body []byte) bool {
	if v := req.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= SessionlessProtocol
	}
	if req.Method != http.MethodPost || !bytes.Contains(body, []byte(methodDiscover)) {
		return false
	}
	// CheckMessage has made sure the body is one JSON value with no member
	// name twice, and names match exactly: the method read here is the one
	// the SDK reads.
	var msg struct {
		Method string `json:"method"`
	}
	return jsonv2.Unmarshal(body, &msg) == nil && msg.Method == methodDiscover
}
