//lint:file-ignore SA1019 the suite asks for sampling and roots, which MCP deprecates from 2026-07-28 on.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// The fixtures of the suite's multi-round scenarios (SEP-2322) and of its
// sessionless diagnostics (SEP-2575). Those that ask the user are carmy
// tools: Context.Elicit asks in a session by a request, and in the
// sessionless protocol through input-required results whose state carmy
// signs, with the same code. Those that ask for sampling or roots, which
// MCP deprecates and carmy gives tools no way to ask, are the SDK's.

// UserName is the form of test_input_required_result_elicitation: the
// question goes by user_name, its type's name.
type UserName struct {
	Name string `json:"name"`
}

// Confirmation is the form of the scenarios that check the request state.
type Confirmation struct {
	OK bool `json:"ok"`
}

// Step1 and Step2 are the forms of test_input_required_result_multi_round,
// asked one round after the other.
type (
	Step1 struct {
		Name string `json:"name"`
	}
	Step2 struct {
		Color string `json:"color"`
	}
)

// roundTools are the carmy tools of the multi-round and sessionless
// scenarios.
func roundTools() []*carmy.ToolDef {
	greet := func(ctx carmy.Context) (carmy.Content, error) {
		var u UserName
		if ok, err := ctx.Elicit("What is your name?", &u); err != nil || !ok {
			return nil, declined(err)
		}
		return carmy.Content{carmy.Text{Text: "Hello, " + u.Name + "!"}}, nil
	}
	confirm := func(ctx carmy.Context) (carmy.Content, error) {
		var c Confirmation
		if ok, err := ctx.Elicit("Please confirm", &c); err != nil || !ok {
			return nil, declined(err)
		}
		return carmy.Content{carmy.Text{Text: fmt.Sprintf("state-ok: confirmed=%v", c.OK)}}, nil
	}
	return []*carmy.ToolDef{
		carmy.Tool(greet, carmy.None, carmy.Name("test_input_required_result_elicitation"),
			carmy.Description("Asks the user's name through an input-required result (SEP-2322)")),
		carmy.Tool(confirm, carmy.None, carmy.Name("test_input_required_result_request_state"),
			carmy.Description("Asks for a confirmation, with a signed request state (SEP-2322)")),
		carmy.Tool(confirm, carmy.None, carmy.Name("test_input_required_result_tampered_state"),
			carmy.Description("Asks for a confirmation; a tampered request state is refused (SEP-2322)")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			// One question per round: the second is asked once the first
			// is answered, and the state of the last round carries both.
			var s1 Step1
			if ok, err := ctx.Elicit("Step 1: What is your name?", &s1); err != nil || !ok {
				return nil, declined(err)
			}
			var s2 Step2
			if ok, err := ctx.Elicit("Step 2: What is your favorite color?", &s2); err != nil || !ok {
				return nil, declined(err)
			}
			return carmy.Content{carmy.Text{Text: fmt.Sprintf("%s likes %s", s1.Name, s2.Color)}}, nil
		}, carmy.None, carmy.Name("test_input_required_result_multi_round"),
			carmy.Description("Asks two questions, one round after the other (SEP-2322)")),
		carmy.Tool(greet, carmy.None, carmy.Name("test_streaming_elicitation"),
			carmy.Description("Asks the user in the sessionless protocol: an input-required result, never a request on the response stream (SEP-2575)")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			ctx.Log(slog.LevelInfo, "logging tool called")
			ctx.Log(slog.LevelWarn, "logging tool warns")
			return carmy.Content{carmy.Text{Text: "logged"}}, nil
		}, carmy.None, carmy.Name("test_logging_tool"),
			carmy.Description("Logs; a client of the sessionless protocol gets the messages only when its request sets a log level (SEP-2575)")),
	}
}

// declined is the error of a tool whose question was not answered: the
// question's own error, else a refusal the model can read.
func declined(err error) error {
	if err != nil {
		return err
	}
	return carmy.Errorf(carmy.CodePermissionDenied, "the user declined to answer")
}

