package einocarmy_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/carmy-dev/carmy/adapters/einocarmy"
	"github.com/carmy-dev/carmy/internal/adapt/adapttest"
	"github.com/carmy-dev/carmy/llm"
)

// scripted is an Eino chat model that asks for the tool calls it is
// given, one turn each, then answers "done"; it keeps the tool results it
// was sent and the tools it was offered.
type scripted struct {
	mu      sync.Mutex
	turns   [][]schema.ToolCall
	results []string
	offered []*schema.ToolInfo
}

func (m *scripted) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if last := input[len(input)-1]; last.Role == schema.Tool {
		m.results = append(m.results, last.Content)
	}
	if len(m.turns) == 0 {
		return schema.AssistantMessage("done", nil), nil
	}
	calls := m.turns[0]
	m.turns = m.turns[1:]
	return schema.AssistantMessage("", calls), nil
}

func (m *scripted) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *scripted) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	m.mu.Lock()
	m.offered = tools
	m.mu.Unlock()
	return m, nil
}

func (m *scripted) lastResult(t *testing.T) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.results) == 0 {
		t.Fatal("the model was sent no tool result")
	}
	return m.results[len(m.results)-1]
}

func call(id, name, args string) []schema.ToolCall {
	return []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}}
}

// checkpoints is an in-memory checkpoint store.
type checkpoints struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *checkpoints) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

func (s *checkpoints) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = b
	return nil
}

