// Package anthropiccarmy gives a [carmy.Registry]'s tools to the tool
// runner of anthropic-sdk-go (v2), for one caller: every call the model
// makes runs through [carmy.Registry.Execute] with the caller's principal
// and permissions, so carmy's validation, permissions, confirmation by a
// person, idempotency and audit hold in the runner's loop as on carmy's
// other doors.
//
//	ts, err := anthropiccarmy.New(reg, carmy.WithPrincipal(user), carmy.WithPermissions(grants...))
//	runner := anthropiccarmy.Runner(ts, client.Beta.Messages.NewToolRunner(ts.Tools(), params))
//	msg, err := runner.RunToCompletion(ctx)
//
// The runner has no way to ask a person. A call that needs a person's
// confirmation asks the host's [Confirm] callback, when the Toolset has
// one ([Toolset.Confirm]): approved, the call runs once; denied, the model
// reads the denial. Without one, or when the callback cannot ask, the
// model reads carmy's refusal, which tells it what to tell the user, and
// a person may decide in carmy's console.
package anthropiccarmy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/llm"
)

// Approval is a call that waits for a person's decision.
// Its fields: ID (the approval's, as carmy's console and
// Registry.Decide know it), Tool, Input (the JSON text the model sent),
// Shown (Input as the person is to be shown it, hidden characters escaped,
// as carmy's console shows an input), URL (the console's page for it, when the
// registry serves one), Expires (RFC 3339) and RequestID (the tool call's
// id).
type Approval = adapt.Approval

// Confirm asks a person, in process, whether the call a describes may run,
// and says who decided. It may block until they answer, or until ctx is
// done; an error means the person could not be asked, and the model reads
// carmy's refusal instead.
type Confirm func(ctx context.Context, a Approval) (approve bool, approver string, err error)

// Toolset is a registry's tools for one caller, as tools of the runner.
// Its tools find the id of the call they run in the runner's last message
// ([Runner]), which the runner does not hand them, to make each
// call's request id. A Toolset serves one runner at a time; its tools are
// safe for concurrent use by the calls of one turn.
type Toolset struct {
	reg     *carmy.Registry
	caller  []carmy.CallOption
	tools   []anthropic.BetaTool
	confirm Confirm
	runner  lastMessage
	calls   adapt.Calls
}

// lastMessage is what Toolset needs of a runner: the model's last message,
// whose tool calls the runner is running. BetaToolRunner and
// BetaToolRunnerStreaming have it.
type lastMessage interface {
	LastMessage() *anthropic.BetaMessage
}

// New returns the tools of reg that the caller the options describe may
// call ([carmy.Registry.ToolsFor]), as llm.AnthropicTools defines them:
// carmy's names, descriptions and input schemas, which Anthropic takes as
// they are. A tool whose name Anthropic does not accept is left out, and
// the error says why; the other tools are returned either way.
func New(reg *carmy.Registry, caller ...carmy.CallOption) (*Toolset, error) {
	defs, err := llm.AnthropicTools(reg, caller...)
	ts := &Toolset{reg: reg, caller: caller}
	for _, d := range defs {
		if d.Type != "" {
			continue // Anthropic's tool search: a request's tool, not the runner's
		}
		var s map[string]any
		if e := json.Unmarshal(d.InputSchema, &s); e != nil {
			return nil, fmt.Errorf("anthropiccarmy: the input schema of %s: %w", d.Name, e)
		}
		ts.tools = append(ts.tools, &runnerTool{ts: ts, name: d.Name, desc: d.Description, schema: inputSchema(s)})
	}
	return ts, err
}

// inputSchema is a tool's input schema as the SDK's type holds it: its
// properties and required fields, and every other keyword ($defs,
// additionalProperties, ...) as an extra field. "type" is always object.
func inputSchema(s map[string]any) anthropic.BetaToolInputSchemaParam {
	p := anthropic.BetaToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{}}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				p.Required = append(p.Required, name)
			}
		}
	}
	for k, v := range s {
		if k != "properties" && k != "required" && k != "type" {
			p.ExtraFields[k] = v
		}
	}
	return p
}

// Tools returns the tools, for NewToolRunner.
func (ts *Toolset) Tools() []anthropic.BetaTool { return ts.tools }

// Confirm sets the callback that asks a person about a call that needs
// confirmation, and returns ts.
func (ts *Toolset) Confirm(f Confirm) *Toolset {
	ts.confirm = f
	return ts
}

// Runner makes r the runner whose last message the tools read the ids of
// their calls from, and returns r: a call's id is its request id, so that
// a call run again with the same id (a conversation replayed after a
// crash) is answered with its recorded outcome instead of running twice.
// Without it, calls run without a request id.
func Runner[R lastMessage](ts *Toolset, r R) R {
	ts.runner = r
	return r
}

// runnerTool is one carmy tool as a tool of the runner.
type runnerTool struct {
	ts     *Toolset
	name   string
	desc   string
	schema anthropic.BetaToolInputSchemaParam
}

func (t *runnerTool) Name() string                                    { return t.name }
func (t *runnerTool) Description() string                             { return t.desc }
func (t *runnerTool) InputSchema() anthropic.BetaToolInputSchemaParam { return t.schema }

// Execute runs one call. The model reads the output (a string output as
// its text, anything else as JSON); a refusal or failure is an error whose
// text is the error object carmy's other doors send (code, message, field
// errors), which the runner gives the model as an error result.
func (t *runnerTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	o := adapt.Run(ctx, t.ts.reg, t.ts.caller, t.name, input, t.ts.callID(t.name, input))
	if o.Pending != nil && t.ts.confirm != nil {
		if approve, approver, err := t.ts.confirm(ctx, *o.Pending); err == nil {
			if e := adapt.Decide(ctx, t.ts.reg, o.Pending.ID, approve, approver); e != nil {
				o = adapt.Outcome{Err: e}
			} else {
				o = adapt.Run(ctx, t.ts.reg, t.ts.caller, t.name, input, o.Pending.RequestID)
			}
		}
	}
	if o.Err != nil {
		return nil, modelError(o.ErrorJSON())
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: o.Text()}}}, nil
}

// modelError is an error object, as the model reads it.
type modelError []byte

func (e modelError) Error() string { return string(e) }

// callID is the id of the runner's call of tool with input.
func (ts *Toolset) callID(tool string, input []byte) string {
	if ts.runner == nil {
		return ""
	}
	msg := ts.runner.LastMessage()
	if msg == nil {
		return ""
	}
	var turn []adapt.ToolCall
	for _, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		u := b.AsToolUse()
		in, _ := json.Marshal(u.Input)
		turn = append(turn, adapt.ToolCall{ID: u.ID, Name: u.Name, Input: in})
	}
	ts.calls.Turn(turn)
	return ts.calls.Take(tool, input)
}
