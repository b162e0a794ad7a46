package carmy

import (
	"context"
	"net/http"
)

// httpRequestKey is the context key of the HTTP request a call came
// through.
type httpRequestKey struct{}

// withHTTPRequest notes the HTTP request a call came through: its remote
// address goes into the logs of the call's refusals, and the server's URL
// as the request reached it into the call's approval URLs. Both are read
// only when needed.
func withHTTPRequest(ctx context.Context, req *http.Request) context.Context {
	return context.WithValue(ctx, httpRequestKey{}, req)
}

// httpRequestOf returns the request noted by withHTTPRequest, or nil.
func httpRequestOf(ctx context.Context) *http.Request {
	req, _ := ctx.Value(httpRequestKey{}).(*http.Request)
	return req
}

// remoteAddr returns the address the call came from, or "".
func remoteAddr(ctx context.Context) string {
	if req := httpRequestOf(ctx); req != nil {
		return req.RemoteAddr
	}
	return ""
}
