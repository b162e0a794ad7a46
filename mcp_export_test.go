package carmy

// OpenSessions returns how many MCP sessions over HTTP the registry keeps
// open.
func OpenSessions(r *Registry) int { return r.sessions.len() }
