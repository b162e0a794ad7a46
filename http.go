package carmy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/httpapi"
	"github.com/carmy-dev/carmy/store"
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
func (r *Registry) Handler() http.Handler { return r.http.srv.Handler() }

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
func (r *Registry) ConsoleURL(base string) string { return r.http.srv.ConsoleURL(base) }

// StatusOf returns the HTTP status that fits an error's code.
func StatusOf(err error) int { return httpapi.Status(string(CodeOf(err))) }

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

// httpDoor wires the registry to its HTTP door (package httpapi), as
// mcp.go wires the MCP door: it is the door's [httpapi.Host], translating
// between the registry's types and the door's, and it is how the rest of
// the registry reaches the door (the console, the servers).
type httpDoor struct {
	r    *Registry
	auth Authenticator // nil: every caller is the anonymous principal ""
	srv  *httpapi.Server
}

// newHTTPDoor is the HTTP door of r, once its stores and tools are known.
func newHTTPDoor(b *Builder, r *Registry) *httpDoor {
	h := &httpDoor{r: r, auth: b.auth}
	out, terminal := b.tuning.console()
	h.srv = httpapi.New(h, httpapi.Config{Logger: r.logger, Life: r.life, Authenticated: b.auth != nil,
		Hosts: b.allowHosts, Origins: b.allowOrigins,
		BodyLimit: b.bodyLimit, BodyRead: b.tuning.bodyRead(), ReadHeader: b.tuning.readHeader(), Idle: b.tuning.idle(),
		CodeTTL: b.tuning.codeTTL, HealthGrace: b.healthGraceOrDefault(), Pingers: httpapi.Pingers(r.store, r.locker),
		MCP:      func() http.Handler { return r.mcpServer().HTTPHandler() },
		Metadata: h.metadata(), StdioPrincipal: b.stdioIdentity.Principal, ApprovalWait: maxApprovalWait,
		ConsoleOut: out, ConsoleTerminal: terminal})
	return h
}

// serve serves the routes on ln until ctx is done (see
// [httpapi.Server.Serve]); a host's server drains the registry's tasks
// as it shuts down.
func (h *httpDoor) serve(ctx context.Context, ln net.Listener, drain time.Duration, host bool) error {
	var drained func(context.Context)
	if host {
		drained = h.r.drainTasks
	}
	return h.srv.Serve(ctx, ln, drain, drained)
}

// announceConsole makes the address a server listens on the base of its
// approval URLs, and gives the person who started the server the console
// URL ([httpapi.Server.Announce]).
func (h *httpDoor) announceConsole(addr net.Addr) {
	base := h.srv.Announce(addr)
	h.r.approvals.base.Store(&base)
}

// localConsole returns the base URL and the secret of the registry's
// loopback console, opening it on the first call.
func (h *httpDoor) localConsole(ctx context.Context) (string, *httpapi.Console, error) {
	return h.srv.LocalConsole(ctx)
}

// loopbackLink is the link to approval id on the loopback console, if it
// serves, "" before it opens.
func (h *httpDoor) loopbackLink(id string) string { return h.srv.LoopbackLink(id) }

// login is the HTTP API's one login check, for /mcp.
func (h *httpDoor) login(w http.ResponseWriter, req *http.Request) (Identity, bool) {
	id, ok := h.srv.Login(w, req)
	return Identity(id), ok
}

// observe keeps a call that ended for the console's recent calls.
func (h *httpDoor) observe(_ context.Context, rec AuditRecord, took time.Duration) {
	h.srv.Observe(httpapi.Execution{Time: rec.Time.Add(-took), ExecutionID: rec.ExecutionID, Tool: rec.Tool, Principal: rec.Principal,
		Code: string(rec.Code), DurationMS: float64(took.Microseconds()) / 1000, Replayed: rec.Decision == AuditReplayed,
		ApprovalID: rec.ApprovalID})
}

// Authenticate authenticates a request. Proxies and authenticators
// disagree on which of two Authorization headers counts: none does.
func (h *httpDoor) Authenticate(req *http.Request) (httpapi.Identity, error) {
	if h.auth == nil {
		return httpapi.Identity{}, nil
	}
	_, e := authorization(req)
	if e == nil {
		id, err := h.auth.Authenticate(req)
		switch {
		case err == nil && utf8.ValidString(id.Principal):
			return httpapi.Identity(id), nil
		case err == nil:
			// Answers, logs and records name the principal, as text.
			e = Errorf(CodeUnauthenticated, "authentication failed: the authenticator named a principal that is not valid UTF-8")
		case !errors.As(err, &e):
			e = &Error{Code: CodeUnauthenticated, Message: "authentication failed", Err: err}
		}
	}
	return httpapi.Identity{}, e
}

// Public is err as callers see it.
func (h *httpDoor) Public(err error) *httpapi.Error { return wireError(publicError(err)) }

// wireError is e, within its bounds, as the HTTP door writes it: the one
// conversion of the registry's [Error] to the door's, which cannot import
// the registry that serves it. Every error answer and every task's error
// goes through it; TestErrorDocumentOnEveryDoor keeps the two types one
// document.
func wireError(e *Error) *httpapi.Error {
	w := &httpapi.Error{Code: string(e.Code), Message: e.Message, Details: e.Details, Retryable: e.Retryable}
	if len(e.Fields) > 0 {
		w.Fields = make([]httpapi.FieldError, len(e.Fields))
		for i, f := range e.Fields {
			w.Fields[i] = httpapi.FieldError(f)
		}
	}
	if after, ok := retryAfterSeconds(e); ok {
		w.RetryAfter = after
	}
	return w
}

