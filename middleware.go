package carmy

import (
	"context"
	"log/slog"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// CallFunc runs one call of a tool that has been found. The runtime's own
// handler, innermost, runs the stages that follow finding the tool, in the
// order [Registry.Execute] states: request id, permission, limits, decode
// and validate, confirmation, reservation of the request id, the tool's
// turn, execution, record.
type CallFunc func(ctx context.Context, req *Request) (Result, error)

// Middleware wraps the handler of every call of a found tool: it sees a
// call before any of the runtime's stages, and its outcome after them
// all, refusals, replays and executions alike. Middleware added with
// [Builder.Use] runs in the order given, the first outermost.
type Middleware func(next CallFunc) CallFunc

// Request is one call as middleware sees it.
type Request struct {
	// Tool is the tool's metadata. Its schemas must not be modified.
	Tool ToolMetadata
	// Call is the call as the host made it, raw input included.
	Call Call
	// ExecutionID is set by the runtime once the call has one: a new
	// execution's id, or the original id of a replayed outcome. Read it
	// after next returns.
	ExecutionID string
	// Replayed is set by the runtime when the outcome is a recorded one.
	Replayed bool

	// approval is the approval that decided a call needing confirmation,
	// set by the runtime: the one it runs by (used, naming its approver),
	// or the pending or denied one it was refused by. For the audit
	// record, which names it and its approver.
	approval *store.Approval
	// form and digest are the canonical form of the validated input and
	// its hex SHA-256, made once per call by canonical.
	form   []byte
	digest string
	// via is what the door the call came through handed over with it.
	via
	// task is the task the call runs as, if any.
	task *taskRun
	// policy is what the policies decided about the call; nil without
	// policies.
	policy *policyOutcome

	// What the pipeline (run) carries from stage to stage: the tool's
	// Context, what the call holds until release, and whether the rate
	// counted the call (limit).
	exec  *execValue
	held  holds
	rated bool
}

// Logging returns middleware that logs one record per call: execution id,
// request id, tool, effect, principal, code ("ok" on success), duration and
// whether the outcome was replayed. It never logs input values. Internal
// errors are logged at error level, other refusals at warn, the rest at
// info.
func Logging(l *slog.Logger) Middleware {
	return func(next CallFunc) CallFunc {
		return func(ctx context.Context, req *Request) (Result, error) {
			start := time.Now()
			res, err := next(ctx, req)
			level, code := slog.LevelInfo, outcomeCode(err)
			if err != nil {
				level = slog.LevelWarn
				if code == CodeInternal {
					level = slog.LevelError
				}
			}
			l.LogAttrs(ctx, level, "carmy call",
				slog.String("execution_id", req.ExecutionID),
				slog.String("request_id", req.Call.RequestID),
				slog.String("tool", req.Tool.Name),
				slog.String("effect", req.Tool.Effect.String()),
				slog.String("principal", req.Call.Principal),
				slog.String("code", string(code)),
				slog.Duration("duration", time.Since(start)),
				slog.Bool("replayed", req.Replayed),
			)
			return res, err
		}
	}
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
