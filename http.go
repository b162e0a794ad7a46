package carmy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/console"
	"github.com/carmy-dev/carmy/internal/guard"
	"github.com/carmy-dev/carmy/internal/oauthrs"
	"github.com/carmy-dev/carmy/store"
	jsonv2 "github.com/go-json-experiment/json"
)

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
	case CodeToolError:
		return http.StatusBadGateway
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

// httpServer is a registry's HTTP surface: its routes (each group in its
// own file), the one login check of every route that needs its caller,
// /mcp included ([authenticated], [login]), the limits of a request, and the shutdown of the
// servers that serve it. The registry keeps the runtime: a route calls
// it, and nothing of the registry's lifetime ends with a server.
type httpServer struct {
	r      *Registry
	auth   Authenticator // nil: every caller is the anonymous principal ""
	limits httpLimits
	// hosts and origins are what the boundary lets in besides its own.
	hosts   []guard.Host
	origins []string
	health  *health
	// console is the console of these routes, with its secret; loopback
	// the one served for a stdio client's user; consoleFiles hold their
	// links, removed when the registry closes.
	console      *consoleAuth
	loopback     loopbackConsole
	consoleFiles consoleFiles

	once    sync.Once
	handler http.Handler
}

// httpLimits bound what one request may take of a server.
type httpLimits struct {
	body       int64         // bytes of a body, every route
	bodyRead   time.Duration // for a body to arrive after its headers
	readHeader time.Duration // for the headers to arrive
	idle       time.Duration // a kept-alive connection without a request
}

// maxHeaderBytes bounds a request's headers.
const maxHeaderBytes = 64 << 10

func newHTTPServer(b *Builder, r *Registry) *httpServer {
	s := &httpServer{r: r, auth: b.auth, hosts: slices.Clone(b.allowHosts), origins: slices.Clone(b.allowOrigins),
		limits:  httpLimits{body: b.bodyLimit, bodyRead: b.tuning.bodyRead(), readHeader: b.tuning.readHeader(), idle: b.tuning.idle()},
		console: newConsoleAuth(b.auth != nil)}
	s.console.codes.TTL = b.tuning.codeTTL
	return s
}

// routes is the handler of [Registry.Handler], built on its first use.
func (s *httpServer) routes() http.Handler {
	s.once.Do(func() {
		mux := http.NewServeMux()
		s.mountTools(mux)
		s.mountHealth(mux)
		mux.Handle("/mcp", s.mcp())
		s.mountApprovals(mux)
		s.mountTasks(mux)
		s.mountConsole(mux)
		s.mountWellKnown(mux) // OAuth: protected resource metadata
		mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
			writeError(w, Errorf(CodeNotFound, "no such endpoint %s %s; see GET /tools, POST /tools/{name}, /mcp, GET /healthz, /approvals, /tasks, GET /console", req.Method, req.URL.Path))
		})
		s.handler = s.protect(mux, s.hosts, s.origins)
	})
	return s.handler
}

// mcp is the MCP door at /mcp, which asks the one login check of the
// routes ([login]) for each request. A GET is a stream that only its
// client or the server ends, so the server's shutdown ends it.
func (s *httpServer) mcp() http.Handler {
	door := s.r.mcpServer().HTTPHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			ctx, end := s.streaming(req.Context())
			defer end()
			req = req.WithContext(ctx)
		}
		door.ServeHTTP(w, req)
	})
}

// streamsKey is the context key, in the requests of a server that
// [httpServer.serve] runs, of the context that ends when that server
// shuts down.
type streamsKey struct{}

// streaming returns ctx, a request's, ended also when the server serving
// it shuts down (or, outside such a server, when the registry closes):
// for answers that wait (an MCP stream, a ?wait= long poll), which never
// end on their own as calls do, and which a shutdown must not wait for.
// The registry and the other servers of it go on.
func (s *httpServer) streaming(ctx context.Context) (context.Context, context.CancelFunc) {
	ends, ok := ctx.Value(streamsKey{}).(context.Context)
	if !ok {
		ends = s.r.life
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ends, cancel)
	return ctx, func() { stop(); cancel() }
}

// longPoll is the context of a ?wait= long poll of req (wait, as sent):
// done after that long, at most limit, or at this server's shutdown,
// which answers it at once. A wait that is not a duration is invalid
// input, nothing waits, and err says why.
func (s *httpServer) longPoll(req *http.Request, wait string, limit time.Duration) (context.Context, context.CancelFunc, error) {
	d, err := time.ParseDuration(wait)
	if err != nil || d < 0 {
		return nil, nil, Errorf(CodeInvalidInput, "wait=%q is not a duration such as 30s", wait)
	}
	stream, end := s.streaming(req.Context())
	ctx, cancel := context.WithTimeout(stream, min(d, limit))
	return ctx, func() { cancel(); end() }, nil
}

// serve serves the routes on ln until ctx is done, then shuts down
// gracefully within drain: it stops accepting, ends this server's streams
// and long polls, and lets running calls finish. Only this server stops:
// the registry's tasks, its MCP sessions and its other servers go on until
// [Registry.Close].
func (s *httpServer) serve(ctx context.Context, ln net.Listener, drain time.Duration, host bool) error {
	// Ended by this server's shutdown, and by the registry's closing.
	streams, endStreams := context.WithCancel(s.r.life)
	defer endStreams()
	srv := &http.Server{
		Handler: s.routes(),
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), streamsKey{}, streams)
		},
		ReadHeaderTimeout: s.limits.readHeader, // against clients that trickle headers
		IdleTimeout:       s.limits.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.r.logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(endStreams)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("carmy: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if host {
		// The host goes away with this server: its tasks get the same
		// time, and none is left for its lease to lapse.
		s.r.drainTasks(sctx)
	}
	<-served
	if err != nil {
		srv.Close()
		return fmt.Errorf("carmy: calls still running after the drain timeout of %v were cut off: %w", drain, err)
	}
	return nil
}

