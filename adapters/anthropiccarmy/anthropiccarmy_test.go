package anthropiccarmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/carmy-dev/carmy/adapters/anthropiccarmy"
	"github.com/carmy-dev/carmy/internal/adapt/adapttest"
)

// toolResult is a tool_result block the model was sent.
type toolResult struct {
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

// text is the result's text, whether the SDK sent it as a string or as
// text blocks.
func (r toolResult) text() string {
	var s string
	if json.Unmarshal(r.Content, &s) == nil {
		return s
	}
	var blocks []struct{ Text string }
	_ = json.Unmarshal(r.Content, &blocks)
	var b strings.Builder
	for _, t := range blocks {
		b.WriteString(t.Text)
	}
	return b.String()
}

// scripted is the Messages API on a loopback port, with a model that asks
// for the tool calls it is given, one turn each, then answers "done"; it
// keeps the tool results and the tools it was sent.
type scripted struct {
	mu      sync.Mutex
	turns   [][]map[string]any // tool_use blocks
	results []toolResult
	tools   []json.RawMessage
}

func (m *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []json.RawMessage `json:"tools"`
	}
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/messages" || json.Unmarshal(body, &req) != nil {
		http.Error(w, "unexpected request "+r.URL.Path, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(req.Tools) > 0 { // on a message thread, the first request alone has them
		m.tools = req.Tools
	}
	var blocks []toolResult
	if last := req.Messages[len(req.Messages)-1]; last.Role == "user" && json.Unmarshal(last.Content, &blocks) == nil {
		for _, b := range blocks {
			if b.ToolUseID != "" {
				m.results = append(m.results, b)
			}
		}
	}
	content, stop := []map[string]any{{"type": "text", "text": "done"}}, "end_turn"
	if len(m.turns) > 0 {
		content, stop, m.turns = m.turns[0], "tool_use", m.turns[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
		"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	})
}

func (m *scripted) lastResult(t *testing.T) toolResult {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.results) == 0 {
		t.Fatal("the model was sent no tool result")
	}
	return m.results[len(m.results)-1]
}

func call(id, name string, input map[string]any) []map[string]any {
	return []map[string]any{{"type": "tool_use", "id": id, "name": name, "input": input}}
}

// run runs the tool runner over the toolset to completion against the
// scripted model.
func run(t *testing.T, ts *anthropiccarmy.Toolset, turns ...[]map[string]any) *scripted {
	t.Helper()
	m := &scripted{turns: turns}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	runner := anthropiccarmy.Runner(ts, client.Beta.Messages.NewToolRunner(ts.Tools(), anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model: "claude-test", MaxTokens: 100,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("go"))},
		},
	}))
	msg, err := runner.RunToCompletion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "done" {
		t.Fatalf("answer = %+v", msg.Content)
	}
	return m
}

