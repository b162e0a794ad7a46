// Package httpapi is carmy's HTTP door: the routes of a registry's
// handler (the tools, the tasks, the approvals, the health checks, the
// console and its loopback twin), the one login check of every route,
// the boundary every request crosses, and the servers that serve them.
// It reaches the registry only through [Host], which the registry
// implements, and speaks plain types (store records, [approve.Who]), so
// that the runtime knows nothing of HTTP.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/guard"
	"github.com/carmy-dev/carmy/internal/oauthrs"
	"github.com/carmy-dev/carmy/store"
	jsonv2 "github.com/go-json-experiment/json"
)

// Host is the registry as the HTTP door reaches it. Errors it returns are
// the registry's own; [Host.Public] gives their wire form.
type Host interface {
	// Authenticate returns the caller of a request, the anonymous
	// principal "" without an authenticator. Its error is the refusal
	// as the caller sees it.
	Authenticate(req *http.Request) (Identity, error)
	// Challenge is the WWW-Authenticate value of a refusal err of req,
	// "" for none: of the authentication (authn), or of a call refused
	// for the permissions it misses.
	Challenge(req *http.Request, err error, authn bool) string
	// Public is err as callers see it.
	Public(err error) *Error

	// Tools is the list of the tools id may call, as GET /tools shows it.
	Tools(ctx context.Context, id Identity) any
	// Call runs a call; req is the request it came by.
	Call(req *http.Request, c Call) (Result, error)
	// Start starts a call as a task; false, with nothing started, for a
	// tool that forbids tasks or does not exist.
	Start(req *http.Request, c Call) (store.Task, bool, error)

	// Tasks lists principal's tasks, newest first, from after cursor.
	Tasks(ctx context.Context, principal, cursor string, limit int) ([]store.Task, error)
	// Task reads one of principal's tasks.
	Task(ctx context.Context, id, principal string) (store.Task, error)
	// AwaitTask returns rec's task once it changed, or when ctx is done.
	AwaitTask(ctx context.Context, rec store.Task) (store.Task, error)
	// CancelTask cancels one of principal's tasks.
	CancelTask(ctx context.Context, id, principal string) (store.Task, error)
	// AnswerTask answers the questions one of principal's tasks waits
	// for: body is a JSON object of answers by question id.
	AnswerTask(ctx context.Context, id, principal string, body []byte) error
	// TaskDoc is rec as the API shows it; req is the request it answers.
	TaskDoc(req *http.Request, rec store.Task) Task

	// Approvals lists approvals from after, as the store pages them.
	Approvals(ctx context.Context, after string, limit int) ([]store.Approval, error)
	// Approval reads approval id: [store.ErrApprovalNotFound] for none.
	Approval(ctx context.Context, id string) (store.Approval, error)
	// AwaitDecision returns approval id once it is decided, or when ctx
	// is done, with the approval as last seen.
	AwaitDecision(ctx context.Context, id string) (store.Approval, error)
	// Decide is the registry's one gate of a person's decision: it
	// refuses a who that may not see a ([store.ErrApprovalNotFound]) or
	// decide it ([approve.ErrNoRight], [approve.ErrOwnCall]), and one
	// the policies refuse, auditing each refusal, and records the rest.
	Decide(req *http.Request, a store.Approval, approved bool, who approve.Who) (store.Approval, error)
	// ApprovalLink is the page where a person decides approval id, and
	// whether a task of this host waits for it.
	ApprovalLink(req *http.Request, id string) (url string, taskWaits bool)
}

// Identity is who calls, as the host authenticated them. It has the fields
// of the host's identity, for a plain conversion.
type Identity struct {
	Principal   string
	Session     string
	Permissions []string
	Metadata    map[string]string
}

// Call is a call of a tool as POST /tools/{name} received it.
type Call struct {
	Tool, RequestID         string
	Input                   []byte
	Traceparent, Tracestate string
	Identity
}

// Result is a call's result: what [Host.Call] returns, and the document
// of POST /tools/{name} that the server writes and the command reads.
type Result struct {
	ExecutionID string  `json:"execution_id"`
	Output      RawJSON `json:"output"`
	Replayed    bool    `json:"replayed"`
}

// Failure is the document of a failed answer: {"error": ...}, as the
// server writes it and the command reads it.
type Failure struct {
	Error *Error `json:"error"`
}