// authenticated is the one authentication wrapper of the HTTP API, around
// every route that needs its caller: it finds the caller of a request
// with who ([httpServer.identify] for the tools and the tasks,
// [httpServer.caller] for the approvals and the console) and hands it to
// next, or answers a request its authentication refuses (see [login])
// before next reads anything.
func authenticated[C Identity | approve.Who](s *httpServer, who func(*http.Request) (C, error), next func(http.ResponseWriter, *http.Request, C)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c, ok := login(s, w, req, who); ok {
			next(w, req, c)
		}
	}
}

// login is the one login check of the HTTP API, of [authenticated]'s
// routes and of /mcp, whose door asks it for each request: it returns the
// caller of a request that who finds, or answers the request with who's
// refusal (and a resource server's challenge) and returns false.
func login[C Identity | approve.Who](s *httpServer, w http.ResponseWriter, req *http.Request, who func(*http.Request) (C, error)) (C, bool) {
	c, err := who(req)
	if err != nil {
		s.writeAuthError(w, req, err)
		return c, false
	}
	return c, true
}

// identify authenticates a request; without an authenticator everyone is
// the anonymous principal "". It reads no body, so that a caller with bad
// credentials is refused at once. A refusal is logged at warn level with
// its code alone: an authenticator may have written the credential into
// its message or its cause.
func (s *httpServer) identify(req *http.Request) (Identity, error) {
	if s.auth == nil {
		return Identity{}, nil
	}
	// Proxies and authenticators disagree on which of two Authorization
	// headers counts: none does.
	_, e := authorization(req)
	if e == nil {
		id, err := s.auth.Authenticate(req)
		switch {
		case err == nil && utf8.ValidString(id.Principal):
			return id, nil
		case err == nil:
			// Answers, logs and records name the principal, as text.
			e = Errorf(CodeUnauthenticated, "authentication failed: the authenticator named a principal that is not valid UTF-8")
		case !errors.As(err, &e):
			e = &Error{Code: CodeUnauthenticated, Message: "authentication failed", Err: err}
		}
	}
	s.logRefusal(req, "", &Error{Code: e.Code}) // the code, not the message
	return Identity{}, e
}

// private marks the answers of next, refusals included, as the caller's
// own: no shared cache may keep them, since they depend on who asks.
func private(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "private")
		w.Header().Add("Vary", "Authorization")
		next(w, req)
	}
}

// bodyReadTimeout bounds how long a client has to send a request's body,
// counted from when its headers were read.
const bodyReadTimeout = 30 * time.Second

// protect wraps the handler's routes in the boundary every route shares
// (package guard), refusing as every other refusal of the handler is
// refused: with an [*Error], logged.
func (s *httpServer) protect(next http.Handler, hosts []guard.Host, origins []string) http.Handler {
	return guard.New(next, guard.Config{
		Hosts:           hosts,
		Origins:         origins,
		BodyLimit:       s.limits.body,
		BodyReadTimeout: s.limits.bodyRead,
		Authenticated:   s.auth != nil,
		Public:          isResourceMetadata,
		NoCORS:          isDecision,
		Refuse: func(w http.ResponseWriter, req *http.Request, why guard.Refusal) {
			if why == guard.ForeignHost {
				s.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
					"this server answers to the host names localhost, 127.0.0.1 and [::1], not %q; other names (a proxy's, a published address) are allowed by the server's configuration (allowed hosts)", req.Host))
				return
			}
			s.refuse(w, req, "", http.StatusForbidden, Errorf(CodePermissionDenied,
				"cross-origin requests from browsers are refused; origins whose pages may call this server are allowed by the server's configuration (allowed origins)"))
		},
	})
}

// refuse answers a request that the boundary refuses before the tool
// runs, and logs the refusal at warn level, without the request's
// credentials or input. principal is "" until the caller is known.
func (s *httpServer) refuse(w http.ResponseWriter, req *http.Request, principal string, status int, e *Error) {
	s.logRefusal(req, principal, e)
	writeErrorStatus(w, status, e)
}

func (s *httpServer) logRefusal(req *http.Request, principal string, e *Error) {
	tool, _ := strings.CutPrefix(req.URL.Path, "/tools/")
	if tool == req.URL.Path {
		tool = ""
	}
	if e.Message == "" { // an authentication refusal, whose message may hold the credential
		s.r.logger.Warn("carmy: request refused", "code", e.Code, "principal", principal, "tool", tool,
			"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
		return
	}
	s.r.logger.Warn("carmy: request refused", "code", e.Code, "reason", e.Message, "principal", principal, "tool", tool,
		"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
}

// isResourceMetadata reports a read of the protected resource metadata:
// a public document, holding no secret, that browser-based MCP clients
// read from their own origin to find where to sign in.
func isResourceMetadata(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.URL.Path == oauthrs.WellKnown || req.URL.Path == oauthrs.WellKnownMCP)
}

// pingTimeout bounds one ping of the store by a health check.
const pingTimeout = time.Second

// health tracks whether the host reaches its store, as its health checks
// find by pinging it. It is safe for concurrent use.
type health struct {
	grace   time.Duration
	pingers []store.Pinger

	mu      sync.Mutex
	failing time.Time // when pings began to fail; zero while they succeed
}

// newHealth returns the health of a registry whose store and locker are s
// and l, which it pings when they implement [store.Pinger] (once when
// they are the same).
func newHealth(grace time.Duration, s store.IdempotencyStore, l store.Locker) *health {
	h := &health{grace: grace}
	if p, ok := s.(store.Pinger); ok {
		h.pingers = append(h.pingers, p)
	}
	if p, ok := l.(store.Pinger); ok && any(l) != any(s) {
		h.pingers = append(h.pingers, p)
	}
	return h
}

// check pings the store and reports whether the host has been unable to
// reach it for longer than the grace, since when, and why.
func (h *health) check(ctx context.Context) (down bool, since time.Time, err error) {
	if len(h.pingers) == 0 {
		return false, time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var errs []error
	for _, p := range h.pingers {
		if err := p.Ping(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.failing = time.Time{}
	case h.failing.IsZero():
		h.failing = now
	}
	return err != nil && now.Sub(h.failing) >= h.grace, h.failing, err
}

// mountHealth serves the health checks, which need no authentication.
func (s *httpServer) mountHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.HandleFunc("GET /readyz", s.serveHealth)
	mux.HandleFunc("GET /livez", serveLive)
	mux.HandleFunc("/healthz", onlyMethod("GET"))
	mux.HandleFunc("/readyz", onlyMethod("GET"))
	mux.HandleFunc("/livez", onlyMethod("GET"))
}

// serveHealth answers GET /healthz and GET /readyz: 200 while the host
// reaches its store, or lost it for less than the grace; 503 past it. The
// answer names no address or cause, since anyone may ask: the log has the
// cause.
func (s *httpServer) serveHealth(w http.ResponseWriter, req *http.Request) {
	down, since, err := s.health.check(req.Context())
	switch {
	case down:
		s.r.logger.Warn("carmy: health check failed: the store is out of reach", "since", since, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "store": "unreachable", "since": since.UTC().Format(time.RFC3339)})
	case err != nil:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": "unreachable", "since": since.UTC().Format(time.RFC3339)})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": "ok"})
	}
}

