package carmy

import (
	"time"

	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// OpenSessions returns how many MCP sessions over HTTP the registry keeps
// open.
func OpenSessions(r *Registry) int { return r.sessions.Len() }

// SessionSettingsOf returns the builder's session timeout and limit; zero
// means the default.
func SessionSettingsOf(b *Builder) (time.Duration, int) { return b.sessionTimeout, b.maxSessions }

// FastAnswered returns how many MCP calls of a session carmy has answered
// itself rather than through the SDK.
func FastAnswered() int64 { return mcpserve.Answered() }