// agent is a ReAct agent over the fixture's tools, for alice, in a graph
// that checkpoints, so that an interrupted run resumes.
func agent(t *testing.T, f *adapttest.Fixture, m *scripted) compose.Runnable[[]*schema.Message, *schema.Message] {
	t.Helper()
	ctx := context.Background()
	tools, err := einocarmy.Tools(f.Reg, adapttest.Caller()...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: m, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
	if err != nil {
		t.Fatal(err)
	}
	sub, opts := a.ExportGraph()
	g := compose.NewGraph[[]*schema.Message, *schema.Message]()
	if err := g.AddGraphNode("agent", sub, opts...); err != nil {
		t.Fatal(err)
	}
	if err := g.AddEdge(compose.START, "agent"); err != nil {
		t.Fatal(err)
	}
	if err := g.AddEdge("agent", compose.END); err != nil {
		t.Fatal(err)
	}
	r, err := g.Compile(ctx, compose.WithCheckPointStore(&checkpoints{m: map[string][]byte{}}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var prompt = []*schema.Message{schema.UserMessage("go")}

// TestToolRoundTrip: the model asks for a tool, carmy runs it as the
// caller, and the output returns to the model; carmy's names, descriptions
// and schemas are what the model is offered.
func TestToolRoundTrip(t *testing.T) {
	f := adapttest.New(t)
	m := &scripted{turns: [][]schema.ToolCall{call("call-1", "add_note", `{"text":"milk"}`)}}
	out, err := agent(t, f, m).Invoke(context.Background(), prompt, compose.WithCheckPointID("run"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != "done" {
		t.Fatalf("answer = %q", out.Content)
	}
	if got, want := m.lastResult(t), `{"text":"milk","owner":"alice"}`; got != want {
		t.Fatalf("the model read %s, want %s", got, want)
	}
	if len(m.offered) != 3 || m.offered[0].Name != "add_note" || m.offered[0].Desc != "Save a note" {
		t.Fatalf("offered %+v", m.offered)
	}
	defs, err := llm.AnthropicTools(f.Reg, adapttest.Caller()...)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range defs {
		s, err := m.offered[i].ToJSONSchema()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(s)
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(d.InputSchema, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s's schema offered as %s, want %s", d.Name, got, d.InputSchema)
		}
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times, want 1", n)
	}
}

// TestTaskRequiredTool: a tool that runs only as a task is offered, and
// runs as one when the model calls it: its output returns to the model.
func TestTaskRequiredTool(t *testing.T) {
	f := adapttest.New(t)
	m := &scripted{turns: [][]schema.ToolCall{call("call-1", "export_notes", `{"format":"csv"}`)}}
	if _, err := agent(t, f, m).Invoke(context.Background(), prompt, compose.WithCheckPointID("run")); err != nil {
		t.Fatal(err)
	}
	if got, want := m.lastResult(t), `exported as csv`; got != want {
		t.Fatalf("the model read %s, want %s", got, want)
	}
	if n := f.Exported.Load(); n != 1 {
		t.Fatalf("export_notes ran %d times, want 1", n)
	}
}

// TestInvalidInput: an input that breaks the tool's rules reaches the
// model as carmy's field errors, and the run goes on.
func TestInvalidInput(t *testing.T) {
	f := adapttest.New(t)
	m := &scripted{turns: [][]schema.ToolCall{call("call-1", "add_note", `{"text":""}`)}}
	if _, err := agent(t, f, m).Invoke(context.Background(), prompt, compose.WithCheckPointID("run")); err != nil {
		t.Fatal(err)
	}
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

// TestConfirmation: a destructive call interrupts the run for a person;
// resumed with an approval it runs once and the model reads the output;
// with a denial it never runs and the model reads the denial.
func TestConfirmation(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			ctx := context.Background()
			f := adapttest.New(t)
			m := &scripted{turns: [][]schema.ToolCall{call("call-9", "delete_note", `{"id":3}`)}}
			r := agent(t, f, m)
			_, err := r.Invoke(ctx, prompt, compose.WithCheckPointID("run"))
			pending := einocarmy.PendingOf(err)
			if len(pending) != 1 {
				t.Fatalf("run: %v; want one call waiting for a person", err)
			}
			a := pending[0].Approval
			if a.Tool != "delete_note" || a.ID == "" || a.RequestID != "call-9" || a.Input != `{"id":3}` {
				t.Fatalf("pending = %+v", a)
			}
			if n := f.Deleted.Load(); n != 0 {
				t.Fatalf("delete_note ran %d times before the decision", n)
			}
			resume := einocarmy.Deny
			if approve {
				resume = einocarmy.Approve
			}
			out, err := r.Invoke(resume(ctx, pending[0].InterruptID, "person:alice"), prompt, compose.WithCheckPointID("run"))
			if err != nil {
				t.Fatal(err)
			}
			got := m.lastResult(t)
			if out.Content != "done" {
				t.Fatalf("answer = %q", out.Content)
			}
			if approve {
				if got != "deleted" || f.Deleted.Load() != 1 {
					t.Fatalf("approved: the model read %s, delete_note ran %d times; want deleted, once", got, f.Deleted.Load())
				}
				return
			}
			if !strings.Contains(got, `"code":"permission_denied"`) || f.Deleted.Load() != 0 {
				t.Fatalf("denied: the model read %s, delete_note ran %d times; want permission_denied, never", got, f.Deleted.Load())
			}
		})
	}
}

// TestReplayedCall: a run replayed with the same tool call id gets the
// recorded outcome; the tool runs once.
func TestReplayedCall(t *testing.T) {
	f := adapttest.New(t)
	for i := range 2 {
		m := &scripted{turns: [][]schema.ToolCall{call("call-7", "add_note", `{"text":"milk"}`)}}
		if _, err := agent(t, f, m).Invoke(context.Background(), prompt, compose.WithCheckPointID("run")); err != nil {
			t.Fatal(err)
		}
		if got := m.lastResult(t); got != `{"text":"milk","owner":"alice"}` {
			t.Fatalf("run %d: the model read %s", i, got)
		}
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times for one call id, want 1", n)
	}
}

// TestConfirmationBesideAnotherCall: in a turn with two calls, the one that
// needs no person runs once, though the run stops for the other and
// resumes.
func TestConfirmationBesideAnotherCall(t *testing.T) {
	ctx := context.Background()
	f := adapttest.New(t)
	turn := append(call("call-1", "add_note", `{"text":"milk"}`), call("call-2", "delete_note", `{"id":3}`)...)
	r := agent(t, f, &scripted{turns: [][]schema.ToolCall{turn}})
	_, err := r.Invoke(ctx, prompt, compose.WithCheckPointID("run"))
	pending := einocarmy.PendingOf(err)
	if len(pending) != 1 {
		t.Fatalf("run: %v; want one call waiting for a person", err)
	}
	if _, err := r.Invoke(einocarmy.Approve(ctx, pending[0].InterruptID, "person:alice"), prompt, compose.WithCheckPointID("run")); err != nil {
		t.Fatal(err)
	}
	if a, d := f.Added.Load(), f.Deleted.Load(); a != 1 || d != 1 {
		t.Fatalf("add_note ran %d times, delete_note %d; want once each", a, d)
	}
}

// TestSearchTools: search_tools is an Eino tool like the others, and finds
// for the model only what the caller may call.
func TestSearchTools(t *testing.T) {
	f := adapttest.Searching(t)
	m := &scripted{turns: [][]schema.ToolCall{call("call-1", "search_tools", `{"query":"note","limit":50}`)}}
	if _, err := agent(t, f, m).Invoke(context.Background(), prompt, compose.WithCheckPointID("run")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range m.offered {
		names = append(names, o.Name)
	}
	adapttest.CheckSearch(t, names, m.lastResult(t))
}