// serveLive answers GET /livez: 200 while the process serves HTTP, whatever
// its store does, so that an orchestrator restarts a host that hangs, not
// one whose store is out of reach (a restart would not bring it back).
func serveLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// maxTaskWait bounds how long GET /tasks/{id}?wait= holds a request open.
const maxTaskWait = time.Minute

// cancelWait is how long POST /tasks/{id}/cancel waits for the task to
// stop before answering with the task as it stands.
const cancelWait = 5 * time.Second

// Page sizes of GET /tasks.
const (
	defaultTaskPage = 50
	maxTaskPage     = 200
)

// wireTask is a task as the HTTP API shows it.
type wireTask struct {
	ID          string        `json:"id"`
	Tool        string        `json:"tool"`
	Status      string        `json:"status"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
	ExecutionID string        `json:"execution_id,omitempty"`
	Output      jsontextRaw   `json:"output,omitzero"`
	Error       *Error        `json:"error,omitempty"`
	ApprovalID  string        `json:"approval_id,omitempty"`
	ApprovalURL string        `json:"approval_url,omitempty"`
	Questions   jsontextRaw   `json:"questions,omitzero"`
	Progress    *TaskProgress `json:"progress,omitempty"`
}

func (s *httpServer) wireTask(ctx context.Context, rec store.Task) wireTask {
	t := s.r.taskOf(rec, rec.Principal)
	w := wireTask{ID: rec.ID, Tool: rec.Tool, Status: string(rec.Status), CreatedAt: rec.Created.UTC(), UpdatedAt: rec.Updated.UTC(),
		ExecutionID: rec.ExecutionID, Progress: t.Progress}
	switch rec.Status {
	case store.TaskCompleted:
		w.Output = jsontextRaw(rec.Output)
	case store.TaskFailed, store.TaskCancelled:
		w.Error = taskError(rec).bounded()
	case store.TaskInputRequired:
		w.ApprovalID = rec.ApprovalID
		w.ApprovalURL = s.r.approvalURL(ctx, rec.ApprovalID)
		if len(rec.Questions) > len("{}") {
			w.Questions = jsontextRaw(rec.Questions)
		}
	}
	return w
}

func (s *httpServer) mountTasks(mux *http.ServeMux) {
	mux.HandleFunc("GET /tasks", private(authenticated(s, s.identify, s.serveTasks)))
	mux.HandleFunc("GET /tasks/{id}", private(authenticated(s, s.identify, s.serveTask)))
	mux.HandleFunc("POST /tasks/{id}/cancel", authenticated(s, s.identify, s.serveTaskCancel))
	mux.HandleFunc("POST /tasks/{id}/input", authenticated(s, s.identify, s.serveTaskInput))
	mux.HandleFunc("/tasks", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}/cancel", onlyMethod("POST"))
	mux.HandleFunc("/tasks/{id}/input", onlyMethod("POST"))
}

// prefersAsync reports whether a request prefers an asynchronous answer
// (RFC 7240: Prefer: respond-async, in any of its Prefer headers).
func prefersAsync(req *http.Request) bool {
	for _, h := range req.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			name, _, _ := strings.Cut(p, ";")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// startOverHTTP answers a call that prefers an asynchronous answer with
// 202 and its task, when its tool runs as a task. It reports false, having
// written nothing, for a tool that forbids tasks or does not exist: the
// call is then answered as any other (RFC 7240 lets a server ignore a
// preference).
func (s *httpServer) startOverHTTP(w http.ResponseWriter, req *http.Request, c Call) bool {
	if t, ok := s.r.tools[c.Tool]; !ok || t.meta.Tasks == TaskForbidden {
		return false
	}
	ctx := withHTTPRequest(req.Context(), req)
	task, err := s.r.Start(ctx, c)
	if err != nil {
		s.challengeMissing(w, req, err)
		writeError(w, err)
		return true
	}
	w.Header().Set("Location", "/tasks/"+task.ID)
	w.Header().Set("Preference-Applied", "respond-async")
	writeJSON(w, http.StatusAccepted, s.wireTask(ctx, task.rec))
	return true
}

// serveTasks lists the caller's tasks, newest first, a page at a time:
// ?limit= (at most 200) and ?cursor=, the next_cursor of the page before.
func (s *httpServer) serveTasks(w http.ResponseWriter, req *http.Request, id Identity) {
	limit := defaultTaskPage
	if v := req.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, Errorf(CodeInvalidInput, "limit=%q is not a positive number", v))
			return
		}
		limit = min(n, maxTaskPage)
	}
	cursor := req.URL.Query().Get("cursor")
	page, err := s.r.tasks.store.ListTasks(req.Context(), id.Principal, cursor, limit+1)
	if err != nil {
		writeError(w, s.r.taskStoreError(req.Context(), err))
		return
	}
	out := struct {
		Tasks      []wireTask `json:"tasks"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{Tasks: make([]wireTask, 0, min(len(page), limit))}
	ctx := withHTTPRequest(req.Context(), req)
	for i, t := range page {
		if i == limit {
			out.NextCursor = page[limit-1].ID
			break
		}
		out.Tasks = append(out.Tasks, s.wireTask(ctx, t))
	}
	writeJSON(w, http.StatusOK, out)
}

