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
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy/store"
)

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

// execValue is the context a tool sees, carrying the tool's Context for
// ContextFrom, in one allocation with it: the caller's context held to the
// tool's deadline, as context.WithTimeout would make it, without the
// timer, channel and registration with the caller's context that one makes
// per call. Its Done channel is made only when asked for; the timer of the
// worker that runs the tool ends it at the deadline (job.expire); the
// caller, which waits for the execution anyway, ends it when its own
// context ends; and execute ends it when the call is answered.
type execValue struct {
	context.Context // the caller's
	c               Context
	deadline        time.Time // the tool's, set as its execution starts

	mu   sync.Mutex
	done chan struct{} // made by the first Done
	err  error         // why it ended; nil while it runs
}

func (v *execValue) Value(key any) any {
	if _, ok := key.(contextKey); ok {
		return &v.c
	}
	return v.Context.Value(key)
}

// Deadline is the tool's, or the caller's when that comes first.
func (v *execValue) Deadline() (time.Time, bool) {
	if d, ok := v.Context.Deadline(); ok && (v.deadline.IsZero() || d.Before(v.deadline)) {
		return d, true
	}
	return v.deadline, !v.deadline.IsZero()
}

func (v *execValue) Done() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done == nil {
		v.done = make(chan struct{})
		if v.err != nil {
			close(v.done)
		}
	}
	return v.done
}

func (v *execValue) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// end ends the context with err, once; later calls change nothing.
func (v *execValue) end(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return
	}
	v.err = err
	if v.done != nil {
		close(v.done)
	}
}

// invoke calls the tool, recovering a panic, and encodes its output.
func (r *Registry) invoke(ctx context.Context, execCtx *execValue, t *tool, cc *Context, in reflect.Value) (o outcome) {
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

// execute is the execution stage: the tool runs on input in (decoded and
// validated) under its deadline on a worker, which takes over what the
// call holds, records the outcome and releases it when the tool's code
// returns. The caller is answered then, or at the deadline (after a short
// grace) if the code has not returned.
func (r *Registry) execute(ctx context.Context, t *tool, req *Request, in reflect.Value) (Result, error) {
	ev := req.exec
	cc := &ev.c
	ev.Context, ev.deadline = ctx, time.Now().Add(t.meta.Timeout)
	cc.Context = ev
	defer ev.end(context.Canceled) // as a cancel function would: the call is answered
	req.ExecutionID = cc.ExecutionID
	if req.task != nil {
		req.task.started()
	}
	j := &job{r: r, t: t, cc: cc, ev: ev, in: in, ctx: ctx, held: req.held, done: make(chan outcome, 2)}
	req.held = holds{} // the execution's now
	r.workers.run(j)
	select {
	case o := <-j.done:
		if !o.expired {
			return o.res, o.err
		}
	case <-ctx.Done():
		ev.end(ctx.Err()) // the tool's context ends with its caller's
	}
	// A tool that honours its context returns within moments; only one
	// that does not is left behind.
	grace := time.NewTimer(deadlineGrace)
	defer grace.Stop()
	for {
		select {
		case o := <-j.done:
			if !o.expired {
				return o.res, o.err
			}
		case <-grace.C:
			j.abandoned.Store(true)
			return Result{}, stopError(ctx, t)
		}
	}
}

// job is one execution handed to a worker.
type job struct {
	r         *Registry
	t         *tool
	cc        *Context
	ev        *execValue // the tool's context
	in        reflect.Value
	ctx       context.Context
	held      holds        // taken over from the call
	done      chan outcome // room for the deadline's signal and the outcome: nobody waits to send
	abandoned atomic.Bool
}

// run calls the tool, then records its outcome and releases what the call
// held, before it answers the caller, if the caller still waits.
func (j *job) run() {
	r, t, cc := j.r, j.t, j.cc
	var o outcome
	returned := false
	// Deferred, so that a tool that ends its goroutine with
	// runtime.Goexit still answers, records and releases.
	defer func() {
		if !returned {
			r.logger.Error("carmy: tool exited its goroutine (runtime.Goexit) without returning", "tool", t.meta.Name, "execution_id", cc.ExecutionID)
			o = outcome{err: &Error{Code: CodeInternal, Message: fmt.Sprintf("internal error in %s (execution %s)", t.meta.Name, cc.ExecutionID), Retryable: true, Details: map[string]any{"execution_id": cc.ExecutionID}}}
		}
		if j.abandoned.Load() {
			r.overruns.Add(1)
			r.logger.Warn("carmy: tool returned after its caller was answered", "tool", t.meta.Name, "execution_id", cc.ExecutionID, "timeout", t.meta.Timeout)
		}
		if cc.task != nil {
			o = cc.task.keep(o)
		}
		r.record(t, &j.held, cc.ExecutionID, o)
		if h := handedOff(o.err); h != nil && j.held.lock != nil {
			h.keepTurn(j.held.lock) // the task it became runs in this turn
			j.held.lock = nil
		}
		r.release(j.ctx, t, &j.held)
		j.done <- o
	}()
	o = r.invoke(j.ctx, j.ev, t, cc, j.in)
	returned = true
}

// expire ends the tool's context at its deadline and tells the caller.
// The timer of a worker's previous job may fire late, once this job has
// started: before the deadline, it changes nothing.
func (j *job) expire() {
	if time.Now().Before(j.ev.deadline) {
		return
	}
	j.ev.end(context.DeadlineExceeded)
	select {
	case j.done <- outcome{expired: true}:
	default:
	}
}

// workerIdle is how long an idle worker waits for the next execution
// before it exits.
const workerIdle = 500 * time.Millisecond

// workers runs executions on goroutines that are kept for the next one.
// Every execution needs a goroutine of its own, so that its caller can be
// answered at the deadline whatever the tool does; a fresh goroutine
// would grow its stack on every call through reflection, which costs more
// than the rest of the call. Idle workers exit after workerIdle, or at once
// when the registry closes, so an idle registry holds no goroutine for
// long.
type workers struct {
	jobs chan *job
	stop chan struct{}
	once sync.Once
}

func newWorkers() *workers {
	return &workers{jobs: make(chan *job), stop: make(chan struct{})}
}

// run starts j on an idle worker, or on a new one when all are busy.
func (w *workers) run(j *job) {
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
}

// work runs j, then the jobs it is given until it has been idle for
// workerIdle. One timer per worker, reset for each job, holds the jobs to
// their deadlines.
func (w *workers) work(j *job) {
	var cur atomic.Pointer[job]
	deadline := time.AfterFunc(time.Hour, func() {
		if j := cur.Load(); j != nil {
			j.expire()
		}
	})
	defer deadline.Stop()
	do := func(j *job) {
		cur.Store(j)
		deadline.Reset(time.Until(j.ev.deadline))
		j.run()
		cur.Store(nil)
		deadline.Stop()
	}
	do(j)
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case j := <-w.jobs:
			do(j)
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		case <-w.stop:
			return
		}
	}
}

// close makes idle workers exit; busy ones exit when their job returns.
func (w *workers) close() {
	w.once.Do(func() { close(w.stop) })
}