// Error is an error as callers read it: the registry's error's wire form.
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Fields  []FieldError   `json:"fields,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// Retryable tells the caller that the same call may succeed later.
	Retryable bool `json:"retryable"`
	// RetryAfter is the Retry-After of a refusal for a limit, in seconds;
	// 0 for none.
	RetryAfter int64 `json:"-"`
}

// FieldError is a problem with one value of a call's input: the
// registry's field error's wire form.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Codes of the errors the door makes itself.
const (
	codeInvalidInput     = "invalid_input"
	codePermissionDenied = "permission_denied"
	codeNotFound         = "not_found"
	codeUnauthenticated  = "unauthenticated"
	codeCancelled        = "cancelled"
	codeTimeout          = "timeout"
	codeInternal         = "internal"
)

// errorf is an error of the door's own that is not retryable.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Status returns the HTTP status that fits an error's code ("" for none).
func Status(code string) int {
	switch code {
	case "":
		return http.StatusOK
	case codeInvalidInput:
		return http.StatusBadRequest
	case codeUnauthenticated:
		return http.StatusUnauthorized
	case codePermissionDenied, "confirmation_required":
		return http.StatusForbidden
	case "unknown_tool", codeNotFound:
		return http.StatusNotFound
	case "conflict":
		return http.StatusConflict
	case codeCancelled:
		return 499 // client closed request, as nginx has it
	case codeTimeout:
		return http.StatusGatewayTimeout
	case "unavailable":
		return http.StatusServiceUnavailable
	case "rate_limited":
		return http.StatusTooManyRequests
	case "tool_error":
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// Config is what a [Server] needs besides its [Host].
type Config struct {
	Logger *slog.Logger
	// Life is done once the registry closes: streams and long polls end
	// then, and the loopback console stops.
	Life context.Context
	// Authenticated: the host has an authenticator; without one, the
	// console secret makes an approver.
	Authenticated bool
	// Hosts and Origins are what the boundary lets in besides its own.
	Hosts   []guard.Host
	Origins []string
	// The limits of a request: BodyLimit bytes of a body on every route,
	// BodyRead for it to arrive after its headers, ReadHeader for the
	// headers, Idle for a kept-alive connection without a request.
	BodyLimit                  int64
	BodyRead, ReadHeader, Idle time.Duration
	// CodeTTL is how long a console link's one-time code waits; 0 is
	// the console's default.
	CodeTTL time.Duration
	// HealthGrace is how long the store may be out of reach before the
	// health checks fail; Pingers are what they ping ([Pingers]).
	HealthGrace time.Duration
	Pingers     []store.Pinger
	// MCP returns the MCP door, served at /mcp.
	MCP func() http.Handler
	// Metadata serves the protected resource metadata at path ("" or
	// "/mcp"); nil when the authenticator is no OAuth resource server.
	Metadata func(w http.ResponseWriter, req *http.Request, path string)
	// StdioPrincipal is who calls over stdio, whose approvals the
	// loopback console serves.
	StdioPrincipal string
	// ApprovalWait bounds how long GET /approvals/{id}?wait= holds a
	// request open.
	ApprovalWait time.Duration
	// ConsoleOut receives the console URL when ConsoleTerminal says a
	// person reads it there.
	ConsoleOut      io.Writer
	ConsoleTerminal bool
}

// Server is a registry's HTTP surface: its routes (each group in its own
// file), the one login check of every route that needs its caller, /mcp
// included ([authenticated], [Server.Login]), the limits of a request,
// and the shutdown of the servers that serve it. The registry keeps the
// runtime: a route calls it, and nothing of the registry's lifetime ends
// with a server.
type Server struct {
	host   Host
	cfg    Config
	health *health
	// console is the console of these routes, with its secret; loopback
	// the one served for a stdio client's user; consoleFiles hold their
	// links, removed when the registry closes.
	console      *Console
	loopback     loopbackConsole
	consoleFiles consoleFiles
	recent       recent // the last calls, for the console

	once    sync.Once
	handler http.Handler
}

// New returns the HTTP door of host.
func New(host Host, cfg Config) *Server {
	cfg.Hosts, cfg.Origins = slices.Clone(cfg.Hosts), slices.Clone(cfg.Origins)
	s := &Server{host: host, cfg: cfg, console: newConsole(cfg.Authenticated),
		health: &health{grace: cfg.HealthGrace, pingers: cfg.Pingers}}
	s.console.codes.TTL = cfg.CodeTTL
	return s
}

// maxHeaderBytes bounds a request's headers.
const maxHeaderBytes = 64 << 10

// Handler is the registry's handler, built on its first use.
func (s *Server) Handler() http.Handler {
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
			s.writeError(w, errorf(codeNotFound, "no such endpoint %s %s; see GET /tools, POST /tools/{name}, /mcp, GET /healthz, /approvals, /tasks, GET /console", req.Method, req.URL.Path))
		})
		s.handler = s.protect(mux, s.cfg.Hosts, s.cfg.Origins)
	})
	return s.handler
}

// mcp is the MCP door at /mcp, which asks the one login check of the
// routes ([Server.Login]) for each request. A GET is a stream that only
// its client or the server ends, so the server's shutdown ends it.
func (s *Server) mcp() http.Handler {
	door := s.cfg.MCP()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			ctx, end := s.streaming(req.Context())
			defer end()
			req = req.WithContext(ctx)
		}
		door.ServeHTTP(w, req)
	})
}

// mountWellKnown serves the protected resource metadata when the
// authenticator is a resource server.
func (s *Server) mountWellKnown(mux *http.ServeMux) {
	serve := s.cfg.Metadata
	if serve == nil {
		return
	}
	for pattern, path := range map[string]string{oauthrs.WellKnown: "", oauthrs.WellKnownMCP: "/mcp"} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, req *http.Request) {
			serve(w, req, path)
		})
	}
}

// streamsKey is the context key, in the requests of a server that
// [Server.Serve] runs, of the context that ends when that server shuts
// down.
type streamsKey struct{}

// streaming returns ctx, a request's, ended also when the server serving
// it shuts down (or, outside such a server, when the registry closes):
// for answers that wait (an MCP stream, a ?wait= long poll), which never
// end on their own as calls do, and which a shutdown must not wait for.
// The registry and the other servers of it go on.
func (s *Server) streaming(ctx context.Context) (context.Context, context.CancelFunc) {
	ends, ok := ctx.Value(streamsKey{}).(context.Context)
	if !ok {
		ends = s.cfg.Life
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ends, cancel)
	return ctx, func() { stop(); cancel() }
}

// longPoll is the context of a ?wait= long poll of req (wait, as sent):
// done after that long, at most limit, or at this server's shutdown,
// which answers it at once. A wait that is not a duration is invalid
// input, nothing waits, and err says why.
func (s *Server) longPoll(req *http.Request, wait string, limit time.Duration) (context.Context, context.CancelFunc, error) {
	d, err := time.ParseDuration(wait)
	if err != nil || d < 0 {
		return nil, nil, errorf(codeInvalidInput, "wait=%q is not a duration such as 30s", wait)
	}
	stream, end := s.streaming(req.Context())
	ctx, cancel := context.WithTimeout(stream, min(d, limit))
	return ctx, func() { cancel(); end() }, nil
}

// Serve serves the routes on ln until ctx is done, then shuts down
// gracefully within drain: it stops accepting, ends this server's streams
// and long polls, and lets running calls finish. Only this server stops:
// the registry's tasks, its MCP sessions and its other servers go on
// until the registry closes. drained, if not nil, is given the shutdown's
// context once the server stopped accepting: a host drains its tasks
// there, in the same time.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration, drained func(context.Context)) error {
	// Ended by this server's shutdown, and by the registry's closing.
	streams, endStreams := context.WithCancel(s.cfg.Life)
	defer endStreams()
	srv := &http.Server{
		Handler: s.Handler(),
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), streamsKey{}, streams)
		},
		ReadHeaderTimeout: s.cfg.ReadHeader, // against clients that trickle headers
		IdleTimeout:       s.cfg.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
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
	if drained != nil {
		// The host goes away with this server: its tasks get the same
		// time, and none is left for its lease to lapse.
		drained(sctx)
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
// with who ([Server.identify] for the tools and the tasks,
// [Server.caller] for the approvals and the console) and hands it to
// next, or answers a request its authentication refuses (see [login])
// before next reads anything.
func authenticated[C Identity | approve.Who](s *Server, who func(*http.Request) (C, error), next func(http.ResponseWriter, *http.Request, C)) http.HandlerFunc {
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
func login[C Identity | approve.Who](s *Server, w http.ResponseWriter, req *http.Request, who func(*http.Request) (C, error)) (C, bool) {
	c, err := who(req)
	if err != nil {
		s.writeAuthError(w, req, err)
		return c, false
	}
	return c, true
}

// Login is the login check of the routes for a door served among them
// (/mcp): the caller of req, or false with the refusal written.
func (s *Server) Login(w http.ResponseWriter, req *http.Request) (Identity, bool) {
	return login(s, w, req, s.identify)
}

// identify authenticates a request. It reads no body, so that a caller
// with bad credentials is refused at once. A refusal is logged at warn
// level with its code alone: an authenticator may have written the
// credential into its message or its cause.
func (s *Server) identify(req *http.Request) (Identity, error) {
	id, err := s.host.Authenticate(req)
	if err != nil {
		s.logRefusal(req, "", &Error{Code: s.host.Public(err).Code}) // the code, not the message
		return Identity{}, err
	}
	return id, nil
}

// writeAuthError answers a request its authentication refused; a resource
// server adds its challenge.
func (s *Server) writeAuthError(w http.ResponseWriter, req *http.Request, err error) {
	if c := s.host.Challenge(req, err, true); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
	s.writeError(w, err)
}

// challengeMissing adds to the 403 of a call refused for missing
// permissions the host's challenge, if any.
func (s *Server) challengeMissing(w http.ResponseWriter, req *http.Request, err error) {
	if c := s.host.Challenge(req, err, false); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
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

// onlyMethod answers 405 for the methods a path does not serve.
func onlyMethod(allowed string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed)
		writeErrorStatus(w, http.StatusMethodNotAllowed, errorf(codeInvalidInput, "%s %s is not served; use %s", req.Method, req.URL.Path, allowed))
	}
}

// protect wraps the handler's routes in the boundary every route shares
// (package guard), refusing as every other refusal of the handler is
// refused: with an [*Error], logged.
func (s *Server) protect(next http.Handler, hosts []guard.Host, origins []string) http.Handler {
	return guard.New(next, guard.Config{
		Hosts:           hosts,
		Origins:         origins,
		BodyLimit:       s.cfg.BodyLimit,
		BodyReadTimeout: s.cfg.BodyRead,
		Authenticated:   s.cfg.Authenticated,
		Public:          isResourceMetadata,
		NoCORS:          isDecision,
		Refuse: func(w http.ResponseWriter, req *http.Request, why guard.Refusal) {
			if why == guard.ForeignHost {
				s.refuse(w, req, "", http.StatusForbidden, errorf(codePermissionDenied,
					"this server answers to the host names localhost, 127.0.0.1 and [::1], not %q; other names (a proxy's, a published address) are allowed by the server's configuration (allowed hosts)", req.Host))
				return
			}
			s.refuse(w, req, "", http.StatusForbidden, errorf(codePermissionDenied,
				"cross-origin requests from browsers are refused; origins whose pages may call this server are allowed by the server's configuration (allowed origins)"))
		},
	})
}

// refuse answers a request that the boundary refuses before the tool
// runs, and logs the refusal at warn level, without the request's
// credentials or input. principal is "" until the caller is known.
func (s *Server) refuse(w http.ResponseWriter, req *http.Request, principal string, status int, e *Error) {
	s.logRefusal(req, principal, e)
	writeErrorStatus(w, status, e)
}

func (s *Server) logRefusal(req *http.Request, principal string, e *Error) {
	tool, _ := strings.CutPrefix(req.URL.Path, "/tools/")
	if tool == req.URL.Path {
		tool = ""
	}
	if e.Message == "" { // an authentication refusal, whose message may hold the credential
		s.cfg.Logger.Warn("carmy: request refused", "code", e.Code, "principal", principal, "tool", tool,
			"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
		return
	}
	s.cfg.Logger.Warn("carmy: request refused", "code", e.Code, "reason", e.Message, "principal", principal, "tool", tool,
		"method", req.Method, "path", req.URL.Path, "remote", req.RemoteAddr)
}

// isResourceMetadata reports a read of the protected resource metadata:
// a public document, holding no secret, that browser-based MCP clients
// read from their own origin to find where to sign in.
func isResourceMetadata(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.URL.Path == oauthrs.WellKnown || req.URL.Path == oauthrs.WellKnownMCP)
}

// public is err as callers see it: the door's own, or the host's.
func (s *Server) public(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return s.host.Public(err)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	e := s.public(err)
	writeErrorStatus(w, Status(e.Code), e)
}

func writeErrorStatus(w http.ResponseWriter, status int, e *Error) {
	if e.Code == codeUnauthenticated && w.Header().Get("WWW-Authenticate") == "" {
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
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(e.RetryAfter, 10))
	}
	writeJSON(w, status, Failure{e})
}

// encodeOptions encode the door's documents as the registry encodes its
// own.
var encodeOptions = jsonv2.JoinOptions(jsonv2.Deterministic(true))

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

// RawJSON is a JSON value of a document (a tool's output, a task's
// questions, an approval's input), written as the registry made it and
// read as it came.
type RawJSON []byte

// MarshalJSON returns j as it is.
func (j RawJSON) MarshalJSON() ([]byte, error) { return j, nil }

// UnmarshalJSON keeps b as it came.
func (j *RawJSON) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}
