package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

// The conversation, in the JSON of OpenAI's Chat Completions API, reduced
// to what an agent loop with tools needs. An SDK's types would do as well.

// Request is what the agent sends the model each turn.
type Request struct {
	Model    string           `json:"model,omitempty"`
	Messages []Message        `json:"messages"`
	Tools    []llm.OpenAITool `json:"tools,omitempty"`
}

// Message is one message of the conversation: the system prompt, the
// user's, the model's (text, or calls of tools) and the tools' results.
type Message struct {
	Role       string     `json:"role"` // "system", "user", "assistant" or "tool"
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"` // of the call a tool message answers
}

// ToolCall is the model asking to run one tool.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and holds the arguments, a JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Model is the language model: given the conversation and the tools, it
// answers with text, or with calls of tools. OpenAI is the real one;
// Script plays a conversation back, for tests and for the demo.
type Model interface {
	Complete(ctx context.Context, req Request) (Message, error)
}

// Agent runs the loop: ask the model, run the tools it calls, give it the
// results, until it answers.
type Agent struct {
	Tools     *carmy.Registry
	Model     Model
	Principal string    // who the agent acts for, as the tools see it
	MaxTurns  int       // model calls per question; 0 means 8
	Log       io.Writer // the transcript, when not nil
}

const systemPrompt = "You are a librarian's assistant. Use the tools to answer; if a tool reports an error, fix the call and try again."

// Run answers one question.
func (a *Agent) Run(ctx context.Context, question string) (string, error) {
	// The tool definitions, for strict mode. An agent that can do without
	// some tools could log the error and go on with the rest: the
	// definitions of the tools that do export are returned either way.
	tools, err := llm.OpenAITools(a.Tools)
	if err != nil {
		return "", err
	}
	// The dispatcher reads each tool's input schema once, for every call
	// of the conversation.
	dispatcher := llm.NewDispatcher(a.Tools)
	msgs := []Message{{Role: "system", Content: systemPrompt}, {Role: "user", Content: question}}
	a.logf("user: %s\n", question)
	turns := a.MaxTurns
	if turns == 0 {
		turns = 8
	}
	for range turns {
		reply, err := a.Model.Complete(ctx, Request{Messages: msgs, Tools: tools})
		if err != nil {
			return "", err
		}
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 {
			a.logf("model: %s\n", reply.Content)
			return reply.Content, nil
		}
		for _, call := range reply.ToolCalls {
			a.logf("model calls %s %s\n", call.Function.Name, call.Function.Arguments)
			result := a.call(ctx, dispatcher, call)
			a.logf("  tool: %s\n", result)
			msgs = append(msgs, Message{Role: "tool", ToolCallID: call.ID, Content: result})
		}
	}
	return "", fmt.Errorf("no answer after %d turns", turns)
}

// call runs one tool call and returns what the model reads: the output,
// or the error with everything it needs to fix the call.
func (a *Agent) call(ctx context.Context, d *llm.Dispatcher, call ToolCall) string {
	// Dispatch drops the nulls strict mode makes the model send for the
	// fields it leaves out, and runs the call under every rule of the
	// registry. The call id is the request id: a loop that repeats a call
	// after a failure of its own gets the recorded result, not a second
	// loan.
	res, err := d.Dispatch(ctx, call.Function.Name, call.Function.Arguments,
		carmy.WithPrincipal(a.Principal),
		carmy.WithRequestID(call.ID),
	)
	if err != nil {
		var e *carmy.Error
		if !errors.As(err, &e) {
			e = carmy.Errorf(carmy.CodeInternal, "the tool failed")
		}
		b, _ := json.Marshal(map[string]any{"error": e})
		return string(b)
	}
	return string(res.Output)
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, format, args...)
	}
}
