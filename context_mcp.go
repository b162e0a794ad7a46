package carmy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpform"
	"github.com/carmy-dev/carmy/internal/shape"
)

// Progress tells the caller how far the call has come: done of total (0
// when the total is unknown), with a message for people. It reaches an MCP
// client that asked for progress with a progress token; for every other
// caller (in process, over HTTP, an MCP client that did not ask) it does
// nothing.
func (c Context) Progress(done, total float64, msg string) {
	if c.Context == nil {
		return
	}
	if p := peerOf(c.Context); p != nil {
		p.progress(c.Context, done, total, msg)
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
	if p := peerOf(c.Context); p != nil {
		p.log(c.Context, level, msg, args)
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
// in process or over HTTP, or an MCP client that cannot elicit;
// CodeInvalidInput for an answer that does not fit the struct. Returning
// that error from the tool tells the caller why the tool could not go on.
//
// Over the sessionless MCP protocol (2026-07-28), a server cannot ask in
// the middle of a call: the first Elicit with no answer yet ends the run
// (its error, returned by the tool, does that), the client asks its user
// and calls again with the answer, and the tool runs again from the start,
// this time getting the answer. Work done before Elicit is therefore
// repeated: ask before acting.
func (c Context) Elicit(message string, into any) (accepted bool, err error) {
	v := reflect.ValueOf(into)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false, &Error{Code: CodeInternal, Message: "Elicit needs a pointer to a struct", Err: fmt.Errorf("Elicit(%T)", into)}
	}
	var p *mcpPeer
	if c.Context != nil {
		p = peerOf(c.Context)
	}
	if p == nil || !p.canElicit() {
		return false, Errorf(CodeUnavailable, "the client cannot ask its user for input")
	}
	node, err := shape.Of(v.Elem().Type())
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "Elicit cannot model its form", Err: err}
	}
	form, err := mcpform.Form(shape.Schema(node))
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "Elicit cannot ask for these fields: a form holds strings, numbers, booleans and lists of choices", Err: err}
	}
	res, err := p.elicit(c.Context, &mcp.ElicitParams{Message: message, RequestedSchema: form})
	var e *Error
	if errors.As(err, &e) && errors.Is(err, errNeedsInput) {
		return false, e
	}
	if err != nil {
		return false, &Error{Code: CodeUnavailable, Message: "the client could not ask its user for input", Retryable: true, Err: err}
	}
	if res.Action != "accept" {
		return false, nil
	}
	answer, err := json.Marshal(res.Content)
	if err != nil {
		return false, &Error{Code: CodeInternal, Message: "the user's answer cannot be read", Err: err}
	}
	fresh := reflect.New(v.Elem().Type())
	problems, fatal := shape.Decode(node, answer, fresh.Elem())
	if !fatal {
		problems = append(problems, shape.Check(node, fresh.Elem(), problems)...)
	}
	if len(problems) > 0 {
		e := &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the form: " + describe(FieldError(problems[0])), Fields: make([]FieldError, len(problems))}
		for i, pr := range problems {
			e.Fields[i] = FieldError(pr)
		}
		e.Fields = limitFields(e.Fields)
		return false, e
	}
	v.Elem().Set(fresh.Elem())
	return true, nil
}