// Tools lists the tools id may call; the list depends on who asks.
func (h *httpDoor) Tools(ctx context.Context, id httpapi.Identity) any {
	r := h.r
	out := make([]ToolMetadata, 0, len(r.tab().names))
	r.eachVisible(ctx, Identity(id), func(t *tool) {
		m := t.meta // written at once: no deep copy
		m.Confirmation = r.confirmationFor(t)
		out = append(out, m)
	})
	return out
}

// callOf is c as the registry runs it.
func callOf(c httpapi.Call) Call {
	return Call{Tool: c.Tool, Input: c.Input, RequestID: c.RequestID, Session: c.Session, Principal: c.Principal,
		Permissions: c.Permissions, Metadata: withTrace(c.Metadata, c.Traceparent, c.Tracestate)}
}

// Call runs a call that came by req.
func (h *httpDoor) Call(req *http.Request, c httpapi.Call) (httpapi.Result, error) {
	res, err := h.r.Execute(withHTTPRequest(req.Context(), req), callOf(c))
	return httpapi.Result{ExecutionID: res.ExecutionID, Output: httpapi.RawJSON(res.Output), Replayed: res.Replayed}, err
}

// Start starts a call that came by req as a task, when its tool runs as
// one.
func (h *httpDoor) Start(req *http.Request, c httpapi.Call) (store.Task, bool, error) {
	if t, ok := h.r.tab().tools[c.Tool]; !ok || t.meta.Tasks == TaskForbidden {
		return store.Task{}, false, nil
	}
	task, err := h.r.Start(withHTTPRequest(req.Context(), req), callOf(c))
	if err != nil {
		return store.Task{}, true, err
	}
	return task.rec, true, nil
}

// Tasks lists principal's tasks.
func (h *httpDoor) Tasks(ctx context.Context, principal, cursor string, limit int) ([]store.Task, error) {
	page, err := h.r.tasks.store.ListTasks(ctx, principal, cursor, limit)
	if err != nil {
		return nil, h.r.taskStoreError(ctx, err)
	}
	return page, nil
}

// Task reads one of principal's tasks.
func (h *httpDoor) Task(ctx context.Context, id, principal string) (store.Task, error) {
	return h.r.readTask(ctx, id, principal)
}

// AwaitTask returns rec's task once it changed.
func (h *httpDoor) AwaitTask(ctx context.Context, rec store.Task) (store.Task, error) {
	return h.r.awaitTask(ctx, rec)
}

// CancelTask cancels one of principal's tasks.
func (h *httpDoor) CancelTask(ctx context.Context, id, principal string) (store.Task, error) {
	return h.r.cancelTask(ctx, id, principal)
}

// AnswerTask answers the questions one of principal's tasks waits for.
func (h *httpDoor) AnswerTask(ctx context.Context, id, principal string, body []byte) error {
	answers, err := taskAnswers(body)
	if err != nil {
		return err
	}
	return h.r.answerTask(ctx, id, principal, answers)
}

// TaskDoc is rec as the HTTP API shows it to the caller of req.
func (h *httpDoor) TaskDoc(req *http.Request, rec store.Task) httpapi.Task {
	d := httpapi.NewTask(rec)
	if p := h.r.taskOf(rec, rec.Principal).Progress; p != nil {
		d.Progress = (*httpapi.Progress)(p)
	}
	switch rec.Status {
	case store.TaskFailed, store.TaskCancelled:
		d.Error = wireError(taskError(rec).bounded())
	case store.TaskInputRequired:
		d.ApprovalURL = h.r.approvalURL(withHTTPRequest(req.Context(), req), rec.ApprovalID)
	}
	return d
}

// Approvals lists the approvals from after.
func (h *httpDoor) Approvals(ctx context.Context, after string, limit int) ([]store.Approval, error) {
	page, err := h.r.approvals.store.List(ctx, after, limit)
	if err != nil {
		return nil, h.r.approvalStoreError(err)
	}
	return page, nil
}

// Approval reads approval id.
func (h *httpDoor) Approval(ctx context.Context, id string) (store.Approval, error) {
	a, err := h.r.approvals.store.Get(ctx, id)
	if err != nil && !errors.Is(err, store.ErrApprovalNotFound) {
		return a, h.r.approvalStoreError(err)
	}
	return a, err
}

// AwaitDecision returns approval id once it is decided, or when ctx is
// done.
func (h *httpDoor) AwaitDecision(ctx context.Context, id string) (store.Approval, error) {
	a, err := h.r.awaitDecision(ctx, id)
	if err != nil && ctx.Err() == nil {
		return a, h.r.approvalStoreError(err)
	}
	return a, err
}

// Decide decides approval a for who, through the registry's one gate.
func (h *httpDoor) Decide(req *http.Request, a store.Approval, approved bool, who approve.Who) (store.Approval, error) {
	return h.r.decideAs(req.Context(), a, approved, who, Identity{Principal: who.Name(), Permissions: who.Permissions}, "http",
		slog.String("remote", req.RemoteAddr))
}

// ApprovalLink is the page where a person decides approval id, and
// whether a task of this host waits for it.
func (h *httpDoor) ApprovalLink(req *http.Request, id string) (string, bool) {
	_, waits := h.r.approvals.tasks.Load(id)
	return h.r.approvalURL(withHTTPRequest(req.Context(), req), id), waits
}