// serveTask shows one of the caller's tasks; ?wait=30s holds the request
// until the task's status changes or it is final, for at most that long
// (and a minute), or until the server shuts down.
func (s *httpServer) serveTask(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.r.readTask(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" {
		ctx, cancel, err := s.longPoll(req, v, maxTaskWait)
		if err != nil {
			writeError(w, err)
			return
		}
		defer cancel()
		if rec, err = s.awaitStatus(ctx, rec); err != nil && ctx.Err() == nil {
			writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(req.Context(), req), rec))
}

// awaitStatus returns rec's task once its status is another, or it is
// final, or ctx is done (with the task as last seen).
func (s *httpServer) awaitStatus(ctx context.Context, rec store.Task) (store.Task, error) {
	from := rec.Status
	for rec.Status == from && !rec.Status.Final() {
		next, err := s.r.awaitTask(ctx, rec)
		if err != nil {
			return rec, err
		}
		rec = next
	}
	return rec, nil
}

// serveTaskCancel cancels one of the caller's tasks and answers with it,
// once it stopped (or after a few seconds, as it stands). A task that is
// final is not changed: 409 says so.
func (s *httpServer) serveTaskCancel(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.r.cancelTask(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), cancelWait)
	defer cancel()
	for !rec.Status.Final() {
		next, err := s.r.awaitTask(ctx, rec)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && (e.Code == CodeTimeout || e.Code == CodeCancelled) {
				break
			}
			writeError(w, err)
			return
		}
		rec = next
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(req.Context(), req), rec))
}

// Over HTTP, a task that waits for its tool's questions shows them
// (questions, as MCP's inputRequests: by question id, each an elicitation
// with its message and requested schema), and POST /tasks/{id}/input
// answers them, on any host, as MCP's tasks/update does.

// serveTaskInput answers the questions one of the caller's tasks waits
// for. The body is a JSON object of answers by question id, each as MCP's
// elicitation result: {"action":"accept","content":{…}}, or the action
// "decline" or "cancel". It answers with the task as it then stands; an
// answer to a question the task does not wait for is ignored.
func (s *httpServer) serveTaskInput(w http.ResponseWriter, req *http.Request, id Identity) {
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeErrorStatus(w, http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the answers with Content-Type: application/json"))
		return
	}
	body, err := io.ReadAll(req.Body) // bounded by the body limit
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeErrorStatus(w, http.StatusRequestEntityTooLarge, Errorf(CodeInvalidInput, "the answers are larger than the limit of %d bytes", s.limits.body))
			return
		}
		writeError(w, Errorf(CodeCancelled, "the request body could not be read"))
		return
	}
	answers, err := taskAnswers(body)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := req.Context()
	if err := s.r.answerTask(ctx, req.PathValue("id"), id.Principal, answers); err != nil {
		writeError(w, err)
		return
	}
	rec, err := s.r.readTask(ctx, req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(ctx, req), rec))
}

// taskAnswers reads the body of POST /tasks/{id}/input: answers by
// question id, each an elicitation result with a known action.
func taskAnswers(body []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, Errorf(CodeInvalidInput, `the answers must be a JSON object by question id, such as {"confirm":{"action":"accept","content":{"sure":true}}}`)
	}
	out := make(map[string]json.RawMessage, len(raw))
	for _, q := range slices.Sorted(maps.Keys(raw)) { // the first problem, the same each time
		var a answer
		if err := json.Unmarshal(raw[q], &a); err != nil {
			return nil, Errorf(CodeInvalidInput, "the answer to %q is not an object with an action and its content", q)
		}
		switch a.Action {
		case "accept", "decline", "cancel":
		default:
			return nil, Errorf(CodeInvalidInput, "the answer to %q has the action %q; want accept, decline or cancel", q, a.Action)
		}
		out[q] = raw[q]
	}
	return out, nil
}

// caller authenticates a request to the approvals or the console, and
// looks for the console secret on a server without an authenticator.
func (s *httpServer) caller(req *http.Request) (approve.Who, error) {
	if who, ok := req.Context().Value(personKey{}).(approve.Who); ok {
		return who, nil // the loopback console's person, who holds its secret
	}
	id, err := s.identify(req)
	if err != nil {
		return approve.Who{}, err
	}
	return approve.Who{Principal: id.Principal, Permissions: id.Permissions, Console: s.auth == nil && s.console.holds(req)}, nil
}

