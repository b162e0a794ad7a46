// Package adapt is what the adapters of agent frameworks (the modules under
// adapters/) share, with the llm package where it applies: a model's tool
// call run through [carmy.Registry.Execute] for a caller (or as a task
// waited for, for a tool that runs only as one), its outcome as the model reads it
// on every door, the approval a call waits for, and the ids of the calls
// of a model's turn for frameworks that do not hand a tool the id of its
// call.
package adapt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/policy"
)

// Outcome is what became of one tool call.
type Outcome struct {
	Output json.RawMessage // the tool's output, when it ran (or was replayed)
	Err    *carmy.Error    // why it did not, as every caller sees it
	// Pending is the approval the call waits for, when a person must
	// confirm it first (Err is then confirmation_required).
	Pending *Approval
}

// Approval is a call's wait for a person's decision: what a framework's
// interrupt carries to the person and back.
type Approval struct {
	ID    string `json:"approval_id"`
	Tool  string `json:"tool"`
	Input string `json:"input"` // the JSON text the model sent
	// Shown is Input as a person is to be shown it before deciding:
	// indented, every character that could hide or disguise text escaped
	// as \uXXXX, as carmy's console and MCP prompt show an input.
	Shown     string `json:"shown"`
	URL       string `json:"approval_url,omitempty"`
	Expires   string `json:"expires,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Of reports whether input is the input the approval was asked for (but
// for white space): a person's decision is recorded only for the input
// they were shown.
func (a Approval) Of(input []byte) bool { return sameJSON([]byte(a.Input), input) }

// Run runs a model's call of tool with input (JSON) for the caller the
// options describe, with requestID (the framework's id of the call, if
// any) as its request id.
func Run(ctx context.Context, reg *carmy.Registry, caller []carmy.CallOption, tool string, input []byte, requestID string) Outcome {
	c := carmy.Call{Input: input}
	for _, o := range caller {
		o(&c)
	}
	c.Tool, c.RequestID = tool, requestID
	res, err := Execute(policy.WithDoor(ctx, "adapter"), reg, c, TaskOnly(reg, tool))
	if err == nil {
		return Outcome{Output: res.Output}
	}
	o := Outcome{Err: publicError(err)}
	if o.Err.Code == carmy.CodeConfirmationRequired {
		if id, _ := o.Err.Details["approval_id"].(string); id != "" {
			url, _ := o.Err.Details["approval_url"].(string)
			expires, _ := o.Err.Details["expires"].(string)
			o.Pending = &Approval{ID: id, Tool: tool, Input: string(input), Shown: shown(input), URL: url, Expires: expires, RequestID: requestID}
		}
	}
	return o
}

// TaskOnly reports whether reg's tool runs only as a task
// ([carmy.TaskRequired]).
func TaskOnly(reg *carmy.Registry, tool string) bool {
	m, ok := reg.Lookup(tool)
	return ok && m.Tasks == carmy.TaskRequired
}

// Execute runs c, or, for a tool that runs only as a task (taskOnly),
// starts it as one and waits for it: in process nothing times out, and a
// model is never offered a tool it cannot call. ctx bounds the wait; a task
// whose caller stopped waiting goes on, and a call with its request id gets
// it.
func Execute(ctx context.Context, reg *carmy.Registry, c carmy.Call, taskOnly bool) (carmy.Result, error) {
	if !taskOnly {
		return reg.Execute(ctx, c)
	}
	task, err := reg.Start(ctx, c)
	if err != nil {
		return carmy.Result{}, err
	}
	return task.Wait(ctx)
}

// shown is an input as a person is shown it; the input as it is when it
// is not JSON, which validation then refuses.
func shown(input []byte) string {
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	text, err := approve.Text(input)
	if err != nil {
		return string(input)
	}
	return text
}

// Decide records a person's decision on approval id, as the person's
// answer to a framework's interrupt. An approval already decided keeps its
// decision: the call that follows gets what it says.
func Decide(ctx context.Context, reg *carmy.Registry, id string, approve bool, approver string) *carmy.Error {
	if err := reg.Decide(policy.WithDoor(ctx, "adapter"), id, approve, approver); err != nil && carmy.CodeOf(err) != carmy.CodeConflict {
		return publicError(err)
	}
	return nil
}

// publicError is an error of Execute as callers see it: Execute's
// failures are all *carmy.Error values; anything else is internal, its
// text never shown.
func publicError(err error) *carmy.Error {
	var e *carmy.Error
	if errors.As(err, &e) {
		return e
	}
	return &carmy.Error{Code: carmy.CodeInternal, Message: "internal error", Retryable: true}
}

// ErrorJSON is the error object the model reads on every door (code,
// message, fields, details, retryable): MCP's text content of a failed
// call, HTTP's error body.
func (o Outcome) ErrorJSON() json.RawMessage {
	b, err := json.Marshal(o.Err)
	if err != nil { // details a tool filled with something JSON cannot hold
		b, _ = json.Marshal(&carmy.Error{Code: o.Err.Code, Message: o.Err.Message, Fields: o.Err.Fields, Retryable: o.Err.Retryable})
	}
	return b
}

// Value is the outcome as a JSON value, for frameworks whose tool results
// carry no error flag: the output, or {"error": <the error object>}.
func (o Outcome) Value() json.RawMessage {
	if o.Err == nil {
		return o.Output
	}
	return append(append([]byte(`{"error":`), o.ErrorJSON()...), '}')
}

// Text is the output as an MCP text block shows it: a JSON string is the
// text itself, anything else its JSON.
func (o Outcome) Text() string {
	if o.Err != nil {
		return string(o.Value())
	}
	var s string
	if len(o.Output) > 0 && o.Output[0] == '"' && json.Unmarshal(o.Output, &s) == nil {
		return s
	}
	return string(o.Output)
}
