package genkitcarmy_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/carmy-dev/carmy/adapters/genkitcarmy"
	"github.com/carmy-dev/carmy/internal/adapt/adapttest"
	"github.com/carmy-dev/carmy/llm"
)

// scripted is a Genkit model that asks for the tool calls it is given, one
// turn each, then answers with the tool results it was sent, as JSON.
type scripted struct {
	mu    sync.Mutex
	turns [][]*ai.ToolRequest
	seen  []*ai.ToolResponse // the tool results the model was sent
	tools []*ai.ToolDefinition
}

func (m *scripted) generate(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tools = req.Tools
	if last := req.Messages[len(req.Messages)-1]; last.Role == ai.RoleTool {
		for _, p := range last.Content {
			if p.IsToolResponse() {
				m.seen = append(m.seen, p.ToolResponse)
			}
		}
	}
	msg := &ai.Message{Role: ai.RoleModel}
	if len(m.turns) > 0 {
		for _, r := range m.turns[0] {
			msg.Content = append(msg.Content, ai.NewToolRequestPart(r))
		}
		m.turns = m.turns[1:]
	} else {
		msg.Content = []*ai.Part{ai.NewTextPart("done")}
	}
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
}

// lastResult is the last tool result the model read, as JSON.
func (m *scripted) lastResult(t *testing.T) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) == 0 {
		t.Fatal("the model was sent no tool result")
	}
	b, err := json.Marshal(m.seen[len(m.seen)-1].Output)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prompt starts a conversation.
var prompt = ai.WithPrompt("go")

