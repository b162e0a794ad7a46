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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/carmy-dev/carmy/internal/shape"
)

// tool is a prepared, runnable tool.
type tool struct {
	meta   ToolMetadata
	def    *ToolDef
	inType reflect.Type // the input struct, struct{} for tools without one
	in     *shape.Node
	out    *shape.Node // nil for tools that return error alone
	args   []reflect.Value
	invoke func(c *Context, in reflect.Value) (any, error)
	// turn serializes executions of a tool that is not parallel-safe: a
	// token is held from start until the tool's code returns.
	turn chan struct{}
}

// Execute runs one call: it finds the tool, decodes and validates the
// input, and runs the tool under its rules: deadline, serialization, panic
// recovery. Every failure is an [*Error].
//
// Execute returns when the tool returns, or as soon as ctx is done or the
// tool's deadline passes, whichever comes first.
func (r *Registry) Execute(ctx context.Context, c Call) (Result, error) {
	t, ok := r.tools[c.Tool]
	if !ok {
		return Result{}, r.unknownTool(c.Tool)
	}
	in, err := t.decode(c.Input)
	if err != nil {
		return Result{}, err
	}
	return r.execute(ctx, t, &c, in)
}

func (r *Registry) unknownTool(name string) *Error {
	msg := fmt.Sprintf("unknown tool %q", name)
	if s := shape.Closest(name, r.names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if len(r.names) <= 20 {
		msg += "; the tools are " + strings.Join(r.names, ", ")
	}
	return &Error{Code: CodeUnknownTool, Message: msg}
}

// decode decodes and validates an input into a new value of the input
// type, returned as a pointer.
func (t *tool) decode(input []byte) (reflect.Value, error) {
	in := reflect.New(t.inType)
	problems, fatal := shape.Decode(t.in, input, in.Elem())
	if !fatal {
		problems = append(problems, shape.Check(t.in, in.Elem(), problems)...)
	}
	if len(problems) == 0 {
		return in, nil
	}
	e := &Error{Code: CodeInvalidInput, Fields: make([]FieldError, len(problems))}
	for i, p := range problems {
		e.Fields[i] = FieldError(p)
	}
	if len(problems) == 1 {
		e.Message = fmt.Sprintf("invalid input for %s: %s", t.meta.Name, describe(e.Fields[0]))
	} else {
		e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", t.meta.Name, len(problems))
	}
	return reflect.Value{}, e
}

func describe(f FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + " " + f.Message
}

type outcome struct {
	out      any
	err      error
	panicked bool
}

// execute runs a decoded input under the tool's deadline and turn.
func (r *Registry) execute(ctx context.Context, t *tool, c *Call, in reflect.Value) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, stopError(t, ctx)
	}
	if t.turn != nil {
		select {
		case t.turn <- struct{}{}:
		case <-ctx.Done():
			return Result{}, stopError(t, ctx)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		t.release()
		return Result{}, r.internal(t, "", err, "cannot make an execution id")
	}
	execID := id.String()
	execCtx, cancel := context.WithTimeout(ctx, t.meta.Timeout)
	cc := &Context{
		ExecutionID: execID,
		RequestID:   c.RequestID,
		Session:     c.Session,
		Principal:   c.Principal,
		Permissions: NewPermissions(c.Permissions...),
		Metadata:    c.Metadata,
	}
	cc.Context = context.WithValue(execCtx, contextKey{}, cc)
	done := make(chan outcome, 1)
	go func() {
		defer t.release()
		defer func() {
			if p := recover(); p != nil {
				r.logger.Error("carmy: tool panicked", "tool", t.meta.Name, "execution_id", execID, "panic", p, "stack", string(debug.Stack()))
				done <- outcome{err: fmt.Errorf("panic: %v", p), panicked: true}
			}
		}()
		out, err := t.invoke(cc, in)
		if execCtx.Err() != nil && ctx.Err() == nil && errors.Is(context.Cause(execCtx), context.DeadlineExceeded) {
			r.logger.Warn("carmy: tool returned after its deadline", "tool", t.meta.Name, "execution_id", execID, "timeout", t.meta.Timeout)
		}
		done <- outcome{out: out, err: err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-execCtx.Done():
		select {
		case o = <-done: // it finished just in time
		default:
			cancel()
			return Result{}, stopError(t, ctx)
		}
	}
	cancel()
	if o.panicked {
		return Result{}, &Error{Code: CodeInternal, Message: fmt.Sprintf("internal error in %s (execution %s)", t.meta.Name, execID), Retryable: true, Err: o.err, Details: map[string]any{"execution_id": execID}}
	}
	if o.err != nil {
		return Result{}, r.toolError(t, execID, execCtx, ctx, o.err)
	}
	out, err := t.encode(o.out)
	if err != nil {
		return Result{}, r.internal(t, execID, err, "the output does not match its schema")
	}
	return Result{ExecutionID: execID, Output: out}, nil
}

func (t *tool) release() {
	if t.turn != nil {
		<-t.turn
	}
}

// stopError explains why a call stopped before the tool finished: the
// caller went away (cancelled) or a deadline passed (timeout).
func stopError(t *tool, ctx context.Context) *Error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Errorf(CodeCancelled, "the call of %s was cancelled by the caller", t.meta.Name)
	}
	if ctx.Err() != nil {
		return Errorf(CodeTimeout, "the caller's deadline passed before %s finished", t.meta.Name)
	}
	return Errorf(CodeTimeout, "%s did not finish within its timeout of %v", t.meta.Name, t.meta.Timeout)
}

// toolError turns what a tool returned into the error its caller sees.
func (r *Registry) toolError(t *tool, execID string, execCtx, ctx context.Context, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if execCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return stopError(t, ctx)
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

var encodeOptions = jsonv2.JoinOptions(jsonv2.Deterministic(true))

// encode turns a tool's output into JSON that matches its schema.
func (t *tool) encode(out any) ([]byte, error) {
	if t.out == nil {
		return []byte("null"), nil
	}
	if t.out.Checked() && out != nil {
		if problems := shape.Check(t.out, reflect.ValueOf(out), nil); len(problems) > 0 {
			return nil, fmt.Errorf("%s: %s", problems[0].Path, problems[0].Message)
		}
	}
	return jsonv2.Marshal(out, encodeOptions)
}

// callFunc is the invoker of a function declared with Tool.
func (t *tool) callFunc(c *Context, in reflect.Value) (any, error) {
	d := t.def
	args := make([]reflect.Value, len(t.args))
	copy(args, t.args)
	if d.ctxParam >= 0 {
		if d.carmyCtx {
			args[d.ctxParam] = reflect.ValueOf(c).Elem()
		} else {
			args[d.ctxParam] = reflect.ValueOf(c.Context)
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
	return strings.TrimSuffix(f.Name(), "-fm")
}

func marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, encodeOptions) }

func unmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }
