package carmy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/shape"
	jsonv2 "github.com/go-json-experiment/json"
)

// Call is one request to run a tool.
type Call struct {
	Tool string
	// Input is the JSON input; nil, empty, whitespace or null mean {}.
	Input json.RawMessage
	// RequestID is the caller's idempotency identity for this call.
	RequestID string
	Session   string
	Principal string
	// Permissions are the grants the host gives this call. Only the host
	// sets them: never copy them from what a caller sent.
	Permissions []string
	Metadata    map[string]string
}

// Result is the outcome of a successful call.
type Result struct {
	ExecutionID string
	Output      json.RawMessage
	// Replayed marks the recorded result of an earlier execution with the
	// same request id, returned instead of running the tool again.
	Replayed bool
}

// CallOption sets a field of the [Call] that [Invoke] makes.
type CallOption func(*Call)

// WithPrincipal sets who is calling.
func WithPrincipal(p string) CallOption { return func(c *Call) { c.Principal = p } }

// WithSession sets the session the call belongs to.
func WithSession(s string) CallOption { return func(c *Call) { c.Session = s } }

// WithPermissions adds grants to the call.
func WithPermissions(p ...string) CallOption {
	return func(c *Call) { c.Permissions = append(c.Permissions, p...) }
}

// WithRequestID sets the idempotency identity of the call.
func WithRequestID(id string) CallOption { return func(c *Call) { c.RequestID = id } }

// WithMetadata adds one metadata entry to the call.
func WithMetadata(key, value string) CallOption {
	return func(c *Call) {
		if c.Metadata == nil {
			c.Metadata = map[string]string{}
		}
		c.Metadata[key] = value
	}
}

// Invoke calls a tool from Go: it encodes input as JSON (nil means {}; a
// json.RawMessage or []byte is sent as is; a value of the tool's input type,
// or a pointer to one, is written as its schema says), runs
// [Registry.Execute] and decodes the output into Out. Errors are [*Error]
// values.
func Invoke[Out any](ctx context.Context, r *Registry, tool string, input any, opts ...CallOption) (Out, error) {
	var zero Out
	c := Call{Tool: tool}
	for _, o := range opts {
		o(&c)
	}
	t := r.tab().tools[tool]
	switch in := input.(type) {
	case nil:
	case json.RawMessage:
		c.Input = in
	case []byte:
		c.Input = in
	default:
		b, err := encodeInput(t, input)
		if err != nil {
			return zero, &Error{Code: CodeInvalidInput, Message: "the input cannot be encoded as JSON: " + err.Error(), Err: err}
		}
		c.Input = b
	}
	res, err := r.Execute(ctx, c)
	if err != nil {
		return zero, err
	}
	if raw, ok := any(&zero).(*json.RawMessage); ok {
		*raw = res.Output
		return zero, nil
	}
	var out Out
	if t != nil && t.out != nil && t.out.Type == reflect.TypeFor[Out]() {
		// The tool's own output type: read with the model that wrote it.
		if problems := shape.DecodeValue(t.out, res.Output, reflect.ValueOf(&out).Elem()); len(problems) > 0 {
			err := fmt.Errorf("%s", describe(FieldError(problems[0])))
			return zero, &Error{Code: CodeInternal, Message: "the output does not decode into the requested type: " + err.Error(), Err: err}
		}
		return out, nil
	}
	if err := unmarshal(res.Output, &out); err != nil {
		return zero, &Error{Code: CodeInternal, Message: "the output does not decode into the requested type: " + err.Error(), Err: err}
	}
	return out, nil
}

// encodeInput writes an input given as a Go value: with the tool's input
// model when it is of the tool's input type, else with the model of its own
// type, so that inline members, byte arrays and durations are written as
// the schema reads them.
func encodeInput(t *tool, input any) ([]byte, error) {
	v := reflect.ValueOf(input)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, nil // no input: {}
		}
		v = v.Elem()
	}
	if t != nil && t.in != nil && t.inType == v.Type() {
		return encodeValue(t.in, v)
	}
	n, err := shape.Of(v.Type())
	if err != nil {
		return jsonv2.Marshal(input, encodeOptions) // a type carmy cannot model: the JSON library's view of it
	}
	return encodeValue(n, v)
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
//     carmy:"request_id", for a call that carries none; then ask the
//     Cedar policies, if any ([Builder.Policies]), with the validated
//     input: a call none permits, or that one forbids, is
//     [CodePermissionDenied] naming them; a permit with @confirm makes it
//     need confirmation. They are asked again as an approval is used
//     (stage 11) when they changed meanwhile.
//  8. Check confirmation ([RequireConfirmation]): a grant for the tool or
//     for this input's canonical form, or a person's approval; otherwise
//     [CodeConfirmationRequired]. Where the call's door can ask the person
//     itself (an MCP client shown a form or the approval's page, a task
//     that waits), it asks here, and an approval given goes on in the same
//     pass: the middleware and the audit see the call once.
//  9. Reserve the request id, for a call that has one: the first call
//     with it runs; a repeat with the same input gets the recorded
//     outcome, replayed (waiting for the execution in flight, if any); a
//     repeat with another input is [CodeConflict]. A call that stage 8
//     would refuse only looks, before the person is asked: the retry of
//     a call that ran gets that call's outcome, and holds nothing.
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
	t, ok := r.tab().tools[c.Tool]
	if !ok {
		return Result{}, r.unknownTool(ctx, c.Tool, Identity{Principal: c.Principal, Session: c.Session, Permissions: c.Permissions, Metadata: c.Metadata})
	}
	if t.direct {
		return r.callDirect(ctx, t, c, v, run)
	}
	return t.handler(ctx, &Request{Tool: t.meta, Call: c, via: v, task: run})
}

// callDirect runs a call of a tool without middleware, which cannot keep
// the request: it stays on the stack, in this frame, not in dispatch's,
// which stays small under a middleware chain's frames.
//
//go:noinline
func (r *Registry) callDirect(ctx context.Context, t *tool, c Call, v via, run *taskRun) (Result, error) {
	req := Request{Tool: t.meta, Call: c, via: v, task: run}
	return r.call(ctx, t, &req)
}

// unknownTool is the refusal of a call of a tool that does not exist. It
// suggests only tools the caller may call, whose names it could list.
func (r *Registry) unknownTool(ctx context.Context, name string, caller Identity) *Error {
	msg := fmt.Sprintf("unknown tool %q", name)
	names := r.tab().names
	if r.authorize != nil || r.requiring.Load() {
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
