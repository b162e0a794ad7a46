package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/canon"
	"github.com/carmy-dev/carmy/internal/shape"
	"github.com/carmy-dev/carmy/store"
)

// tool is a prepared, runnable tool.
type tool struct {
	meta    ToolMetadata
	def     *ToolDef
	inType  reflect.Type // the input struct, struct{} for tools without one
	in      *shape.Node
	out     *shape.Node // nil for tools that return error alone
	args    []reflect.Value
	invoke  func(c *Context, in reflect.Value) (any, error)
	handler CallFunc // the middleware chain around Registry.call
	direct  bool     // no middleware: dispatch calls Registry.call itself
	confirm string   // "confirm:<name>"
	content bool     // the output is Content: MCP content blocks
	// requestID is the input field tagged carmy:"request_id", if any.
	requestID *shape.Field
	// rate and maxInFlight are the tool's limits per principal; zero for
	// none.
	rate        store.Rate
	maxInFlight int
	// askFirst: its questions come before its task ([TaskAfterInput]).
	askFirst bool
	// server is the server the tool is mounted from, "" for the
	// registry's own: the Tool entity's server attribute for policies.
	server string
}

// leaseMargin is added to a tool's timeout to make the leases of its
// idempotency reservations and locks. A shared store renews them while the
// execution lives, so the lease only decides how soon the key of a host
// that died is freed.
const leaseMargin = 30 * time.Second

// reservationLease is how long a call's idempotency reservation lasts
// unless renewed: the longest a healthy call holds it. That is the wait
// for the tool's turn, which is bounded by the tool's timeout, then the
// execution under that timeout, then the margin.
func (t *tool) reservationLease() time.Duration {
	if t.meta.ParallelSafe {
		return t.meta.Timeout + leaseMargin
	}
	return 2*t.meta.Timeout + leaseMargin
}

// deadlineGrace is how long the caller of a tool whose deadline passed
// waits for it to notice before answering without it.
const deadlineGrace = 10 * time.Millisecond

// Execute runs one call through these stages, in this order; the first
// stage that refuses the call answers it, and every failure is an
// [*Error]:
//
//  1. Find the tool: an unknown name is [CodeUnknownTool], with the
//     closest name the caller may call suggested. Everything from here on
//     runs inside the middleware ([Builder.Use]), and every outcome,
//     refusals included, passes the middleware and the audit.
//  2. Check the request id: one that is not 1 to 255 printable ASCII
//     characters, '!' to '~', is [CodeInvalidInput].
//  3. Check permission: the permissions the tool requires, then the host's
//     policy ([Builder.Authorize]), before the input is read;
//     [CodePermissionDenied].
//  4. A tool that runs only as a task ([TaskRequired]) refuses a call that
//     is not one ([CodeInvalidInput]).
//  5. Hold the caller to the tool's limits ([RateLimit], [MaxInFlight]): a
//     call past them is [CodeRateLimited], its input unread.
//  6. Decode and validate the input: [CodeInvalidInput], with every
//     problem found.
//  7. Take the request id from the input's field tagged
//     carmy:"request_id", for a call that carries none.
//  8. Check confirmation ([RequireConfirmation]): a grant for the tool or
//     for this input's canonical form, or a person's approval; otherwise
//     [CodeConfirmationRequired]. Where the call's door can ask the person
//     itself (an MCP client shown a form or the approval's page, a task
//     that waits), it asks here, and an approval given goes on in the same
//     pass: the middleware and the audit see the call once.
//  9. Reserve the request id, for a call that has one: the first call
//     with it runs; a repeat with the same input gets the recorded
//     outcome, replayed (waiting for the execution in flight, if any); a
//     repeat with another input is [CodeConflict].
//  10. Wait for the tool's turn when it is not parallel-safe, at most the
//     tool's timeout (busy: [CodeUnavailable], retryable).
//  11. Use up the approval the call runs by, and write the started audit
//     record of a destructive tool.
//  12. Execute under the tool's deadline with a fresh [Context], and
//     encode the output.
//  13. Record the outcome for the request id (retryable outcomes are not
//     recorded), and release what the call held: its reservation, its
//     turn, its place under [MaxInFlight].
//
// Execute returns when the tool returns, or as soon as ctx is done or the
// tool's deadline passes, whichever comes first; a tool that ignores its
// context keeps its turn and its idempotency reservation until its code
// returns. Execute is safe for concurrent use.
func (r *Registry) Execute(ctx context.Context, c Call) (Result, error) {
	return r.dispatch(ctx, c, via{}, nil)
}

