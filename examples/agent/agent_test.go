package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

var day = func() time.Time { return time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC) }

func newAgent(t *testing.T, model Model) (*Agent, *Library) {
	t.Helper()
	lib := NewLibrary(day)
	reg, err := newRegistry(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return &Agent{Tools: reg, Model: model, Principal: "reader-1"}, lib
}

// TestAgentScript runs the demo conversation: the tools run, the model
// reads an error and fixes its call, and the answer comes from the
// results.
func TestAgentScript(t *testing.T) {
	script := borrowScript()
	agent, lib := newAgent(t, script)
	var log bytes.Buffer
	agent.Log = &log
	answer, err := agent.Run(context.Background(), defaultQuestion)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	if want := `I borrowed "The Dispossessed" by Ursula K. Le Guin for you. Loans last at most 30 days, so it is due back on 2025-07-01.`; answer != want {
		t.Errorf("answer = %q, want %q", answer, want)
	}
	want := []Loan{{BookID: 2, Title: "The Dispossessed", Borrower: "reader-1", Due: "2025-07-01"}}
	if got := lib.Loans(); !slices.Equal(got, want) {
		t.Errorf("loans = %+v, want %+v", got, want)
	}

	// The model got the strict tool definitions every turn, and each tool
	// result answered its call.
	if len(script.Requests) != 4 {
		t.Fatalf("the model was asked %d times, want 4", len(script.Requests))
	}
	for i, req := range script.Requests {
		var names []string
		for _, tool := range req.Tools {
			if tool.Type != "function" || !tool.Function.Strict {
				t.Errorf("turn %d: tool %+v is not a strict function", i, tool.Function.Name)
			}
			names = append(names, tool.Function.Name)
		}
		if !slices.Equal(names, []string{"borrow_book", "find_books"}) {
			t.Errorf("turn %d: tools %v", i, names)
		}
	}
	final := script.Requests[3].Messages
	var results []string
	for i, m := range final {
		if m.Role != "tool" {
			continue
		}
		prev := final[i-1]
		if prev.Role != "assistant" || len(prev.ToolCalls) != 1 || prev.ToolCalls[0].ID != m.ToolCallID {
			t.Errorf("tool message %d answers %q, not the call before it", i, m.ToolCallID)
		}
		results = append(results, m.Content)
	}
	if len(results) != 3 || !strings.Contains(results[1], `"code":"invalid_input"`) || !strings.Contains(results[1], `"path":"days","message":"must be at most 30"`) {
		t.Errorf("tool results = %q, want the search, the refusal of 90 days with its field, and the loan", results)
	}
	for _, line := range []string{
		`model calls find_books {"title":null,"author":"Le Guin","available_only":true,"limit":null}`,
		`model calls borrow_book {"book_id":2,"days":90}`,
		"model: I borrowed",
	} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("the transcript lacks %q:\n%s", line, log.String())
		}
	}
}

// TestRun is what main does without -live.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, borrowScript(), defaultQuestion, day); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "due back on 2025-07-01.\n") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestAgentRepeatedCall: a model that sends the same call twice gets the
// recorded result the second time; the book is lent once.
func TestAgentRepeatedCall(t *testing.T) {
	borrow := func(Request) (Message, error) {
		return callTool("call_7", "borrow_book", `{"book_id":3,"days":7}`), nil
	}
	script := &Script{Steps: []func(Request) (Message, error){borrow, borrow, func(req Request) (Message, error) {
		return Message{Role: "assistant", Content: req.Messages[len(req.Messages)-1].Content}, nil
	}}}
	agent, lib := newAgent(t, script)
	answer, err := agent.Run(context.Background(), "Borrow book 3 for a week.")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"book_id":3,"title":"The Left Hand of Darkness","borrower":"reader-1","due":"2025-06-08"}`; answer != want {
		t.Errorf("second result = %s, want the first loan, %s", answer, want)
	}
	if n := len(lib.Loans()); n != 1 {
		t.Errorf("%d loans, want 1", n)
	}
}

func TestAgentTurnLimit(t *testing.T) {
	search := func(Request) (Message, error) { return callTool("c", "find_books", `{}`), nil }
	agent, _ := newAgent(t, &Script{Steps: []func(Request) (Message, error){search, search, search}})
	agent.MaxTurns = 2
	if _, err := agent.Run(context.Background(), "?"); err == nil || !strings.Contains(err.Error(), "no answer after 2 turns") {
		t.Errorf("got %v, want the turn limit", err)
	}
}

// TestOpenAIWire runs the agent against a fake of the Chat Completions
// endpoint: the request carries the key, the model and the strict tool
// definitions as OpenAI reads them, and the model's call, with strict
// mode's nulls, runs.
func TestOpenAIWire(t *testing.T) {
	turn := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "bad request line or key", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
			Tools    []struct {
				Type     string `json:"type"`
				Function struct {
					Name       string         `json:"name"`
					Parameters map[string]any `json:"parameters"`
					Strict     bool           `json:"strict"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("request body: %v", err)
		}
		if req.Model != "gpt-test" || len(req.Tools) != 2 || !req.Tools[1].Function.Strict ||
			req.Tools[1].Function.Name != "find_books" || req.Tools[1].Function.Parameters["additionalProperties"] != false {
			t.Errorf("request: %s", body)
		}
		turn++
		w.Header().Set("Content-Type", "application/json")
		switch turn {
		case 1:
			io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
				"tool_calls":[{"id":"call_a","type":"function","function":{"name":"find_books","arguments":"{\"title\":\"kindred\",\"author\":null,\"available_only\":false,\"limit\":null}"}}]}}]}`)
		default:
			if len(req.Messages) != 4 || !bytes.Contains(req.Messages[3], []byte(`"tool_call_id":"call_a"`)) || !bytes.Contains(req.Messages[3], []byte(`Octavia E. Butler`)) {
				t.Errorf("the tool's result is missing: %s", body)
			}
			io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"Kindred, by Octavia E. Butler, is on the shelf."}}]}`)
		}
	}))
	defer srv.Close()
	agent, _ := newAgent(t, &OpenAI{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-test", Client: srv.Client()})
	answer, err := agent.Run(context.Background(), "Is Kindred in?")
	if err != nil {
		t.Fatal(err)
	}
	if answer != "Kindred, by Octavia E. Butler, is on the shelf." || turn != 2 {
		t.Errorf("answer %q after %d turns", answer, turn)
	}
}

func TestOpenAIError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"Invalid schema for function 'x'"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	m := &OpenAI{BaseURL: srv.URL, Model: "m", Client: srv.Client()}
	if _, err := m.Complete(context.Background(), Request{}); err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), "Invalid schema") {
		t.Errorf("got %v, want the status and the API's message", err)
	}
}
