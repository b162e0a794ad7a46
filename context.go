package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/carmy-dev/carmy/internal/mcpform"
	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/internal/shape"
)

// Context is what a tool knows about the call it serves. It embeds the
// call's [context.Context], which is cancelled when the caller gives up or
// the tool's deadline passes, and which carries the rest of this struct for
// [ContextFrom].
//
// A tool takes a Context (or a plain context.Context) as a parameter; it is
// never a service locator: dependencies come in [State] parameters.
type Context struct {
	context.Context
	// ExecutionID is a fresh UUIDv7 for every execution.
	ExecutionID string
	// RequestID is the caller's idempotency identity, "" when none was sent.
	RequestID string
	// Session identifies the conversation or connection, as the host saw it.
	Session string
	// Principal is who called, as the host authenticated them; "" when the
	// host authenticated nobody.
	Principal string
	// Permissions is the immutable set of grants the host gave this call.
	Permissions Permissions
	// Metadata carries the host's extra facts about the call. Tools must
	// treat it as read-only.
	Metadata map[string]string
	// Fence is a fencing token for the resource the tool writes to: for a
	// tool that is not parallel-safe, the fence of the serialization lock
	// this execution holds, which grows with every acquisition; otherwise,
	// for a call with a request id, the fence of its idempotency
	// reservation, which grows with every new reservation of that request
	// id, on every host; 0 for a parallel-safe call without a request id.
	// A resource that remembers the highest fence it saw (per lock, or per
	// request id) can refuse the write of an execution whose lock or
	// reservation has since passed to another (its host was paused or cut
	// off for longer than the lease).
	Fence uint64

	log *slog.Logger // the registry's logger, for Log
	// peer is the MCP client of the call, which the MCP door handed the
	// runtime with it; nil for every other caller.
	peer peer
	// task is the task the call runs as, which keeps its progress; nil
	// for a call that is not one.
	task *taskRun
}

type contextKey struct{}

// ContextFrom returns the [Context] of the tool execution that ctx derives
// from, and false when ctx is not derived from one. It lets code deep in a
// tool's call tree, handed only a context.Context, reach the execution id and
// principal.
func ContextFrom(ctx context.Context) (Context, bool) {
	if ctx == nil {
		return Context{}, false
	}
	c, ok := ctx.Value(contextKey{}).(*Context)
	if !ok {
		return Context{}, false
	}
	return *c, true
}

// Permissions is an immutable set of grants, such as "confirm:cancel_order".
// The zero value is the empty set. It is safe for concurrent use.
type Permissions struct {
	sorted []string // sorted, unique, never mutated after construction
}

// NewPermissions returns the set of the given grants; duplicates count once.
func NewPermissions(p ...string) Permissions {
	if len(p) == 0 {
		return Permissions{}
	}
	s := slices.Clone(p)
	slices.Sort(s)
	return Permissions{sorted: slices.Compact(s)}
}

// Has reports whether perm is in the set. The match is exact and
// case-sensitive.
func (p Permissions) Has(perm string) bool {
	_, ok := slices.BinarySearch(p.sorted, perm)
	return ok
}

// List returns the grants, sorted. The slice is a copy.
func (p Permissions) List() []string { return slices.Clone(p.sorted) }

// Len returns the number of grants.
func (p Permissions) Len() int { return len(p.sorted) }

// State is a tool parameter that receives an application dependency, such as
// a database handle, provided once to [Builder.State]. For an interface T it
// receives the one provided value that implements T.
//
//	func getOrder(ctx carmy.Context, db carmy.State[*sql.DB], in GetOrder) (Order, error)
type State[T any] struct {
	Value T
}

// stateType lets the reflection in Tool recognise any State[T] and learn T.
func (State[T]) stateType() stateMarker { return stateMarker{} }

type stateMarker struct{}

// Progress tells the caller how far the call has come: done of total (0
// when the total is unknown), with a message for people. It reaches an MCP
// client that asked for progress with a progress token; for every other
// caller (in process, over HTTP, an MCP client that did not ask) it does
// nothing, except that a call run as a task keeps the last progress on its
// task, for whoever reads it.
func (c Context) Progress(done, total float64, msg string) {
	if c.Context == nil {
		return
	}
	if c.peer != nil {
		c.peer.Progress(c.Context, done, total, msg)
	}
	if c.task != nil {
		c.task.report(done, total, msg)
	}
}