// dispatch runs a call that came through a door with what the door handed
// over (v), or as task run (nil when it is not one), through the tool's
// middleware and the pipeline.
func (r *Registry) dispatch(ctx context.Context, c Call, v via, run *taskRun) (Result, error) {
	t, ok := r.tools[c.Tool]
	if !ok {
		return Result{}, r.unknownTool(ctx, c.Tool, Identity{Principal: c.Principal, Session: c.Session, Permissions: c.Permissions, Metadata: c.Metadata})
	}
	if t.direct {
		// No middleware can keep the request: it stays on the stack.
		req := Request{Tool: t.meta, Call: c, via: v, task: run}
		return r.call(ctx, t, &req)
	}
	return t.handler(ctx, &Request{Tool: t.meta, Call: c, via: v, task: run})
}

// handlerFor builds a tool's middleware chain once.
func (r *Registry) handlerFor(t *tool, mw []Middleware) CallFunc {
	t.confirm = "confirm:" + t.meta.Name
	t.direct = len(mw) == 0
	h := CallFunc(func(ctx context.Context, req *Request) (Result, error) { return r.call(ctx, t, req) })
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// refused logs a refusal of the runtime's (permission, confirmation,
// conflict, busy) at warn and returns it. The record names who asked for
// what and the code; never the input, nor anything from the request that
// could hold a secret. It is logged with the call's context, for handlers
// that add what the context carries about the request.
func (r *Registry) refused(ctx context.Context, t *tool, c *Call, e *Error) *Error {
	r.logger.LogAttrs(ctx, slog.LevelWarn, "carmy: call refused",
		slog.String("principal", c.Principal),
		slog.String("tool", t.meta.Name),
		slog.String("code", string(e.Code)),
		slog.String("request_id", c.RequestID),
		slog.String("remote", remoteAddr(ctx)),
	)
	return e
}

// storeError explains a failure of the store (idempotency, limits) or the
// locker.
func (r *Registry) storeError(ctx context.Context, t *tool, err error) error {
	if ctx.Err() != nil {
		return stopError(ctx, t)
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if e := storeRefusal(t, err); e != nil {
		r.logger.Warn("carmy: call refused by the idempotency store", "tool", t.meta.Name, "reason", e.Details["reason"])
		return e
	}
	r.logger.Error("carmy: the store or locker failed", "tool", t.meta.Name, "error", err)
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s cannot run now: a service it depends on is unavailable; try again", t.meta.Name), Retryable: true, Err: err}
}

type outcome struct {
	res Result
	err error
}

// awaitTurn waits for the turn of a tool that is not parallel-safe, for at
// most the tool's timeout: a call that cannot start within the time it
// would have to run is better answered at once, busy and retryable, than
// left waiting behind executions that may never end.
func (r *Registry) awaitTurn(ctx context.Context, t *tool, c *Call) (store.Lock, error) {
	wctx, cancel := context.WithTimeout(ctx, t.meta.Timeout)
	defer cancel()
	lock, err := r.locker.Acquire(wctx, t.meta.Name, t.meta.Timeout+leaseMargin)
	if err == nil {
		return lock, nil
	}
	if ctx.Err() == nil && wctx.Err() != nil {
		return nil, r.refused(ctx, t, c, &Error{
			Code:      CodeUnavailable,
			Message:   fmt.Sprintf("%s is busy: another call of it did not finish within %v; try again later", t.meta.Name, t.meta.Timeout),
			Retryable: true,
			Details:   map[string]any{"reason": "busy"},
		})
	}
	return nil, r.storeError(ctx, t, err)
}

// execValue is the context a tool sees, the execution's deadline context
// carrying the tool's Context for ContextFrom: one allocation for both.
type execValue struct {
	context.Context
	c Context
}

func (v *execValue) Value(key any) any {
	if _, ok := key.(contextKey); ok {
		return &v.c
	}
	return v.Context.Value(key)
}

// invoke calls the tool, recovering a panic, and encodes its output.
func (r *Registry) invoke(ctx, execCtx context.Context, t *tool, cc *Context, in reflect.Value) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = outcome{err: r.panicked(t, cc.ExecutionID, p)}
		}
	}()
	out, err := t.invoke(cc, in)
	if err != nil {
		return outcome{err: r.toolError(ctx, execCtx, t, cc.ExecutionID, err)}
	}
	b, err := t.encode(out)
	if err != nil {
		return outcome{err: r.internal(t, cc.ExecutionID, err, "the output does not match its schema")}
	}
	return outcome{res: Result{ExecutionID: cc.ExecutionID, Output: b}}
}

