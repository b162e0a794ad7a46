package carmy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
)

// DefaultBodyLimit is the largest message carmy reads by default: see
// [Builder.BodyLimit].
const DefaultBodyLimit = 1 << 20

// Handler returns the registry's HTTP API:
//
//	GET  /tools          the metadata and schemas of the tools the caller
//	                     may call (see [Registry.ToolsFor]), sorted by name
//	POST /tools/{name}   call a tool: the body is the input, the
//	                     Idempotency-Key header the request id; with
//	                     Prefer: respond-async, start it as a task: 202,
//	                     Location: /tasks/{id} and the task (a tool that
//	                     forbids tasks answers as without it)
//	GET  /tasks          the caller's tasks, newest first, paged
//	                     (?limit=, ?cursor=)
//	GET  /tasks/{id}     one of the caller's tasks; ?wait=30s answers once
//	                     its status changes (see [Registry.Start])
//	POST /tasks/{id}/cancel
//	                     cancel it (409 for a task that already ended)
//	     /mcp            the Model Context Protocol, streamable HTTP
//	GET  /healthz        200 while the registry serves and reaches its
//	                     store; 503 once the store was out of reach for
//	                     longer than [Builder.HealthGrace]
//	GET  /readyz         the same, for a readiness probe
//	GET  /livez          200 while the process serves, for a liveness probe
//	GET  /approvals      the approvals the caller may see, newest first
//	GET  /approvals/{id} one approval; ?wait=30s answers once it is decided
//	POST /approvals/{id}/approve, /approvals/{id}/deny
//	                     decide, as JSON, from the console's origin or a
//	                     program, for principals holding approve:<tool> or
//	                     approve:*, never on their own calls (see
//	                     [Builder.ApprovalTimeout])
//	GET  /console        the console: tools, forms, approvals, executions
//	                     (see [Registry.ConsoleURL])
//	POST /console/exchange
//	                     the console's page trades a link's one-time code
//	                     for the console secret, once, within minutes
//
// A call answers 200 with {"execution_id","output","replayed"} and an
// X-Carmy-Execution-Id header, or a status that fits the error's code with
// {"error":{"code","message","fields","details","retryable"}}. Every
// request is authenticated by the builder's [Authenticator], if any,
// before its body is read; a request with two Authorization headers is
// refused.
//
// Browsers are kept out unless the host lets them in: a request (on a
// server with an authenticator, one that arrived on a loopback address)
// must name the server localhost, 127.0.0.1 or [::1] in its Host header, or a name given to [Builder.AllowHosts]
// (the health checks aside), and a cross-origin request from a browser must come
// from an origin given to [Builder.AllowOrigins]; others get 403
// permission_denied. POST /tools/{name} takes Content-Type:
// application/json only, even with an empty body (415 otherwise), which a
// page cannot send to another origin without asking first. [Builder.BodyLimit]
// bounds the body on every route, /mcp included, and a body must arrive
// within 30 seconds of its headers.
//
// The handler is safe for concurrent use; it is built once.
func (r *Registry) Handler() http.Handler { return r.http.routes() }

// mountTools serves the tools: the list and the calls.
func (s *httpServer) mountTools(mux *http.ServeMux) {
	mux.HandleFunc("GET /tools", private(authenticated(s, s.identify, s.serveTools)))
	mux.HandleFunc("POST /tools/{name}", authenticated(s, s.identify, s.serveCall))
	mux.HandleFunc("/tools", onlyMethod("GET"))
	mux.HandleFunc("/tools/{name}", onlyMethod("POST"))
}

// onlyMethod answers 405 for the methods a path does not serve.
func onlyMethod(allowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed)
		writeErrorStatus(w, http.StatusMethodNotAllowed, Errorf(CodeInvalidInput, "%s %s is not served; use %s", req.Method, req.URL.Path, allowed))
	}
}

type jsontextRaw []byte

func (j jsontextRaw) MarshalJSON() ([]byte, error) { return j, nil }

// serveTools lists the tools the caller may call; the list depends on who
// asks (see [private]).
func (s *httpServer) serveTools(w http.ResponseWriter, req *http.Request, id Identity) {
	out := make([]ToolMetadata, 0, len(s.r.names))
	s.r.eachVisible(req.Context(), id, func(t *tool) {
		m := t.meta // written at once: no deep copy
		m.Confirmation = s.r.confirmationFor(t)
		out = append(out, m)
	})
	writeJSON(w, http.StatusOK, out)
}

