// Package genkitcarmy gives a [carmy.Registry]'s tools to Firebase Genkit
// for Go, for one caller: every call a model makes runs through
// [carmy.Registry.Execute] with the caller's principal and permissions, so
// carmy's validation, permissions, confirmation by a person, idempotency
// and audit hold inside a Genkit agent as on carmy's other doors.
//
//	ts, err := genkitcarmy.New(reg, carmy.WithPrincipal(user), carmy.WithPermissions(grants...))
//	resp, err := genkit.Generate(ctx, g, ai.WithPrompt(prompt), ai.WithTools(ts.Tools()...), ai.WithMiddleware(ts.Middleware()))
//
// A tool that needs a person's confirmation interrupts the generation
// (resp.FinishReason "interrupted"; resp.Interrupts()), with the approval
// in the interrupt's metadata ([PendingOf]). Ask the person, then restart
// the call with [Toolset.Approve] or [Toolset.Deny] and
// ai.WithToolRestarts: the restarted call records the decision and runs
// the approved input once, or tells the model it was denied.
package genkitcarmy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core/api"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/llm"
)

// Toolset is a registry's tools for one caller, as Genkit tools. Make one
// per conversation: it keeps the ids of the model's last turn of calls,
// which Genkit does not hand its tools, to make each call's request id.
// A Toolset is safe for concurrent use by the calls of one turn.
type Toolset struct {
	reg    *carmy.Registry
	caller []carmy.CallOption
	tools  []*tool
	calls  adapt.Calls
}

// New returns the tools of reg that the caller the options describe may
// call ([carmy.Registry.ToolsFor]), named and described as carmy publishes
// them, each with its input schema as llm.AnthropicTools gives it (an
// object at the root, as Genkit's models take a tool's input). A tool whose
// name the export refuses is left out, and the error says why; the other
// tools are returned either way.
func New(reg *carmy.Registry, caller ...carmy.CallOption) (*Toolset, error) {
	defs, err := llm.AnthropicTools(reg, caller...)
	ts := &Toolset{reg: reg, caller: caller}
	for _, d := range defs {
		if d.Type != "" {
			continue // Anthropic's tool search, which no Genkit model runs
		}
		var schema map[string]any
		if e := json.Unmarshal(d.InputSchema, &schema); e != nil {
			return nil, fmt.Errorf("genkitcarmy: the input schema of %s: %w", d.Name, e)
		}
		t := &tool{ts: ts, schema: schema}
		t.ToolDef = ai.NewTool(d.Name, d.Description, t.run)
		ts.tools = append(ts.tools, t)
	}
	return ts, err
}

// Tools returns the tools, for ai.WithTools.
func (ts *Toolset) Tools() []ai.ToolRef {
	refs := make([]ai.ToolRef, len(ts.tools))
	for i, t := range ts.tools {
		refs[i] = t
	}
	return refs
}

// Middleware returns the model middleware that reads the ids of the tool
// calls of each model turn (giving one to a call that has none), for
// ai.WithMiddleware: a call's id is its request id, so that a call run
// again with the same id (a conversation replayed after a crash) is
// answered with its recorded outcome instead of running twice. Without
// it, calls run without a request id.
func (ts *Toolset) Middleware() ai.ModelMiddleware {
	return func(next ai.ModelFunc) ai.ModelFunc {
		return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			resp, err := next(ctx, req, cb)
			if err != nil || resp == nil || resp.Message == nil {
				return resp, err
			}
			var turn []adapt.ToolCall
			for _, p := range resp.Message.Content {
				if !p.IsToolRequest() {
					continue
				}
				if p.ToolRequest.Ref == "" {
					p.ToolRequest.Ref = newRef()
				}
				in, _ := json.Marshal(p.ToolRequest.Input)
				turn = append(turn, adapt.ToolCall{ID: p.ToolRequest.Ref, Name: p.ToolRequest.Name, Input: in})
			}
			ts.calls.Turn(turn)
			return resp, nil
		}
	}
}

// newRef is the id of a tool call the model gave none, as Genkit would
// give it.
func newRef() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	return hex.EncodeToString(b[:])
}

// tool is one carmy tool as a Genkit tool. Genkit checks a tool's input
// against its schema before the tool runs, and fails the whole generation
// when it does not fit; carmy's tool takes any input instead and lets
// carmy validate it, so that the model reads the field errors and fixes
// its call. The schema is only what Genkit's registry publishes to the
// model (see Register).
type tool struct {
	*ai.ToolDef[any, any]
	ts     *Toolset
	schema map[string]any
}

// Definition is what the model is offered: carmy's name, description and
// input schema.
func (t *tool) Definition() *ai.ToolDefinition {
	d := t.ToolDef.Definition()
	d.InputSchema = t.schema
	return d
}