// wireSummary is an approval as GET /approvals lists it: without its
// input, which comes with the approval alone (GET /approvals/{id}).
type wireSummary struct {
	ID        string    `json:"id"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"`
	Digest    string    `json:"digest"`
	RequestID string    `json:"request_id,omitempty"`
	Status    string    `json:"status"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Decided   time.Time `json:"decided,omitzero"`
	Approver  string    `json:"approver,omitempty"`
	URL       string    `json:"url"`
	// MayDecide: the caller may approve or deny it.
	MayDecide bool `json:"may_decide"`
	// TaskWaits: a task waits for it on this server, and resumes once it
	// is approved (no call needs to be made again).
	TaskWaits bool `json:"task_waits,omitempty"`
}

// wireApproval is one approval as the HTTP API shows it, with its input.
type wireApproval struct {
	wireSummary `json:",inline"`
	Input       jsontextRaw `json:"input"`
	// Text is the input as a person is shown it, made by the server
	// ([approve.Text]): the console shows it as it is.
	Text string `json:"text"`
}

func (s *httpServer) wireSummary(ctx context.Context, a store.Approval, c approve.Who) wireSummary {
	return wireSummary{a.ID, a.Tool, a.Principal, a.Digest, a.RequestID, string(a.Status),
		a.Created.UTC(), a.Expires.UTC(), a.Decided.UTC(), a.Approver, s.r.approvalURL(ctx, a.ID),
		a.Status == store.ApprovalPending && c.MayDecide(a) == nil, s.r.taskWaits(a.ID)}
}

// taskWaits reports whether a task of this host waits for approval id.
func (r *Registry) taskWaits(id string) bool {
	_, ok := r.approvals.tasks.Load(id)
	return ok
}

func (s *httpServer) wireApproval(ctx context.Context, a store.Approval, c approve.Who) wireApproval {
	input := jsontextRaw(a.Input)
	text, err := approve.Text(a.Input)
	switch {
	case a.Input == nil:
		input, text = jsontextRaw("null"), "" // given back when the approval expired
	case err != nil:
		text = string(a.Input) // a form the store kept is JSON; never shown raw but for a broken store
	}
	return wireApproval{s.wireSummary(ctx, a, c), input, text}
}

func (s *httpServer) mountApprovals(mux *http.ServeMux) {
	mux.HandleFunc("GET /approvals", authenticated(s, s.caller, s.serveApprovals))
	mux.HandleFunc("GET /approvals/{id}", authenticated(s, s.caller, s.serveApproval))
	mux.HandleFunc("POST /approvals/{id}/approve", authenticated(s, s.caller, s.serveDecision(true)))
	mux.HandleFunc("POST /approvals/{id}/deny", authenticated(s, s.caller, s.serveDecision(false)))
	mux.HandleFunc("/approvals", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}/approve", onlyMethod("POST"))
	mux.HandleFunc("/approvals/{id}/deny", onlyMethod("POST"))
}

// Pages of GET /approvals.
const (
	maxApprovalPage = 200
	// maxApprovalScan bounds the approvals one request reads from the
	// store, whatever few of them the caller may see.
	maxApprovalScan = 2_000
)

// serveApprovals lists the approvals the caller may see, newest first, as
// summaries without their inputs: ?status=pending keeps those of one
// status, ?limit= (at most 200, 50 by default) bounds the page, and a
// Link header (rel="next") gives the next page's URL, whose ?after= names
// the last approval read.
func (s *httpServer) serveApprovals(w http.ResponseWriter, req *http.Request, c approve.Who) {
	var err error
	q := req.URL.Query()
	status, after, limit := q.Get("status"), q.Get("after"), store.DefaultApprovalPage
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxApprovalPage {
			writeError(w, Errorf(CodeInvalidInput, "limit=%q is not a number of approvals from 1 to %d", v, maxApprovalPage))
			return
		}
	}
	ctx := withHTTPRequest(req.Context(), req)
	out := make([]wireSummary, 0, limit)
	more := false
	for scanned := 0; len(out) < limit && scanned < maxApprovalScan; {
		page, err := s.r.approvals.store.List(req.Context(), after, limit)
		if err != nil {
			writeError(w, s.r.approvalStoreError(err))
			return
		}
		read := 0
		for _, a := range page {
			if len(out) == limit {
				break
			}
			after, read = a.ID, read+1
			if c.MayView(a) && (status == "" || string(a.Status) == status) {
				out = append(out, s.wireSummary(ctx, a, c))
			}
		}
		scanned += read
		if more = read < len(page) || len(page) == limit; !more {
			break
		}
	}
	if more {
		next := url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}
		if status != "" {
			next.Set("status", status)
		}
		w.Header().Set("Link", "</approvals?"+next.Encode()+`>; rel="next"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// serveApproval shows one approval; ?wait=30s holds the request until it
// is no longer pending, for at most that long (and a minute), so that an
// agent learns of the decision at once, or until the server shuts down.
func (s *httpServer) serveApproval(w http.ResponseWriter, req *http.Request, c approve.Who) {
	a, ok := s.visibleApproval(w, req, c)
	if !ok {
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" && a.Status == store.ApprovalPending {
		ctx, cancel, err := s.longPoll(req, v, maxApprovalWait)
		if err != nil {
			writeError(w, err)
			return
		}
		defer cancel()
		got, err := s.r.awaitDecision(ctx, a.ID)
		switch {
		case err == nil:
			a = got
		case ctx.Err() == nil:
			writeError(w, s.r.approvalStoreError(err))
			return
		case got.ID != "": // the approval as last seen when the wait ended
			a = got
		}
	}
	writeJSON(w, http.StatusOK, s.wireApproval(withHTTPRequest(req.Context(), req), a, c))
}

// visibleApproval finds the approval a request names, answering 404 for
// one the caller may not see, as for one that does not exist.
func (s *httpServer) visibleApproval(w http.ResponseWriter, req *http.Request, c approve.Who) (store.Approval, bool) {
	id := req.PathValue("id")
	a, err := s.r.approvals.store.Get(req.Context(), id)
	if err == nil && !c.MayView(a) {
		err = store.ErrApprovalNotFound
	}
	if errors.Is(err, store.ErrApprovalNotFound) {
		writeError(w, Errorf(CodeNotFound, "no approval %q is visible to you; see GET /approvals", id))
		return a, false
	}
	if err != nil {
		writeError(w, s.r.approvalStoreError(err))
		return a, false
	}
	return a, true
}

// serveDecision approves or denies a pending approval, for a caller who
// approves its tool. The decision is logged and audited, with who made
// it; so is a refused attempt to decide.
func (s *httpServer) serveDecision(approved bool) func(http.ResponseWriter, *http.Request, approve.Who) {
	return func(w http.ResponseWriter, req *http.Request, c approve.Who) {
		if e := s.decisionRefused(req); e != nil {
			s.refuse(w, req, c.Principal, e.status, e.Error)
			return
		}
		a, ok := s.visibleApproval(w, req, c)
		refused := a
		refused.Approver = ""
		if !ok {
			if a.ID != "" { // one the caller may not see: 404, as for none
				s.r.auditApproval(req.Context(), refused, AuditRefused, c.Principal, CodePermissionDenied)
			}
			return
		}
		if why := c.MayDecide(a); why != nil {
			s.r.auditApproval(req.Context(), refused, AuditRefused, c.Principal, CodePermissionDenied)
			switch {
			case why == approve.ErrOwnCall:
				s.refuse(w, req, c.Principal, http.StatusForbidden, &Error{Code: CodePermissionDenied,
					Message: "the principal that made a call never decides its approval, whatever it holds: a person decides it, through the console or their MCP client",
					Details: map[string]any{"approval_id": a.ID, "reason": "own_call"}})
			case s.auth == nil:
				// No permission exists here: say how the person decides,
				// never where the secret is (an agent reads this).
				s.refuse(w, req, c.Principal, http.StatusForbidden, Errorf(CodePermissionDenied,
					"deciding approvals here needs the console secret: open the console link the server printed when it started, or run `carmy approvals` in a terminal"))
			default:
				s.refuse(w, req, c.Principal, http.StatusForbidden, Errorf(CodePermissionDenied,
					"deciding approvals of %s needs the permission %q or %q", a.Tool, "approve:"+a.Tool, "approve:*"))
			}
			return
		}
		if e := s.r.policyApprove(req.Context(), a, Identity{Principal: c.Name(), Permissions: c.Permissions}, "http"); e != nil {
			s.refuse(w, req, c.Principal, http.StatusForbidden, e)
			return
		}
		id := a.ID
		a, err := s.r.decide(req.Context(), id, approved, c.Name(), slog.String("remote", req.RemoteAddr))
		if err != nil {
			writeError(w, s.r.decisionError(id, a, err))
			return
		}
		writeJSON(w, http.StatusOK, s.wireApproval(withHTTPRequest(req.Context(), req), a, c))
	}
}

// decisionOrigin refuses decisions from pages of other origins, those of
// AllowOrigins included: a decision comes from the console's own page, or
// from a program (which sends neither Origin nor Sec-Fetch-Site).
var decisionOrigin = http.NewCrossOriginProtection()

// decisionRefusal is why a request may not carry a decision.
type decisionRefusal struct {
	status int
	*Error
}

// decisionRefused refuses a decision that a browser could have sent
// without being asked: from another origin (a page of a neighbouring port
// is same-site, and SameSite cookies would go with it), or without a JSON
// body, which a page may send to another origin only after a preflight,
// which decisions never pass.
func (s *httpServer) decisionRefused(req *http.Request) *decisionRefusal {
	if decisionOrigin.Check(req) != nil {
		return &decisionRefusal{http.StatusForbidden, Errorf(CodePermissionDenied,
			"approvals are decided from the console's own page, or by a program; never from another origin's page")}
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &decisionRefusal{http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the decision with Content-Type: application/json, even with no body")}
	}
	return nil
}

// isDecision reports a path that decides an approval, or hands out the
// console secret, whose preflight requests the boundary never answers.
func isDecision(path string) bool {
	if path == "/console/exchange" {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/approvals/")
	return ok && (strings.HasSuffix(rest, "/approve") || strings.HasSuffix(rest, "/deny"))
}

// consoleHeader carries the console secret from the console's page. Not a
// cookie: browsers send a host's cookies to every port of it, so another
// local server a person's browser visits would receive it, and with it
// the approver's rights. The page keeps the secret in its origin's
// storage, which no other origin reads, and a header is sent only by code
// that holds it; another origin's page would need a preflight to send it,
// which the server never grants.
const consoleHeader = console.Header

// consoleAuth is a console's secret: that of a server without an
// authenticator, made at Build, new with every registry, which alone
// grants the approver's rights there, and that of the console served on
// a loopback port for a single-client session's person. Its holder is the
// person who started the server and read the console URL it printed, or
// the person at the client; an agent that calls the tools never has it.
// Links sent to a client carry a one-time code for it instead (codes).
type consoleAuth struct {
	secret string // "" with an authenticator
	codes  console.Codes
}

func newConsoleAuth(authenticated bool) *consoleAuth {
	if authenticated {
		return &consoleAuth{}
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	return &consoleAuth{secret: hex.EncodeToString(b[:])}
}

// holds reports whether a request carries the console secret, in its
// header.
func (c *consoleAuth) holds(req *http.Request) bool {
	v := req.Header.Values(consoleHeader)
	return len(v) == 1 && c.matches(v[0])
}

func (c *consoleAuth) matches(s string) bool {
	return c.secret != "" && subtle.ConstantTimeCompare([]byte(s), []byte(c.secret)) == 1
}

// ConsoleURL returns the URL of the console on a server at base, such as
// "http://127.0.0.1:3000". On a registry without an [Authenticator] it
// carries the console secret, which alone grants the right to decide
// approvals there: give it only to the person who decides, never to an
// agent. [Builder.Listen] prints it at start when standard error is a
// terminal, and writes it to a file only the user can read, whose path it
// logs and which it removes when it returns (`carmy approvals` finds the
// server there). The console's page keeps the secret in its own origin and
// sends it in a header, never in a cookie. With an authenticator, the
// console asks for a token, whose permissions decide what it may do.
func (r *Registry) ConsoleURL(base string) string {
	if r.http.console.secret == "" {
		return base + "/console"
	}
	return base + "/console?token=" + r.http.console.secret
}

func (s *httpServer) mountConsole(mux *http.ServeMux) {
	mountPage(mux)
	mux.HandleFunc("POST /console/exchange", s.serveExchange(s.console))
	mux.HandleFunc("POST "+console.ChallengePath, serveChallenge(s.console))
	mux.HandleFunc("GET /console/session", authenticated(s, s.caller, s.serveConsoleSession))
	mux.HandleFunc("GET /console/executions", authenticated(s, s.caller, s.serveExecutions))
}

// mountPage serves the console's page and its assets: the same files in
// every binary, which hold no data.
func mountPage(mux *http.ServeMux) {
	mux.HandleFunc("GET /console", serveConsole)
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetsOnly(http.FileServerFS(console.Files))))
}

// assetsOnly serves the page's script and style sheet, never a directory's
// listing, nor the page itself, which /console serves with its headers.
func assetsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if p := req.URL.Path; !strings.HasSuffix(p, ".js") && !strings.HasSuffix(p, ".css") {
			writeError(w, Errorf(CodeNotFound, "no such asset"))
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, req)
	})
}