// Log writes a message to the registry's logger, with the execution id,
// and sends it to the MCP client of the call, if any, which gets it at or
// above the log level it chose (logging/setLevel, or the level in the
// request's metadata in the sessionless protocol). args are key-value
// pairs or [slog.Attr] values, as for [slog.Logger.Log]; the client gets
// them as the fields of an object beside "message".
func (c Context) Log(level slog.Level, msg string, args ...any) {
	if c.Context == nil {
		return
	}
	if c.log != nil {
		c.log.Log(c.Context, level, msg, append(args[:len(args):len(args)], "execution_id", c.ExecutionID)...)
	}
	if c.peer != nil {
		c.peer.Log(c.Context, level, msg, args)
	}
}

// Elicit asks the user of the MCP client, through the client, for the
// fields of into, a pointer to a struct: the client shows message and a
// form built from the struct's schema (the one carmy derives for a tool's
// input), and the answer is decoded and validated into into, as an input
// is. MCP forms hold flat objects of strings, numbers, booleans, choices
// of strings and lists of them: a field with choices (oneof) is shown as
// one, an optional field (omitempty) is not required, and what a form
// cannot say (a pattern, an exclusive bound) is checked on the answer. A
// struct with other fields (a nested struct, a list of free values) gets
// CodeInternal. Only clients that declared elicitation, in a protocol
// version that has it (2025-06-18 and later), are asked.
//
// It returns true when the user answered; false with a nil error when they
// declined or dismissed the form, leaving into as it was. It returns false
// and an [*Error] when nobody can be asked: CodeUnavailable for a caller
// in process or over HTTP (unless the call runs as a task), or an MCP
// client that cannot elicit; CodeInvalidInput for an answer that does not
// fit the struct; CodeTimeout or CodeCancelled when the call stops while
// it waits. Returning that error from the tool tells the caller why the
// tool could not go on.
//
// In a task started over HTTP or in Go ([Registry.Start]), Elicit waits:
// the task is input_required with the question ([Task.Questions]) until
// someone answers it, on any host ([Task.Answer], POST /tasks/{id}/input),
// under the tool's timeout and the task's cancellation.
//
// Over the sessionless MCP protocol (2026-07-28), a server cannot ask in
// the middle of a call: the first Elicit with no answer yet ends the run
// (its error, returned by the tool, does that), the client asks its user
// and calls again with the answer, and the tool runs again from the start,
// this time getting the answer. Work done before Elicit is therefore
// repeated: ask before acting. The questions a run asks before returning
// go in the same round, so a tool that asks all its questions before
// checking their errors asks them at once. A question goes by its form's
// type name in snake_case (user_name for UserName, user_name_2 for a second
// one); the request state that carries the rounds, and the answers of the
// rounds before, is signed by the server and bound to the caller, the tool
// and the input: a state changed or made for another call is refused
// before the tool runs, and an answer to a question not asked is never
// taken. A client that did not declare elicitation gets, when the tool
// returns Elicit's error, the protocol's missing capability error.
func (c Context) Elicit(message string, into any) (accepted bool, err error) {
	v := reflect.ValueOf(into)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false, &Error{Code: CodeInternal, Message: "Elicit needs a pointer to a struct", Err: fmt.Errorf("Elicit(%T)", into)}
	}
	p := c.peer
	if c.Context == nil || p == nil {
		return false, Errorf(CodeUnavailable, "the client cannot ask its user for input")
	}
	if err := p.elicitable(); err != nil {
		return false, err
	}
	node, err := shape.Of(v.Elem().Type())
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "Elicit cannot model its form", Err: err}
	}
	form, err := mcpform.Form(shape.Schema(node))
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "Elicit cannot ask for these fields: a form holds strings, numbers, booleans and lists of choices", Err: err}
	}
	res, err := p.Elicit(c.Context, questionName(v.Elem().Type()), question{Message: message, Form: form})
	var refusal *Error
	if errors.As(err, &refusal) { // the door's own answer
		return false, refusal
	}
	if err != nil {
		return false, askFailed(c.Context, err)
	}
	if res.Action != "accept" {
		return false, nil
	}
	answer, err := json.Marshal(res.Content)
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "the user's answer cannot be read", Err: err}
	}
	fresh, fields := decodeValid(node, v.Elem().Type(), answer)
	if fields != nil {
		return false, &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the form: " + describe(fields[0]), Fields: limitFields(fields)}
	}
	v.Elem().Set(fresh.Elem())
	return true, nil
}