// Register registers the tool's action in r, with carmy's input schema in
// its descriptor. Genkit registers the tools given to one generation in a
// registry of that generation alone.
func (t *tool) Register(r api.Registry) {
	t.ToolDef.Register(&schemaRegistry{Registry: r, schema: t.schema})
}

// schemaRegistry registers actions in its Registry with the input schema
// of their descriptor replaced by schema.
type schemaRegistry struct {
	api.Registry
	schema map[string]any
}

func (r *schemaRegistry) RegisterAction(key string, a api.Action) {
	r.Registry.RegisterAction(key, &schemaAction{Action: a, schema: r.schema})
}

// schemaAction is an action whose descriptor shows schema as its input
// schema, and no output schema (Genkit would show the schema of its own
// wrapper of a tool's output, and the result may be an error object); it
// runs as the action does, which checks no schema.
type schemaAction struct {
	api.Action
	schema map[string]any
}

func (a *schemaAction) Desc() api.ActionDesc {
	d := a.Action.Desc()
	d.InputSchema = a.schema
	d.Metadata = maps.Clone(d.Metadata)
	d.Metadata["originalOutputSchema"] = map[string]any(nil) // the output schema a tool's definition shows
	return d
}

// resumed is what a restart for a person's decision carries back to the
// call, under the key "carmy" of the resumed metadata.
type resumed struct {
	Approval adapt.Approval `json:"approval"`
	Approve  bool           `json:"approve"`
	Approver string         `json:"approver"`
}

// run runs one call of the tool, or its restart after a person's
// decision, and answers the model with the output or the error object
// carmy's other doors send ({"error": {code, message, fields, ...}}).
func (t *tool) run(tc *ai.ToolContext, input any) (any, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("genkitcarmy: the input of %s: %w", t.Name(), err)
	}
	var o adapt.Outcome
	if d, ok := decisionOf(tc); ok && d.Approval.Of(in) {
		if e := adapt.Decide(tc, t.ts.reg, d.Approval.ID, d.Approve, d.Approver); e != nil {
			return json.RawMessage(adapt.Outcome{Err: e}.Value()), nil
		}
		o = adapt.Run(tc, t.ts.reg, t.ts.caller, t.Name(), in, d.Approval.RequestID)
	} else {
		o = adapt.Run(tc, t.ts.reg, t.ts.caller, t.Name(), in, t.ts.calls.Take(t.Name(), in))
	}
	if o.Pending != nil {
		return nil, ai.InterruptWith(tc, o.Pending)
	}
	return json.RawMessage(o.Value()), nil
}

// decisionOf reads the person's decision a restart carries.
func decisionOf(tc *ai.ToolContext) (resumed, bool) {
	var d resumed
	v, ok := tc.Resumed["carmy"]
	if !ok {
		return d, false
	}
	b, err := json.Marshal(v)
	return d, err == nil && json.Unmarshal(b, &d) == nil && d.Approval.ID != ""
}

// Approval is what a call that waits for a person carries in its
// interrupt's metadata.
// Its fields: ID (the approval's, as carmy's console and
// Registry.Decide know it), Tool, Input (the JSON text the model sent),
// Shown (Input as the person is to be shown it, hidden characters escaped,
// as carmy's console shows an input), URL (the console's page for it, when the
// registry serves one), Expires (RFC 3339) and RequestID (the tool call's
// id).
type Approval = adapt.Approval

// PendingOf returns the approval an interrupted tool request waits for,
// from one of resp.Interrupts(); false for a part that is not one of
// carmy's interrupts.
func PendingOf(p *ai.Part) (Approval, bool) {
	a, ok := ai.InterruptAs[Approval](p)
	return a, ok && a.ID != ""
}

// Approve returns the restart of the interrupted call p (one of
// resp.Interrupts()) that records approver's approval and runs the call,
// once, for ai.WithToolRestarts. approver names the person who approved,
// for carmy's logs and audit.
func (ts *Toolset) Approve(p *ai.Part, approver string) (*ai.Part, error) {
	return ts.restart(p, true, approver)
}

// Deny returns the restart of the interrupted call p that records
// approver's denial: the call does not run, and the model reads that the
// person denied it.
func (ts *Toolset) Deny(p *ai.Part, approver string) (*ai.Part, error) {
	return ts.restart(p, false, approver)
}

func (ts *Toolset) restart(p *ai.Part, approve bool, approver string) (*ai.Part, error) {
	a, ok := PendingOf(p)
	if !ok {
		return nil, fmt.Errorf("genkitcarmy: the part is not a call that waits for a person's approval")
	}
	for _, t := range ts.tools {
		if t.Name() == a.Tool {
			meta := map[string]any{"carmy": resumed{Approval: a, Approve: approve, Approver: approver}}
			return t.RestartWith(p, ai.WithResumedMetadata[any](meta))
		}
	}
	return nil, fmt.Errorf("genkitcarmy: %s is not a tool of this toolset", a.Tool)
}
