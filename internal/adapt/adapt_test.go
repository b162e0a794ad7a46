package adapt_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/internal/adapt/adapttest"
)

// TestCallsTake: each call of a turn's is taken once, by tool and input
// (white space aside); a new turn starts afresh, the same turn again does
// not.
func TestCallsTake(t *testing.T) {
	var c adapt.Calls
	turn := []adapt.ToolCall{
		{ID: "a", Name: "add", Input: json.RawMessage(`{"x":1}`)},
		{ID: "b", Name: "add", Input: json.RawMessage(`{"x":1}`)},
		{ID: "c", Name: "add", Input: json.RawMessage(`{"x":2}`)},
	}
	c.Turn(turn)
	steps := []struct {
		tool, input, want string
	}{
		{"add", `{"x": 2}`, "c"},
		{"add", `{"x":2}`, ""}, // taken
		{"del", `{"x":1}`, ""}, // another tool
		{"add", `{"x":1}`, "a"},
		{"add", `{"x":1}`, "b"},
		{"add", `{"x":1}`, ""},
	}
	for i, s := range steps {
		c.Turn(turn) // the other calls of the turn say the same turn
		if got := c.Take(s.tool, []byte(s.input)); got != s.want {
			t.Fatalf("step %d: Take(%s, %s) = %q, want %q", i, s.tool, s.input, got, s.want)
		}
	}
	c.Turn([]adapt.ToolCall{{ID: "d", Name: "add", Input: json.RawMessage(`{"x":1}`)}})
	if got := c.Take("add", []byte(`{"x":1}`)); got != "d" {
		t.Fatalf("next turn: %q, want d", got)
	}
}

// TestCallsConcurrent: the calls of one turn, run at once, take every id
// once.
func TestCallsConcurrent(t *testing.T) {
	var c adapt.Calls
	turn := make([]adapt.ToolCall, 50)
	for i := range turn {
		turn[i] = adapt.ToolCall{ID: string(rune('A' + i)), Name: "add", Input: json.RawMessage(`{}`)}
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range turn {
		wg.Go(func() {
			c.Turn(turn)
			id := c.Take("add", []byte(`{}`))
			mu.Lock()
			defer mu.Unlock()
			if id == "" || seen[id] {
				t.Errorf("id %q taken twice or none", id)
			}
			seen[id] = true
		})
	}
	wg.Wait()
}

// TestOutcome: what the model reads of an outcome.
func TestOutcome(t *testing.T) {
	f := adapttest.New(t)
	ctx := context.Background()
	o := adapt.Run(ctx, f.Reg, adapttest.Caller(), "add_note", []byte(`{"text":"milk"}`), "")
	if want := `{"text":"milk","owner":"alice"}`; string(o.Value()) != want || o.Text() != want {
		t.Fatalf("output: value %s, text %s", o.Value(), o.Text())
	}
	o = adapt.Run(ctx, f.Reg, adapttest.Caller(), "add_note", []byte(`{"text":""}`), "")
	var v struct{ Error carmy.Error }
	if err := json.Unmarshal(o.Value(), &v); err != nil || v.Error.Code != carmy.CodeInvalidInput || len(v.Error.Fields) != 1 || v.Error.Fields[0].Path != "text" {
		t.Fatalf("invalid input: %s", o.Value())
	}
	if o.Text() != string(o.Value()) || o.Pending != nil {
		t.Fatalf("invalid input: text %s, pending %v", o.Text(), o.Pending)
	}
	o = adapt.Run(ctx, f.Reg, adapttest.Caller(), "delete_note", []byte(`{"id":1}`), "r1")
	if o.Pending == nil || o.Pending.Tool != "delete_note" || o.Pending.RequestID != "r1" || !o.Pending.Of([]byte(`{ "id": 1 }`)) || o.Pending.Of([]byte(`{"id":2}`)) {
		t.Fatalf("pending: %+v", o.Pending)
	}
	if want := "{\n  \"id\": 1\n}"; o.Pending.Shown != want {
		t.Fatalf("shown %q, want %q", o.Pending.Shown, want)
	}
	if e := adapt.Decide(ctx, f.Reg, o.Pending.ID, true, "person:alice"); e != nil {
		t.Fatal(e)
	}
	if e := adapt.Decide(ctx, f.Reg, o.Pending.ID, false, "person:alice"); e != nil {
		t.Fatalf("a second decision is no error, the first holds: %v", e)
	}
	o = adapt.Run(ctx, f.Reg, adapttest.Caller(), "delete_note", []byte(`{"id":1}`), "r1")
	if o.Err != nil || o.Text() != "deleted" || string(o.Value()) != `"deleted"` || f.Deleted.Load() != 1 {
		t.Fatalf("approved: %+v, text %s", o, o.Text())
	}
}

// TestRunTaskRequired: a tool that runs only as a task runs as one, and
// the call waits for its output: a model is never handed the refusal of a
// tool it was offered.
func TestRunTaskRequired(t *testing.T) {
	f := adapttest.New(t)
	o := adapt.Run(context.Background(), f.Reg, adapttest.Caller(), "export_notes", []byte(`{"format":"csv"}`), "call-1")
	if o.Err != nil || string(o.Output) != `"exported as csv"` {
		t.Fatalf("Run(export_notes) = %s, %+v; want its output", o.Output, o.Err)
	}
	again := adapt.Run(context.Background(), f.Reg, adapttest.Caller(), "export_notes", []byte(`{"format":"csv"}`), "call-1")
	if string(again.Output) != `"exported as csv"` || f.Exported.Load() != 1 {
		t.Fatalf("Run again with its call id = %s, ran %d times; want the output, once", again.Output, f.Exported.Load())
	}
	if bad := adapt.Run(context.Background(), f.Reg, adapttest.Caller(), "export_notes", []byte(`{"format":"pdf"}`), ""); bad.Err == nil || bad.Err.Code != carmy.CodeInvalidInput {
		t.Fatalf("Run with an invalid input = %+v; want invalid_input", bad.Err)
	}
}

// TestRunPolicy: a call through an adapter is decided by the policies as
// the adapter door ("adapter"), and a refusal names the deciding policy,
// as on every other door.
func TestRunPolicy(t *testing.T) {
	echo := carmy.Tool(func(in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}, carmy.Read, carmy.Name("echo"), carmy.Register(false))
	reg, err := carmy.New().Tool(echo).Policies(`
permit(principal, action, resource);

@id("no-adapters")
@reason("agents in frameworks may not echo")
forbid(principal, action == Action::"call", resource == Tool::"echo") when { context.door == "adapter" };
`).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	o := adapt.Run(context.Background(), reg, nil, "echo", []byte(`{"text":"hi"}`), "")
	if o.Err == nil || o.Err.Code != carmy.CodePermissionDenied || o.Err.Message != "agents in frameworks may not echo" {
		t.Fatalf("Run(echo) = %s, %+v; want permission_denied with the policy's reason", o.Output, o.Err)
	}
	if ids, _ := o.Err.Details["policy"].([]string); len(ids) != 1 || ids[0] != "no-adapters" {
		t.Errorf("details.policy = %#v; want [no-adapters]", o.Err.Details["policy"])
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "echo", Input: json.RawMessage(`{"text":"hi"}`)}); err != nil {
		t.Errorf("the same call in Go: %v; want it to run (the policy names the adapter door)", err)
	}
}