// panicked logs a panic with its stack and returns the internal error
// callers see, which holds neither.
func (r *Registry) panicked(t *tool, execID string, p any) *Error {
	return r.internal(t, execID, fmt.Errorf("panic: %v\n%s", p, debug.Stack()), "panic while running a call")
}

// unknownTool is the refusal of a call of a tool that does not exist. It
// suggests only tools the caller may call, whose names it could list.
func (r *Registry) unknownTool(ctx context.Context, name string, caller Identity) *Error {
	msg := fmt.Sprintf("unknown tool %q", name)
	names := r.names
	if r.authorize != nil || r.requiring {
		names = nil
		r.eachVisible(ctx, caller, func(t *tool) { names = append(names, t.meta.Name) })
	}
	if s := shape.Closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if len(names) == 0 {
		msg += "; there is no tool to call"
	} else if len(names) <= 20 {
		msg += "; the tools are " + strings.Join(names, ", ")
	}
	return &Error{Code: CodeUnknownTool, Message: msg}
}

// canonical returns the canonical form of the call's validated input and
// its hex SHA-256, which confirmations, approvals, request ids and audit
// records compare. It is made once per call, when first needed.
func (req *Request) canonical(t *tool) (form []byte, digest string, err error) {
	if req.digest == "" {
		if req.form, err = t.canonicalInput(req.Call.Input); err != nil {
			return nil, "", err
		}
		req.digest = canon.Sum(req.form)
	}
	return req.form, req.digest, nil
}

// canonicalInput returns the canonical form of a validated input: the
// form its digest is taken over, for showing a person what they approve.
// One validated input has one form: key order, white space and number
// notation aside, and an optional member sent as null the same as one left
// out. Numbers are kept exact.
func (t *tool) canonicalInput(input []byte) ([]byte, error) {
	return canon.Form(input, inputModel(t.in))
}

// inputModel is the type model as the canonical form reads it; nil where
// nothing below can be dropped.
func inputModel(n *shape.Node) canon.Model {
	if n == nil {
		return nil
	}
	switch n.Deref().Kind {
	case shape.KindStruct, shape.KindMap, shape.KindSlice, shape.KindArray:
		return canonModel{n.Deref()}
	}
	return nil
}

// canonModel is a struct, map or array node as a [canon.Model]: a member
// that is not required may be null or absent, one input either way.
type canonModel struct{ n *shape.Node }

func (m canonModel) Member(name string) (canon.Model, bool) {
	switch m.n.Kind {
	case shape.KindStruct:
		if f, ok := m.n.Lookup(name); ok {
			return inputModel(f.Node), !f.Required
		}
	case shape.KindMap:
		return inputModel(m.n.Elem), false
	}
	return nil, false
}

func (m canonModel) Items() canon.Model {
	if m.n.Kind == shape.KindSlice || m.n.Kind == shape.KindArray {
		return inputModel(m.n.Elem)
	}
	return nil
}

