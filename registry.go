package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/internal/shape"
	"github.com/carmy-dev/carmy/store"
)

// Confirmation says whether a tool's calls need a grant from the host.
type Confirmation uint8

const (
	// ConfirmationNone: calls run without a grant.
	ConfirmationNone Confirmation = iota
	// ConfirmationRequired: calls need the permission "confirm:<name>", or
	// "confirm:<name>:<digest>" for one input.
	ConfirmationRequired
	// ConfirmationPossible, in a list: the tool declares none, but a
	// policy with @confirm may ask a person's approval of a call
	// ([Builder.Policies]). A tool never declares it.
	ConfirmationPossible
)

// String returns "none", "required" or "possible".
func (c Confirmation) String() string {
	switch c {
	case ConfirmationRequired:
		return "required"
	case ConfirmationPossible:
		return "possible"
	}
	return "none"
}

// MarshalText implements [encoding.TextMarshaler].
func (c Confirmation) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]: "none", "required"
// or "possible".
func (c *Confirmation) UnmarshalText(text []byte) error {
	switch string(text) {
	case "none":
		*c = ConfirmationNone
	case "required":
		*c = ConfirmationRequired
	case "possible":
		*c = ConfirmationPossible
	default:
		return fmt.Errorf("unknown confirmation %q; want none, required or possible", text)
	}
	return nil
}

// ToolMetadata is what a registry publishes about a tool. Its JSON form is
// the one every wire form uses (GET /tools, MCP's _meta): the timeout is
// timeout_ms, in integer milliseconds.
type ToolMetadata struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Effect       Effect          `json:"effect"`
	// Idempotent is true for tools declared with [Idempotent] and for every
	// tool whose effect is [None] or [Read], which change nothing.
	Idempotent   bool          `json:"idempotent"`
	ParallelSafe bool          `json:"parallel_safe"`
	Confirmation Confirmation  `json:"confirmation"`
	Timeout      time.Duration `json:"-"` // timeout_ms in JSON
	// Requires lists the permissions a call needs, every one, sorted:
	// those the tool declares with [Requires] and the one
	// [Builder.EffectPermissions] gives its effect. A hand-written tool
	// declares its own here. A caller that lacks one is refused, and does
	// not see the tool listed.
	Requires []string `json:"requires,omitempty"`
	// Tasks says whether a call may, or must, run as a task ([Tasks]);
	// task_support in JSON, left out for the default, optional.
	Tasks TaskSupport `json:"task_support,omitempty"`
}

// toolMetadataJSON is the JSON form of ToolMetadata, in the order GET
// /tools has always sent its members.
type toolMetadataJSON struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Effect       Effect          `json:"effect"`
	Idempotent   bool            `json:"idempotent"`
	ParallelSafe bool            `json:"parallel_safe"`
	Confirmation Confirmation    `json:"confirmation"`
	TimeoutMS    int64           `json:"timeout_ms"`
	Requires     []string        `json:"requires,omitempty"`
	Tasks        TaskSupport     `json:"task_support,omitzero"`
}

// MarshalJSON writes the metadata with the timeout as timeout_ms.
func (m ToolMetadata) MarshalJSON() ([]byte, error) {
	return jsonv2.Marshal(toolMetadataJSON{m.Name, m.Description, m.InputSchema, m.OutputSchema, m.Effect,
		m.Idempotent, m.ParallelSafe, m.Confirmation, m.Timeout.Milliseconds(), m.Requires, m.Tasks}, encodeOptions)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *ToolMetadata) UnmarshalJSON(data []byte) error {
	var w toolMetadataJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = ToolMetadata{w.Name, w.Description, w.InputSchema, w.OutputSchema, w.Effect, w.Idempotent, w.ParallelSafe,
		w.Confirmation, time.Duration(w.TimeoutMS) * time.Millisecond, w.Requires, w.Tasks}
	return nil
}

func (m ToolMetadata) clone() ToolMetadata {
	m.InputSchema = slices.Clone(m.InputSchema)
	m.OutputSchema = slices.Clone(m.OutputSchema)
	m.Requires = slices.Clone(m.Requires)
	return m
}

// Registry is a built, validated, immutable set of tools. It is safe for
// concurrent use; every call runs under its tool's rules.
type Registry struct {
	tools     map[string]*tool
	names     []string // sorted
	logger    *slog.Logger
	authorize func(Context, ToolMetadata) error
	requiring bool      // some tool requires a permission
	policies  *policies // the Cedar policies; nil for none
	store     store.IdempotencyStore
	locker    store.Locker
	limiter   store.RateLimiter        // of the tools with a RateLimit
	slots     store.ConcurrencyLimiter // of the tools with a MaxInFlight
	ttl       time.Duration
	publicURL string // Builder.PublicURL: the base of approval links
	overruns  atomic.Int64
	workers   *workers
	approvals *approvals
	signer    *mcpserve.Signer // signs the sessionless protocol's request states
	tasks     tasks
	recent    recent // the last calls, for the console
	// observers are told of every decided call: the console's recent
	// calls, and the audit when there are sinks.
	observers []observer

	auditors      []Auditor
	auditFailures atomic.Int64

	// Serving.
	http          *httpServer // the HTTP API, Handler's
	bodyLimit     int64       // of a message over MCP, stdio included
	elicit        formConfirmation
	stdioIdentity Identity
	sessions      *mcpserve.Sessions // MCP sessions over HTTP
	mcpOnce       sync.Once
	mcp           *mcpserve.Server
	mcpConfig     mcpConfig       // the host's additions to the MCP server
	streams       context.Context // done once the registry closes, never before: a server's shutdown ends its own
	endStreams    context.CancelFunc
	tuning        tuning

	closers   []func() error
	closeOnce sync.Once
	closeErr  error
}

// Tools returns the metadata of every tool, sorted by name, whoever may
// call it: [Registry.ToolsFor] gives what one caller may call. The slices
// in it are copies.
func (r *Registry) Tools() []ToolMetadata {
	out := make([]ToolMetadata, len(r.names))
	for i, name := range r.names {
		out[i] = r.tools[name].meta.clone()
	}
	return out
}

// Lookup returns the metadata of the tool with that name.
func (r *Registry) Lookup(name string) (ToolMetadata, bool) {
	t, ok := r.tools[name]
	if !ok {
		return ToolMetadata{}, false
	}
	return t.meta.clone(), true
}

// Close stops the registry's background work, such as the sweeper of the
// default idempotency store, and the tasks it runs (see [Registry.Start]).
// Calls made after Close still run; Close is idempotent. Stores and lockers given to the builder are the caller's to
// close.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		r.workers.close()
		r.endStreams()
		r.tasks.end()
		r.sessions.CloseAll()
		errs := []error{r.http.consoleFiles.remove()}
		for _, c := range r.closers {
			errs = append(errs, c())
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

// Overruns returns how many executions went on after their caller had been
// answered: tools that ignored their deadline or the caller's
// cancellation. Each is also logged when it finally returns.
func (r *Registry) Overruns() int64 { return r.overruns.Load() }

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
	t := r.tools[tool]
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
