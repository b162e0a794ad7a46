package carmy

import "time"

// OpenSessions returns how many MCP sessions over HTTP the registry keeps
// open.
func OpenSessions(r *Registry) int { return r.sessions.Len() }

// SessionSettingsOf returns the builder's session timeout and limit; zero
// means the default.
func SessionSettingsOf(b *Builder) (time.Duration, int) { return b.sessionTimeout, b.maxSessions }

// FastAnswered returns how many MCP calls of a session the registry has
// answered itself rather than through the SDK.
func FastAnswered(r *Registry) int64 { return r.mcpServer().Answered() }