// decode decodes and validates an input into a new value of the input
// type, returned as a pointer.
func (t *tool) decode(input []byte) (reflect.Value, error) {
	in, fields := decodeValid(t.in, t.inType, input)
	if fields == nil {
		return in, nil
	}
	e := &Error{Code: CodeInvalidInput, Fields: limitFields(fields)}
	if len(fields) == 1 {
		e.Message = fmt.Sprintf("invalid input for %s: %s", t.meta.Name, describe(fields[0]))
	} else {
		e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", t.meta.Name, len(fields))
	}
	return reflect.Value{}, e
}

// decodeValid decodes data into a new value of typ by node's rules and
// checks it by them: a tool's input and the answer to a tool's question
// pass the same checks. It returns a pointer to the value, or every
// problem found and no value; the caller counts them all, and bounds
// what it sends with limitFields.
func decodeValid(node *shape.Node, typ reflect.Type, data []byte) (reflect.Value, []FieldError) {
	v := reflect.New(typ)
	problems, fatal := shape.Decode(node, data, v.Elem())
	if !fatal {
		problems = append(problems, shape.Check(node, v.Elem(), problems)...)
	}
	if len(problems) == 0 {
		return v, nil
	}
	fields := make([]FieldError, len(problems))
	for i, p := range problems {
		fields[i] = FieldError(p)
	}
	return reflect.Value{}, fields
}

func describe(f FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + " " + f.Message
}

// stopError explains why a call stopped before the tool finished: the
// caller went away (cancelled) or a deadline passed (timeout).
func stopError(ctx context.Context, t *tool) *Error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Errorf(CodeCancelled, "the call of %s was cancelled by the caller", t.meta.Name)
	}
	if ctx.Err() != nil {
		return Errorf(CodeTimeout, "the caller's deadline passed before %s finished", t.meta.Name)
	}
	return Errorf(CodeTimeout, "%s did not finish within its timeout of %v", t.meta.Name, t.meta.Timeout)
}

// toolError turns what a tool returned into the error its caller sees.
func (r *Registry) toolError(ctx, execCtx context.Context, t *tool, execID string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if execCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return stopError(ctx, t)
	}
	return r.internal(t, execID, err, "the tool failed")
}

// internal logs a cause and returns the generic error callers see.
func (r *Registry) internal(t *tool, execID string, cause error, what string) *Error {
	r.logger.LogAttrs(context.Background(), slog.LevelError, "carmy: "+what, slog.String("tool", t.meta.Name), slog.String("execution_id", execID), slog.Any("error", cause))
	e := &Error{Code: CodeInternal, Message: fmt.Sprintf("internal error in %s", t.meta.Name), Retryable: true, Err: cause}
	if execID != "" {
		e.Message += " (execution " + execID + ")"
		e.Details = map[string]any{"execution_id": execID}
	}
	return e
}

// callFunc is the invoker of a function declared with Tool.
func (t *tool) callFunc(c *Context, in reflect.Value) (any, error) {
	d := t.def
	var buf [6]reflect.Value // on the stack for the usual arity
	args := append(buf[:0], t.args...)
	if d.ctxParam >= 0 {
		if d.carmyCtx {
			args[d.ctxParam] = reflect.ValueOf(c).Elem()
		} else {
			// A Value of the interface type itself, which Call passes
			// as is; a Value of the dynamic type (*execValue) would be
			// checked against context.Context and boxed on every call.
			args[d.ctxParam] = reflect.ValueOf(&c.Context).Elem()
		}
	}
	if d.inParam >= 0 {
		if d.inPtr {
			args[d.inParam] = in
		} else {
			args[d.inParam] = in.Elem()
		}
	}
	res := d.fn.Call(args)
	var err error
	if ev := res[len(res)-1]; !ev.IsNil() {
		err = ev.Interface().(error)
	}
	if d.outType == nil {
		return nil, err
	}
	return res[0].Interface(), err
}

// funcName returns the fully qualified name of a function, as `carmy gen`
// keys its comments: "example.com/pkg.createOrder".
func funcName(fn reflect.Value) string {
	f := runtime.FuncForPC(fn.Pointer())
	if f == nil {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSuffix(unescapeFuncName(f.Name()), "-fm"), "[...]", "")
}