// serveConsole serves the console's page. Opened with the console secret
// (?token=), or with a one-time code (?code=) that it exchanges for the
// secret at POST /console/exchange, the page keeps the secret in its
// origin's storage and takes it out of the address bar; the server sets
// no cookie.
func serveConsole(w http.ResponseWriter, req *http.Request) {
	page, err := console.Files.ReadFile("index.html")
	if err != nil {
		writeError(w, Errorf(CodeInternal, "the console is missing"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	// Nothing but its own files: no inline script, no other origin.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(page)
}

// serveExchange exchanges a one-time code of c, which a link sent to a
// client carries, for c's secret: once, within the code's time to live,
// from the console's own page (or a program), with a JSON body. A link
// read later from a process list, a log or a browser's history grants
// nothing.
func (s *httpServer) serveExchange(c *consoleAuth) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if e := s.decisionRefused(req); e != nil {
			s.refuse(w, req, "", e.status, e.Error)
			return
		}
		var body struct {
			Code string `json:"code"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || body.Code == "" {
			writeError(w, Errorf(CodeInvalidInput, `send {"code": "..."}: the one-time code of the console link`))
			return
		}
		if c.secret == "" || !c.codes.Redeem(body.Code) {
			s.refuse(w, req, "", http.StatusForbidden, &Error{Code: CodePermissionDenied,
				Message: fmt.Sprintf("this console link was used before or has expired: a link works once, within %v; run `carmy approvals` in a terminal, or make the call again for a new link", console.CodeTTL),
				Details: map[string]any{"reason": "code_used_or_expired"}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"secret": c.secret})
	}
}

// serveChallenge answers the challenge of `carmy approvals`, which makes
// sure that the server behind a console file is the one that wrote it
// before it sends that file's secret anywhere: the proof (an HMAC of the
// nonce, keyed by c's secret) shows that the server knows the secret, and
// never reveals it.
func serveChallenge(c *consoleAuth) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c.secret == "" {
			writeError(w, Errorf(CodeNotFound, "this server has no console secret"))
			return
		}
		var body struct {
			Nonce string `json:"nonce"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || len(body.Nonce) < console.MinNonce || len(body.Nonce) > console.MaxNonce {
			writeError(w, Errorf(CodeInvalidInput, `send {"nonce": "..."}: %d to %d random characters`, console.MinNonce, console.MaxNonce))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]string{"proof": console.Proof(c.secret, body.Nonce)})
	}
}

// linkWithCode is the console link at base that a client is sent, with a
// one-time code of c instead of its secret, and the query q.
func linkWithCode(base string, c *consoleAuth, q url.Values) string {
	if c.secret != "" {
		q.Set("code", c.codes.Mint())
	}
	return base + "/console?" + q.Encode()
}

// consoleSession is what the console learns about its caller.
type consoleSession struct {
	Principal string `json:"principal"`
	// Approver: the caller decides approvals of some tool.
	Approver bool `json:"approver"`
	// Authenticated: the server has an authenticator, so the page sends a
	// token; without one, the console secret makes an approver.
	Authenticated bool `json:"authenticated"`
	// Console: the server has a console secret, which alone makes an
	// approver there.
	Console bool `json:"console"`
	// ApprovalsOnly: this console serves a person's approvals and nothing
	// else (the console of a single-client session).
	ApprovalsOnly bool `json:"approvals_only"`
}

func (s *httpServer) serveConsoleSession(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, consoleSession{Principal: c.Principal, Approver: c.DecidesSome(), Authenticated: s.auth != nil,
		Console: s.console.secret != ""})
}