// setup starts Genkit with the scripted model, which asks for turns.
func setup(t *testing.T, turns ...[]*ai.ToolRequest) (*genkit.Genkit, *scripted) {
	t.Helper()
	g := genkit.Init(context.Background())
	m := &scripted{turns: turns}
	genkit.DefineModel(g, "test/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}}, m.generate)
	return g, m
}

func call(name, ref string, input any) []*ai.ToolRequest {
	return []*ai.ToolRequest{{Name: name, Ref: ref, Input: input}}
}

func generate(t *testing.T, g *genkit.Genkit, ts *genkitcarmy.Toolset, opts ...ai.GenerateOption) *ai.ModelResponse {
	t.Helper()
	opts = append([]ai.GenerateOption{ai.WithModelName("test/scripted"), ai.WithTools(ts.Tools()...), ai.WithMiddleware(ts.Middleware())}, opts...)
	resp, err := genkit.Generate(context.Background(), g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func toolset(t *testing.T, f *adapttest.Fixture) *genkitcarmy.Toolset {
	t.Helper()
	ts, err := genkitcarmy.New(f.Reg, adapttest.Caller()...)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestToolRoundTrip: the model asks for a tool, carmy runs it as the
// caller, and the output returns to the model; carmy's name, description
// and schema are what the model is offered.
func TestToolRoundTrip(t *testing.T) {
	f := adapttest.New(t)
	g, m := setup(t, call("add_note", "call-1", map[string]any{"text": "milk"}))
	if resp := generate(t, g, toolset(t, f), prompt); resp.Text() != "done" {
		t.Fatalf("answer = %q", resp.Text())
	}
	if len(m.tools) != 3 {
		t.Fatalf("offered %s, want add_note, delete_note and export_notes", mustJSON(t, m.tools))
	}
	defs, err := llm.AnthropicTools(f.Reg, adapttest.Caller()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		i := slices.IndexFunc(m.tools, func(o *ai.ToolDefinition) bool { return o.Name == d.Name })
		if i < 0 || m.tools[i].Description != d.Description || m.tools[i].OutputSchema != nil {
			t.Fatalf("offered %s, want %s described as carmy does, with no output schema", mustJSON(t, m.tools), d.Name)
		}
		var want any
		if err := json.Unmarshal(d.InputSchema, &want); err != nil || !reflect.DeepEqual(roundTrip(t, m.tools[i].InputSchema), want) {
			t.Fatalf("%s's schema offered as %s, want %s", d.Name, mustJSON(t, m.tools[i].InputSchema), d.InputSchema)
		}
	}
	if got, want := m.lastResult(t), `{"owner":"alice","text":"milk"}`; got != want {
		t.Fatalf("the model read %s, want %s", got, want)
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times, want 1", n)
	}
}

// TestTaskRequiredTool: a tool that runs only as a task is offered, and
// runs as one when the model calls it: its output returns to the model.
func TestTaskRequiredTool(t *testing.T) {
	f := adapttest.New(t)
	g, m := setup(t, call("export_notes", "call-1", map[string]any{"format": "csv"}))
	if resp := generate(t, g, toolset(t, f), prompt); resp.Text() != "done" {
		t.Fatalf("answer = %q", resp.Text())
	}
	if got, want := m.lastResult(t), `"exported as csv"`; got != want {
		t.Fatalf("the model read %s, want %s", got, want)
	}
	if n := f.Exported.Load(); n != 1 {
		t.Fatalf("export_notes ran %d times, want 1", n)
	}
}

// TestInvalidInput: an input that breaks the tool's schema reaches the
// model as carmy's field errors, and the generation goes on (Genkit's own
// check of the schema would end it).
func TestInvalidInput(t *testing.T) {
	f := adapttest.New(t)
	g, m := setup(t, call("add_note", "call-1", map[string]any{"text": 5}))
	generate(t, g, toolset(t, f), prompt)
	got := m.lastResult(t)
	for _, want := range []string{`"code":"invalid_input"`, `"path":"text"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("the model read %s, want %s in it", got, want)
		}
	}
	if n := f.Added.Load(); n != 0 {
		t.Fatalf("add_note ran %d times, want 0", n)
	}
}

// TestConfirmation: a destructive call interrupts the generation for a
// person; approved, the restart runs it once and the model reads the
// output; denied, it never runs and the model reads the denial.
func TestConfirmation(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			f := adapttest.New(t)
			g, m := setup(t, call("delete_note", "call-9", map[string]any{"id": 3}))
			ts := toolset(t, f)
			resp := generate(t, g, ts, prompt)
			if resp.FinishReason != ai.FinishReasonInterrupted || len(resp.Interrupts()) != 1 {
				t.Fatalf("finish = %q, %d interrupts; want one interrupt", resp.FinishReason, len(resp.Interrupts()))
			}
			p := resp.Interrupts()[0]
			a, ok := genkitcarmy.PendingOf(p)
			if !ok || a.Tool != "delete_note" || a.ID == "" || a.RequestID != "call-9" || a.Input != `{"id":3}` {
				t.Fatalf("pending = %+v, %v", a, ok)
			}
			if n := f.Deleted.Load(); n != 0 {
				t.Fatalf("delete_note ran %d times before the decision", n)
			}
			restart := ts.Deny
			if approve {
				restart = ts.Approve
			}
			part, err := restart(p, "person:alice")
			if err != nil {
				t.Fatal(err)
			}
			generate(t, g, ts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(part))
			got := m.lastResult(t)
			if approve {
				if got != `"deleted"` || f.Deleted.Load() != 1 {
					t.Fatalf("approved: the model read %s, delete_note ran %d times; want \"deleted\", once", got, f.Deleted.Load())
				}
				return
			}
			if !strings.Contains(got, `"code":"permission_denied"`) || f.Deleted.Load() != 0 {
				t.Fatalf("denied: the model read %s, delete_note ran %d times; want permission_denied, never", got, f.Deleted.Load())
			}
		})
	}
}

// TestReplayedCall: a conversation replayed with the same tool-call id
// gets the recorded outcome; the tool runs once.
func TestReplayedCall(t *testing.T) {
	f := adapttest.New(t)
	turn := call("add_note", "call-7", map[string]any{"text": "milk"})
	for range 2 {
		g, m := setup(t, turn)
		generate(t, g, toolset(t, f), prompt)
		if got := m.lastResult(t); got != `{"owner":"alice","text":"milk"}` {
			t.Fatalf("the model read %s", got)
		}
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times for one call id, want 1", n)
	}
}

// roundTrip is v as JSON decodes it.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(mustJSON(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConfirmationBesideAnotherCall: in a turn with two calls, the one that
// needs no person runs once, though the generation stops for the other
// and restarts.
func TestConfirmationBesideAnotherCall(t *testing.T) {
	f := adapttest.New(t)
	turn := append(call("add_note", "call-1", map[string]any{"text": "milk"}), call("delete_note", "call-2", map[string]any{"id": 3})...)
	g, _ := setup(t, turn)
	ts := toolset(t, f)
	resp := generate(t, g, ts, prompt)
	if len(resp.Interrupts()) != 1 {
		t.Fatalf("%d interrupts, want 1", len(resp.Interrupts()))
	}
	part, err := ts.Approve(resp.Interrupts()[0], "person:alice")
	if err != nil {
		t.Fatal(err)
	}
	generate(t, g, ts, ai.WithMessages(resp.History()...), ai.WithToolRestarts(part))
	if a, d := f.Added.Load(), f.Deleted.Load(); a != 1 || d != 1 {
		t.Fatalf("add_note ran %d times, delete_note %d; want once each", a, d)
	}
}

// TestSearchTools: search_tools is a Genkit tool like the others, and
// finds for the model only what the caller may call.
func TestSearchTools(t *testing.T) {
	f := adapttest.Searching(t)
	g, m := setup(t, call("search_tools", "1", map[string]any{"query": "note", "limit": 50}))
	generate(t, g, toolset(t, f), prompt)
	var names []string
	for _, d := range m.tools {
		names = append(names, d.Name)
	}
	adapttest.CheckSearch(t, names, m.lastResult(t))
}
