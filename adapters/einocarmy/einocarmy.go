// Package einocarmy gives a [carmy.Registry]'s tools to CloudWeGo Eino, for
// one caller, as [tool.InvokableTool] values for a ToolsNode or a ReAct
// agent: every call a model makes runs through [carmy.Registry.Execute]
// with the caller's principal and permissions and the tool call's id as
// its request id, so carmy's validation, permissions, confirmation by a
// person, idempotency and audit hold inside an Eino graph as on carmy's
// other doors.
//
//	tools, err := einocarmy.Tools(reg, carmy.WithPrincipal(user), carmy.WithPermissions(grants...))
//	agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: m, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
//
// A tool that needs a person's confirmation interrupts the graph with
// Eino's interrupt ([tool.StatefulInterrupt]); the graph must be compiled
// with a checkpoint store (compose.WithCheckPointStore) and run with a
// checkpoint id to be resumed. [PendingOf] finds the approvals an
// interrupted run waits for; ask the person, then resume the run with the
// context [Approve] or [Deny] returns and the same checkpoint id: the
// resumed call records the decision and runs the approved input once, or
// tells the model it was denied.
package einocarmy

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/llm"
)

// Approval is what a call that waits for a person carries in its
// interrupt, as its info and its state.
// Its fields: ID (the approval's, as carmy's console and
// Registry.Decide know it), Tool, Input (the JSON text the model sent),
// Shown (Input as the person is to be shown it, hidden characters escaped,
// as carmy's console shows an input), URL (the console's page for it, when the
// registry serves one), Expires (RFC 3339) and RequestID (the tool call's
// id).
type Approval = adapt.Approval

func init() {
	// Checkpoints keep an interrupted call's approval, as its interrupt's
	// info and state.
	schema.RegisterName[*Approval]("_carmy_einocarmy_approval")
}

// Tools returns the tools of reg that the caller the options describe may
// call ([carmy.Registry.ToolsFor]), named and described as carmy publishes
// them, each with its input schema as llm.AnthropicTools gives it (an
// object at the root, which Eino's chat models take as a tool's
// parameters). A tool whose name the export refuses is left out, and the
// error says why; the other tools are returned either way. The tools are
// safe for concurrent use.
func Tools(reg *carmy.Registry, caller ...carmy.CallOption) ([]tool.BaseTool, error) {
	defs, err := llm.AnthropicTools(reg, caller...)
	var out []tool.BaseTool
	for _, d := range defs {
		if d.Type != "" {
			continue // Anthropic's tool search, which no Eino model runs
		}
		s := new(jsonschema.Schema)
		if e := json.Unmarshal(d.InputSchema, s); e != nil {
			return nil, errors.Join(err, e)
		}
		out = append(out, &invokable{reg: reg, caller: caller, info: &schema.ToolInfo{
			Name: d.Name, Desc: d.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(s),
		}})
	}
	return out, err
}

// invokable is one carmy tool as an Eino tool.
type invokable struct {
	reg    *carmy.Registry
	caller []carmy.CallOption
	info   *schema.ToolInfo
}

func (t *invokable) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun runs one call, or its resumption after a person's
// decision, and answers the model with the output (a string output as its
// text, anything else as JSON) or with the error object carmy's other
// doors send ({"error": {code, message, fields, ...}}), which the model
// can act on: an error returned to Eino would end the whole run.
func (t *invokable) InvokableRun(ctx context.Context, arguments string, _ ...tool.Option) (string, error) {
	in := []byte(arguments)
	if interrupted, ok, a := tool.GetInterruptState[*Approval](ctx); interrupted && ok && a != nil {
		target, has, d := tool.GetResumeContext[*Decision](ctx)
		if !target {
			// Another call of the turn is resumed: this one still waits.
			return "", tool.StatefulInterrupt(ctx, a, a)
		}
		if has && d != nil && a.Of(in) {
			if e := adapt.Decide(ctx, t.reg, a.ID, d.Approve, d.Approver); e != nil {
				return adapt.Outcome{Err: e}.Text(), nil
			}
		}
	}
	o := adapt.Run(ctx, t.reg, t.caller, t.info.Name, in, compose.GetToolCallID(ctx))
	if o.Pending != nil {
		return "", tool.StatefulInterrupt(ctx, o.Pending, o.Pending)
	}
	return o.Text(), nil
}

// Decision is a person's answer to a call that waits for them, as the
// data of a resumption.
type Decision struct {
	Approve  bool
	Approver string // who decided, for carmy's logs and audit
}

// Pending is a call an interrupted run waits for a person about.
type Pending struct {
	InterruptID string // the interrupt to resume, with Approve or Deny
	Approval    Approval
}

// PendingOf returns the calls that an error of an interrupted run (as
// Invoke or Stream returned it) waits for a person about; none when err
// is no interrupt, or none of carmy's.
func PendingOf(err error) []Pending {
	info, ok := compose.ExtractInterruptInfo(err)
	if !ok {
		return nil
	}
	var out []Pending
	for _, c := range info.InterruptContexts {
		if a, ok := c.Info.(*Approval); ok && c.IsRootCause {
			out = append(out, Pending{InterruptID: c.ID, Approval: *a})
		}
	}
	return out
}

// Approve returns ctx for resuming the run interrupted at interruptID
// (from [PendingOf]): the call records approver's approval and runs,
// once.
func Approve(ctx context.Context, interruptID, approver string) context.Context {
	return compose.ResumeWithData(ctx, interruptID, &Decision{Approve: true, Approver: approver})
}

// Deny returns ctx for resuming the run interrupted at interruptID: the
// call records approver's denial and does not run, and the model reads
// that the person denied it.
func Deny(ctx context.Context, interruptID, approver string) context.Context {
	return compose.ResumeWithData(ctx, interruptID, &Decision{Approve: false, Approver: approver})
}