// recentSize is how many executions the console shows.
const recentSize = 100

// execution is one call as the console lists it.
type execution struct {
	Time        time.Time `json:"time"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Tool        string    `json:"tool"`
	Principal   string    `json:"principal"`
	Code        string    `json:"code"`
	DurationMS  float64   `json:"duration_ms"`
	Replayed    bool      `json:"replayed"`
	ApprovalID  string    `json:"approval_id,omitempty"`
}

// recent keeps the last calls of found tools, newest last, in a ring.
type recent struct {
	mu   sync.Mutex
	ring [recentSize]execution
	n    int // calls recorded in all
}

// observe keeps a call that ended: refused, replayed or executed.
func (rc *recent) observe(_ context.Context, rec AuditRecord, took time.Duration) {
	e := execution{Time: rec.Time.Add(-took), ExecutionID: rec.ExecutionID, Tool: rec.Tool, Principal: rec.Principal,
		Code: string(rec.Code), DurationMS: float64(took.Microseconds()) / 1000, Replayed: rec.Decision == AuditReplayed,
		ApprovalID: rec.ApprovalID}
	rc.mu.Lock()
	rc.ring[rc.n%recentSize] = e
	rc.n++
	rc.mu.Unlock()
}

// list returns the executions that keep, newest first.
func (rc *recent) list(keep func(execution) bool) []execution {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := []execution{}
	for i := rc.n - 1; i >= 0 && i >= rc.n-recentSize; i-- {
		if e := rc.ring[i%recentSize]; keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// serveExecutions lists the last calls: every call for those who decide
// approvals, a caller's own calls for the others.
func (s *httpServer) serveExecutions(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, s.r.recent.list(func(e execution) bool {
		return c.MayViewCall(e.Tool, e.Principal)
	}))
}

// isTerminal reports whether w is a terminal, where a person reads. Under
// systemd, Docker or Kubernetes, standard error is a pipe or a file that a
// log collector reads, and whoever reads the logs would get the
// approver's rights.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// announceConsole makes the address a server listens on the base of its
// approval URLs, and gives the person who started the server the console
// URL with its secret: printed when standard error is a terminal, and
// written to a file only the user can read, where `carmy approvals` finds
// it and whose path (never the secret) is logged. The file is removed
// when the registry closes.
func (s *httpServer) announceConsole(addr net.Addr) {
	base := "http://" + addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		base = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	s.r.approvals.base.Store(&base)
	if s.console.secret == "" {
		return
	}
	link := s.r.ConsoleURL(base)
	out, terminal := s.r.tuning.console()
	if terminal {
		fmt.Fprintf(out, "carmy: to see the tools and approve calls, open %s\n", link)
	}
	path, err := s.writeConsoleFile(s.console, link)
	if err != nil {
		if !terminal {
			s.r.logger.Error("carmy: cannot write the console URL to a file: the console cannot decide approvals", "error", err)
		}
		return
	}
	s.r.logger.Info("carmy: the console URL, with the secret that approves calls, is in a file only this user can read", "path", path, "console", base+"/console")
}

// writeConsoleFile writes a console's link with its secret to a file only
// the user can read, which the registry removes when it closes.
func (s *httpServer) writeConsoleFile(c *consoleAuth, link string) (string, error) {
	path, err := console.WriteFile(link)
	if err != nil {
		return "", err
	}
	s.consoleFiles.add(path)
	return path, nil
}

// consoleFiles are the files holding console links that the registry
// wrote, removed when it closes: a link must not outlive its server, and
// `carmy approvals` must not list a server that is gone.
type consoleFiles struct {
	mu     sync.Mutex
	paths  []string
	closed bool
}

func (f *consoleFiles) add(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = os.Remove(path)
		return
	}
	f.paths = append(f.paths, path)
}

// remove removes the files, and any written after.
func (f *consoleFiles) remove() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var errs []error
	for _, p := range f.paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	f.paths = nil
	return errors.Join(errs...)
}

// loopbackConsole is the console carmy serves on a loopback port that the
// system picks, for the person at the client of a single-client transport
// (stdio) to decide approvals: opened the first time such a client needs
// it, closed with the registry. It serves the console's page, its assets
// and the approvals of the session's principal, those behind its own
// secret, and nothing else: no tool, no MCP, nothing that acts as the
// stdio principal, which any local program could otherwise do there.
type loopbackConsole struct {
	once sync.Once
	base string
	auth *consoleAuth
	err  error
	// open is base once the console serves, read without the once.
	open atomic.Pointer[string]
}

// localConsole returns the base URL and the secret of the registry's
// loopback console, opening it on the first call: it writes the link with
// the secret to a file only the user can read, where `carmy approvals`
// finds it.
func (s *httpServer) localConsole(ctx context.Context) (string, *consoleAuth, error) {
	r, lc := s.r, &s.loopback
	lc.once.Do(func() {
		if r.life.Err() != nil {
			lc.err = errors.New("the registry is closed")
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lc.err = err
			return
		}
		lc.auth = newConsoleAuth(false)
		lc.auth.codes.TTL = r.tuning.codeTTL
		srv := &http.Server{Handler: s.loopbackHandler(lc.auth), ReadHeaderTimeout: s.limits.readHeader, IdleTimeout: s.limits.idle,
			MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(r.logger.Handler(), slog.LevelWarn)}
		go func() { _ = srv.Serve(ln) }()
		context.AfterFunc(r.life, func() { _ = srv.Close() })
		lc.base = "http://" + ln.Addr().String()
		lc.open.Store(&lc.base)
		path, err := s.writeConsoleFile(lc.auth, lc.base+"/console?token="+lc.auth.secret)
		if err != nil {
			r.logger.Error("carmy: cannot write the console's link to a file: carmy approvals cannot find this server", "error", err)
		}
		r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: serving the console for approvals", slog.String("addr", ln.Addr().String()), slog.String("path", path))
	})
	return lc.base, lc.auth, lc.err
}

// loopbackLink is the link to approval id on the loopback console, if it
// serves: the page alone, with neither its secret nor a one-time code, so
// that a model that reads it (in a task's status message) gains nothing;
// the person opens it with the secret that `carmy approvals` and the
// server's own output give them. It is "" before the console opens.
func (s *httpServer) loopbackLink(id string) string {
	base := s.loopback.open.Load()
	if base == nil {
		return ""
	}
	return *base + "/console?approval=" + url.QueryEscape(id)
}

// personKey is the context key of the person a loopback console's request
// comes from: the holder of its secret.
type personKey struct{}

// loopbackHandler is the loopback console's handler, behind the boundary
// every handler of the registry keeps.
func (s *httpServer) loopbackHandler(c *consoleAuth) http.Handler {
	who := approve.Who{Principal: s.r.stdioIdentity.Principal, Console: true, Scoped: true}
	person := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if !c.holds(req) {
				s.refuse(w, req, "", http.StatusForbidden, &Error{Code: CodePermissionDenied,
					Message: "this console is the person's at the MCP client: open the link their client showed (it works once), or run `carmy approvals` in a terminal",
					Details: map[string]any{"reason": "console_secret"}})
				return
			}
			h(w, req.WithContext(context.WithValue(req.Context(), personKey{}, who)))
		}
	}
	mux := http.NewServeMux()
	mountPage(mux)
	mux.HandleFunc("POST /console/exchange", s.serveExchange(c))
	mux.HandleFunc("POST "+console.ChallengePath, serveChallenge(c))
	mux.HandleFunc("GET /console/session", func(w http.ResponseWriter, req *http.Request) {
		s := consoleSession{Console: true, ApprovalsOnly: true}
		if c.holds(req) {
			s.Principal, s.Approver = who.Principal, true
		}
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("GET /approvals", person(authenticated(s, s.caller, s.serveApprovals)))
	mux.HandleFunc("GET /approvals/{id}", person(authenticated(s, s.caller, s.serveApproval)))
	mux.HandleFunc("POST /approvals/{id}/approve", person(authenticated(s, s.caller, s.serveDecision(true))))
	mux.HandleFunc("POST /approvals/{id}/deny", person(authenticated(s, s.caller, s.serveDecision(false))))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, Errorf(CodeNotFound, "no such endpoint %s %s: this console serves a person's approvals only (GET /console, /approvals)", req.Method, req.URL.Path))
	})
	return s.protect(mux, nil, nil)
}