// addRoundSDKTools adds the fixtures that ask for sampling or roots, and
// the prompt that asks the user, with the SDK's own multi-round results:
// the handler returns its questions, and is called again with the answers.
func addRoundSDKTools(s *mcp.Server) {
	object := map[string]any{"type": "object"}
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	sample := func(q string, max int64) *mcp.CreateMessageParams {
		return &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: q}}}, MaxTokens: max}
	}
	ask := func(name, desc string, questions mcp.InputRequestMap, done func(mcp.InputResponseMap) string) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: object, Annotations: readOnly}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			answers := req.Params.InputResponses
			for id := range questions {
				if answers[id] == nil {
					return &mcp.CallToolResult{InputRequests: questions, RequestState: name}, nil
				}
			}
			return text(done(answers)), nil
		})
	}
	ask("test_input_required_result_sampling", "Asks for sampling through an input-required result (SEP-2322)", mcp.InputRequestMap{"capital_question": sample("What is the capital of France?", 100)},
		func(a mcp.InputResponseMap) string { return "sampled: " + sampled(a["capital_question"]) })
	ask("test_input_required_result_list_roots", "Asks for the client's roots through an input-required result (SEP-2322)", mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}},
		func(a mcp.InputResponseMap) string { return "roots: " + roots(a["client_roots"]) })
	ask("test_input_required_result_multiple_inputs", "Asks for elicitation, sampling and roots in one input-required result (SEP-2322)", mcp.InputRequestMap{
		"user_name":    nameQuestion(),
		"greeting":     sample("Generate a greeting", 50),
		"client_roots": &mcp.ListRootsParams{},
	}, func(a mcp.InputResponseMap) string {
		return fmt.Sprintf("greeting: %s; roots: %s", sampled(a["greeting"]), roots(a["client_roots"]))
	})
	// Asks only what the client declared it can answer.
	s.AddTool(&mcp.Tool{Name: "test_input_required_result_capabilities", Description: "Asks only for what the client declared it can answer (SEP-2322)", InputSchema: object, Annotations: readOnly}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if len(req.Params.InputResponses) > 0 {
			return text("answered"), nil
		}
		caps, questions := req.ClientCapabilities(), mcp.InputRequestMap{}
		if caps != nil && caps.Sampling != nil {
			questions["capital_question"] = sample("What is the capital of France?", 100)
		}
		if caps != nil && caps.Elicitation != nil {
			questions["user_name"] = nameQuestion()
		}
		if len(questions) == 0 {
			return nil, missing("sampling")
		}
		return &mcp.CallToolResult{InputRequests: questions, RequestState: "capabilities"}, nil
	})
	// Needs sampling: a client that did not declare it gets the
	// protocol's error, and the tool does nothing.
	s.AddTool(&mcp.Tool{Name: "test_missing_capability", Description: "Needs sampling: refused with the missing capability error when the client did not declare it (SEP-2575)", InputSchema: object, Annotations: readOnly}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
			return nil, missing("sampling")
		}
		if a := req.Params.InputResponses["capital_question"]; a != nil {
			return text("sampled: " + sampled(a)), nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"capital_question": sample("What is the capital of France?", 100)}, RequestState: "sampling"}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "A prompt that asks the user for its context first (SEP-2322)"},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			res, ok := req.Params.InputResponses["user_context"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": &mcp.ElicitParams{
					Message:         "What context should the prompt use?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"context": map[string]any{"type": "string"}}, "required": []string{"context"}},
				}}}, nil
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Context: %v", res.Content["context"])}}}}, nil
		})
}

func nameQuestion() *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: "What is your name?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}}
}

// missing is the protocol's error for a call that needs a client
// capability the client did not declare.
func missing(capability string) error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "missing required client capability: " + capability, Data: data}
}

func sampled(a mcp.InputResponse) string {
	switch r := a.(type) {
	case *mcp.CreateMessageResult:
		if t, ok := r.Content.(*mcp.TextContent); ok {
			return t.Text
		}
	case *mcp.CreateMessageWithToolsResult:
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				return t.Text
			}
		}
	}
	return "(no text)"
}

func roots(a mcp.InputResponse) string {
	r, ok := a.(*mcp.ListRootsResult)
	if !ok {
		return "(none)"
	}
	uris := ""
	for _, root := range r.Roots {
		uris += root.URI + " "
	}
	return uris
}