// ElicitSchema asks the user of the MCP client for the answer to a form
// written out as a JSON Schema, the way a mounted upstream's questions
// reach the caller: schema is MCP's requested schema (a flat object of
// strings, numbers, booleans and choices), sent as it is. It returns the
// answer as raw JSON, checked against schema, and true when the user
// answered; nil and false with a nil error when they declined or
// dismissed the form; and an [*Error] when nobody can be asked, as
// [Context.Elicit] does (CodeUnavailable for a caller that cannot be
// asked, CodeInvalidInput for a schema that does not compile or an answer
// that does not fit it).
func (c Context) ElicitSchema(message string, schema json.RawMessage) (answer json.RawMessage, accepted bool, err error) {
	return c.elicitSchema("question", message, schema)
}

// elicitSchema is [Context.ElicitSchema] with the name the question goes
// by in the sessionless protocol (a mounted upstream's own key for it).
func (c Context) elicitSchema(name, message string, schema json.RawMessage) (answer json.RawMessage, accepted bool, err error) {
	p := c.peer
	if c.Context == nil || p == nil {
		return nil, false, Errorf(CodeUnavailable, "the client cannot ask its user for input")
	}
	if err := p.elicitable(); err != nil {
		return nil, false, err
	}
	form, err := shape.CompileOpaque("question", schema)
	if err != nil {
		return nil, false, &Error{Code: CodeInvalidInput, Message: "the question's schema cannot be used: " + err.Error(), Err: err}
	}
	var requested map[string]any
	if err := json.Unmarshal(schema, &requested); err != nil {
		return nil, false, &Error{Code: CodeInvalidInput, Message: "the question's schema is not a JSON object", Err: err}
	}
	res, err := p.Elicit(c.Context, name, question{Message: message, Form: requested})
	var refusal *Error
	if errors.As(err, &refusal) {
		return nil, false, refusal
	}
	if err != nil {
		return nil, false, askFailed(c.Context, err)
	}
	if res.Action != "accept" {
		return nil, false, nil
	}
	if answer, err = json.Marshal(res.Content); err != nil {
		return nil, false, &Error{Code: CodeInternal, Message: "the user's answer cannot be read", Err: err}
	}
	if problems := form.Validate(answer); len(problems) > 0 {
		fields := make([]FieldError, len(problems))
		for i, pr := range problems {
			fields[i] = FieldError(pr)
		}
		return nil, false, &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the form: " + describe(fields[0]), Fields: limitFields(fields)}
	}
	return answer, true, nil
}

// elicitURL sends the caller's person to a web page (URL elicitation), as
// a mounted upstream that may do so asks: the client shows message and
// url, and the person's action ("accept", "decline" or "cancel") is the
// answer, the question going by name in the sessionless protocol. It
// fails where nobody can be asked.
func (c Context) elicitURL(name, message, url, id string) (string, error) {
	if c.Context == nil || c.peer == nil {
		return "", Errorf(CodeUnavailable, "the client cannot send its user to a page")
	}
	res, err := c.peer.Elicit(c.Context, name, question{Mode: "url", Message: message, URL: url, ElicitationID: id})
	if err != nil {
		return "", err
	}
	return res.Action, nil
}

// questionName is the name a question for the fields of t goes by in the
// sessionless protocol: its type's name in snake_case (user_name for
// UserName), "question" for a type without a name.
func questionName(t reflect.Type) string {
	name, _, _ := strings.Cut(t.Name(), "[") // a generic type's arguments
	if name == "" {
		return "question"
	}
	return naming.SnakeCase(name)
}