func toolset(t *testing.T, f *adapttest.Fixture) *anthropiccarmy.Toolset {
	t.Helper()
	ts, err := anthropiccarmy.New(f.Reg, adapttest.Caller()...)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestToolRoundTrip: the model asks for a tool, carmy runs it as the
// caller, and the output returns to the model; carmy's names,
// descriptions and schemas are what the model is offered.
func TestToolRoundTrip(t *testing.T) {
	f := adapttest.New(t)
	m := run(t, toolset(t, f), call("toolu_1", "add_note", map[string]any{"text": "milk"}))
	r := m.lastResult(t)
	if r.ToolUseID != "toolu_1" || r.IsError || r.text() != `{"text":"milk","owner":"alice"}` {
		t.Fatalf("the model read %+v (%s)", r, r.text())
	}
	if len(m.tools) != 3 {
		t.Fatalf("offered %d tools, want 3", len(m.tools))
	}
	var def struct {
		Name, Description string
		InputSchema       map[string]any `json:"input_schema"`
	}
	if err := json.Unmarshal(m.tools[0], &def); err != nil {
		t.Fatal(err)
	}
	props, _ := def.InputSchema["properties"].(map[string]any)
	if def.Name != "add_note" || def.Description != "Save a note" || props["text"] == nil || def.InputSchema["additionalProperties"] != false {
		t.Fatalf("offered %s", m.tools[0])
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times, want 1", n)
	}
}

// TestTaskRequiredTool: a tool that runs only as a task is offered, and
// runs as one when the model calls it: its output returns to the model.
func TestTaskRequiredTool(t *testing.T) {
	f := adapttest.New(t)
	m := run(t, toolset(t, f), call("toolu_1", "export_notes", map[string]any{"format": "csv"}))
	if r := m.lastResult(t); r.IsError || r.text() != `exported as csv` {
		t.Fatalf("the model read %+v (%s)", r, r.text())
	}
	if n := f.Exported.Load(); n != 1 {
		t.Fatalf("export_notes ran %d times, want 1", n)
	}
}

// TestInvalidInput: an input that breaks the tool's rules reaches the
// model as carmy's field errors, in an error result.
func TestInvalidInput(t *testing.T) {
	f := adapttest.New(t)
	r := run(t, toolset(t, f), call("toolu_1", "add_note", map[string]any{"text": ""})).lastResult(t)
	for _, want := range []string{`"code":"invalid_input"`, `"path":"text"`} {
		if !r.IsError || !strings.Contains(r.text(), want) {
			t.Fatalf("the model read %+v (%s), want an error with %s", r, r.text(), want)
		}
	}
	if n := f.Added.Load(); n != 0 {
		t.Fatalf("add_note ran %d times, want 0", n)
	}
}

// TestConfirmation: a destructive call asks the host's callback, which
// asks the person; approved, it runs once and the model reads the output;
// denied, it never runs and the model reads the denial; with no way to
// ask, the model reads carmy's refusal.
func TestConfirmation(t *testing.T) {
	cases := []struct {
		name    string
		confirm anthropiccarmy.Confirm
		runs    int32
		want    string
	}{
		{"approved", func(context.Context, anthropiccarmy.Approval) (bool, string, error) { return true, "person:alice", nil }, 1, "deleted"},
		{"denied", func(context.Context, anthropiccarmy.Approval) (bool, string, error) {
			return false, "person:alice", nil
		}, 0, `"code":"permission_denied"`},
		{"cannot ask", func(context.Context, anthropiccarmy.Approval) (bool, string, error) {
			return false, "", errors.New("nobody there")
		}, 0, `"code":"confirmation_required"`},
		{"no callback", nil, 0, `"code":"confirmation_required"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := adapttest.New(t)
			var asked []anthropiccarmy.Approval
			ts := toolset(t, f)
			if c.confirm != nil {
				ts.Confirm(func(ctx context.Context, a anthropiccarmy.Approval) (bool, string, error) {
					asked = append(asked, a)
					if f.Deleted.Load() != 0 {
						t.Error("delete_note ran before the person was asked")
					}
					return c.confirm(ctx, a)
				})
			}
			r := run(t, ts, call("toolu_9", "delete_note", map[string]any{"id": 3})).lastResult(t)
			if c.confirm != nil && (len(asked) != 1 || asked[0].Tool != "delete_note" || asked[0].Input != `{"id":3}` || asked[0].RequestID != "toolu_9" || asked[0].ID == "") {
				t.Fatalf("asked %+v", asked)
			}
			if !strings.Contains(r.text(), c.want) || r.IsError != (c.runs == 0) {
				t.Fatalf("the model read %+v (%s), want %s", r, r.text(), c.want)
			}
			if n := f.Deleted.Load(); n != c.runs {
				t.Fatalf("delete_note ran %d times, want %d", n, c.runs)
			}
		})
	}
}

// TestReplayedCall: a conversation replayed with the same tool_use id
// gets the recorded outcome; the tool runs once.
func TestReplayedCall(t *testing.T) {
	f := adapttest.New(t)
	for range 2 {
		r := run(t, toolset(t, f), call("toolu_7", "add_note", map[string]any{"text": "milk"})).lastResult(t)
		if r.text() != `{"text":"milk","owner":"alice"}` {
			t.Fatalf("the model read %s", r.text())
		}
	}
	if n := f.Added.Load(); n != 1 {
		t.Fatalf("add_note ran %d times for one call id, want 1", n)
	}
}

// TestSearchTools: search_tools is a runner tool like the others, and
// finds for the model only what the caller may call.
func TestSearchTools(t *testing.T) {
	f := adapttest.Searching(t)
	m := run(t, toolset(t, f), call("toolu_1", "search_tools", map[string]any{"query": "note", "limit": 50}))
	var names []string
	for _, raw := range m.tools {
		var d struct{ Name string }
		_ = json.Unmarshal(raw, &d)
		names = append(names, d.Name)
	}
	r := m.lastResult(t)
	if r.IsError {
		t.Fatalf("the model read %+v (%s)", r, r.text())
	}
	adapttest.CheckSearch(t, names, r.text())
}
