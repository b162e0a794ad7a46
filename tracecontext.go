package carmy

import (
	"maps"
)

// Keys of [Call].Metadata that carry the caller's W3C trace context, so
// that a tracing middleware can join the call to the caller's trace. The
// HTTP API copies them from the request headers of the same names; the MCP
// endpoint from the tools/call request's _meta (the keys are the same
// there), else from the HTTP request's headers. Values from the host's
// [Authenticator] win; a value longer than the W3C limits, or with a
// character that is not printable ASCII, is dropped.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Longest trace context values kept: the traceparent of any version fits
// in 256 bytes, and 512 is the length up to which W3C asks every
// tracestate to be propagated.
const (
	maxTraceparent = 256
	maxTracestate  = 512
)

// withTrace returns the metadata of a call with the caller's trace
// context added. md, which the host may share between calls, is never
// changed: a copy is made when there is something to add.
func withTrace(md map[string]string, parent, state string) map[string]string {
	if parent == "" || len(parent) > maxTraceparent || !printable(parent) {
		return md
	}
	if _, ok := md[MetaTraceparent]; ok {
		return md
	}
	out := make(map[string]string, len(md)+2)
	maps.Copy(out, md)
	out[MetaTraceparent] = parent
	if state != "" && len(state) <= maxTracestate && printable(state) {
		out[MetaTracestate] = state
	}
	return out
}

// printable reports whether s is printable ASCII, as every valid trace
// context value is: anything else cannot reach a tool's metadata, or a log
// line written from it.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