type wireResult struct {
	ExecutionID string      `json:"execution_id"`
	Output      jsontextRaw `json:"output"`
	Replayed    bool        `json:"replayed"`
}

func (s *httpServer) serveCall(w http.ResponseWriter, req *http.Request, id Identity) {
	// A page may POST text/plain or a form to any origin without asking
	// first; requiring JSON, even for an empty body, takes that away.
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.refuse(w, req, id.Principal, http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the input with Content-Type: application/json, even when it is empty"))
		return
	}
	body, err := io.ReadAll(req.Body) // bounded by the body limit
	if err != nil {
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooLarge):
			s.refuse(w, req, id.Principal, http.StatusRequestEntityTooLarge, Errorf(CodeInvalidInput, "the input is larger than the limit of %d bytes", s.limits.body))
		case errors.As(err, &netErr) && netErr.Timeout():
			s.refuse(w, req, id.Principal, http.StatusRequestTimeout, Errorf(CodeTimeout, "the request body did not arrive in time"))
		default:
			writeError(w, Errorf(CodeCancelled, "the request body could not be read"))
		}
		return
	}
	c := Call{
		Tool:        req.PathValue("name"),
		Input:       body,
		RequestID:   req.Header.Get("Idempotency-Key"),
		Session:     id.Session,
		Principal:   id.Principal,
		Permissions: id.Permissions,
		Metadata:    withTrace(id.Metadata, req.Header.Get(MetaTraceparent), req.Header.Get(MetaTracestate)),
	}
	if prefersAsync(req) && s.startOverHTTP(w, req, c) {
		return
	}
	res, err := s.r.Execute(withHTTPRequest(req.Context(), req), c)
	if err != nil {
		s.challengeMissing(w, req, err)
		writeError(w, err)
		return
	}
	w.Header().Set("X-Carmy-Execution-Id", res.ExecutionID)
	writeJSON(w, http.StatusOK, wireResult{res.ExecutionID, jsontextRaw(res.Output), res.Replayed})
}

// StatusOf returns the HTTP status that fits an error's code.
func StatusOf(err error) int {
	switch CodeOf(err) {
	case "":
		return http.StatusOK
	case CodeInvalidInput:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied, CodeConfirmationRequired:
		return http.StatusForbidden
	case CodeUnknownTool, CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeCancelled:
		return 499 // client closed request, as nginx has it
	case CodeTimeout:
		return http.StatusGatewayTimeout
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// publicError is an error as callers see it, on every transport: the
// *Error's wire fields within the size limits of an answer, or a generic
// internal error for anything else.
func publicError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e.bounded()
	}
	return &Error{Code: CodeInternal, Message: "internal error", Retryable: true}
}

func writeError(w http.ResponseWriter, err error) { writeErrorStatus(w, StatusOf(err), err) }

func writeErrorStatus(w http.ResponseWriter, status int, err error) {
	e := publicError(err)
	if e.Code == CodeUnauthenticated && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="carmy"`)
	}
	if id, ok := e.Details["execution_id"].(string); ok {
		// An error of an execution (internal, or a replayed outcome)
		// names it, as a result does.
		w.Header().Set("X-Carmy-Execution-Id", id)
	}
	if e.Retryable && (status == http.StatusServiceUnavailable) {
		w.Header().Set("Retry-After", strconv.Itoa(1))
	}
	if after, ok := retryAfterSeconds(e); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(after, 10))
	}
	writeJSON(w, status, map[string]*Error{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := jsonv2.Marshal(v, encodeOptions)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error","retryable":true}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

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

// PublicURL names the address clients reach the server at, such as
// "https://tools.example.com", when it is not the one requests arrive
// with: behind a reverse proxy that rewrites Host or terminates TLS.
// Approval links (approval_url, and the page sent by MCP URL elicitation)
// and the OAuth protected-resource metadata, when [OAuthConfig].Audience
// is not a URL, are then built from it instead of the request's Host and
// scheme. Request headers such as X-Forwarded-Host are never trusted for
// this. It is public_url in carmy.toml and CARMY_PUBLIC_URL.
func (b *Builder) PublicURL(u string) *Builder {
	base, err := checkPublicURL(u)
	if err != nil {
		b.misuse("Builder.PublicURL: %v", err)
		return b
	}
	b.publicURL = base
	return b
}

// checkPublicURL returns an absolute http(s) URL with a host, without its
// trailing slash, or says why it is not one.
func checkPublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL with a host and no query, such as \"https://tools.example.com\"", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
