// Command conformance is a carmy server with the fixtures of the official
// MCP conformance suite (@modelcontextprotocol/conformance): its tools,
// resources, prompts and completions, served over streamable HTTP at /mcp.
//
//	go run ./examples/conformance -addr 127.0.0.1:3001
//	npx @modelcontextprotocol/conformance server --url http://127.0.0.1:3001/mcp
//
// The fixture tools that carmy's own features cover are carmy tools:
// text, image, audio, embedded resource and mixed content (carmy.Content),
// errors, logging and progress (Context.Log, Context.Progress), elicitation
// (Context.Elicit, with defaults from jsonschema tags, and in input-required
// rounds in the sessionless protocol: rounds.go), a parameter mirrored in a
// header (carmy:"header=Region") and a hand-written JSON Schema 2020-12
// input schema (carmy.Impl). What carmy leaves to the official SDK is added
// with Builder.ConfigureMCP and Builder.ConfigureMCPOptions: sampling and
// roots, an elicitation whose form needs schema keywords carmy's model does
// not produce (titled enums), a tool that closes its event stream,
// resources, prompts and completions. The skills of the skills extension
// (SEP-2640) are the folder skills/, embedded, with Builder.Skills, which
// also serves carmy's generated skill of the server's rules.
//
//lint:file-ignore SA1019 the suite tests sampling, which MCP deprecates from 2026-07-28 on.
package main

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "address to serve MCP on (loopback only: no authentication here)")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Listen logs "carmy: serving" once the address is bound, and only
	// then: a taken port is an error and no such line.
	if err := newBuilder().Listen(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

// skillsFolder holds the skills the server serves.
//
//go:embed skills
var skillsFolder embed.FS

// newBuilder is the server: carmy's tools and the SDK's additions.
func newBuilder() *carmy.Builder {
	folder, _ := fs.Sub(skillsFolder, "skills") // a directory embedded just above
	return carmy.New().
		Tool(tools()...).
		Skills(folder).
		Tool(roundTools()...).
		Tool(taskTools()...).
		ConfigureMCP(func(s *mcp.Server) {
			addSDKTools(s)
			addRoundSDKTools(s)
			addResources(s)
			addPrompts(s)
		}).
		ConfigureMCPOptions(func(o *mcp.ServerOptions) {
			o.CompletionHandler = complete
			// The SDK keeps the subscriptions; the handlers only accept them.
			o.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
			o.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
		})
}

// Minimal media, as the suite's own example servers use them: a 1x1 PNG
// and a silent WAV.
var (
	png, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	wav, _ = base64.StdEncoding.DecodeString("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

// ElicitationInput is the input of test_elicitation.
type ElicitationInput struct {
	Message string `json:"message" jsonschema:"description=The message to show the user"`
}

// Account is the form test_elicitation shows.
type Account struct {
	Username string `json:"username" jsonschema:"description=Your preferred username"`
	Email    string `json:"email,omitempty" jsonschema:"description=Your email address"`
}

// Profile is the form test_elicitation_sep1034_defaults shows: every field
// with a default, which the client fills in when the user leaves it out.
type Profile struct {
	Name     string  `json:"name,omitempty" jsonschema:"description=User name,default=John Doe"`
	Age      int     `json:"age,omitempty" jsonschema:"description=User age,default=30"`
	Score    float64 `json:"score,omitempty" jsonschema:"description=User score,default=95.5"`
	Status   string  `json:"status,omitempty" jsonschema:"description=User status,enum=active,enum=inactive,enum=pending,default=active"`
	Verified bool    `json:"verified,omitempty" jsonschema:"description=Verification status,default=true"`
}

// Greeting is the input of test_custom_headers: its region is mirrored in
// the Mcp-Param-Region header, which the server checks against the body.
type Greeting struct {
	Region string `json:"region" carmy:"header=Region" jsonschema:"description=Where to greet"`
	Name   string `json:"name,omitempty" jsonschema:"description=Whom to greet"`
}

// Contact is the input of json_schema_2020_12_tool, whose schema is written
// out with JSON Schema 2020-12 keywords.
type Contact struct {
	Name          string   `json:"name,omitempty"`
	Address       *Address `json:"address,omitempty"`
	ContactMethod string   `json:"contactMethod,omitempty"`
	Phone         string   `json:"phone,omitempty"`
	Email         string   `json:"email,omitempty"`
}

// Address is part of a Contact.
type Address struct {
	Street string `json:"street,omitempty"`
	City   string `json:"city,omitempty"`
}

func tools() []*carmy.ToolDef {
	text := func(s string) func() (carmy.Content, error) {
		return func() (carmy.Content, error) { return carmy.Content{carmy.Text{Text: s}}, nil }
	}
	return []*carmy.ToolDef{
		carmy.Tool(text("This is a simple text response for testing."), carmy.None,
			carmy.Name("test_simple_text"), carmy.Description("Tests simple text content response")),
		carmy.Tool(func() (carmy.Content, error) {
			return carmy.Content{carmy.Image{Data: png, MIMEType: "image/png"}}, nil
		}, carmy.None,
			carmy.Name("test_image_content"), carmy.Description("Tests image content response")),
		carmy.Tool(func() (carmy.Content, error) {
			return carmy.Content{carmy.Audio{Data: wav, MIMEType: "audio/wav"}}, nil
		}, carmy.None,
			carmy.Name("test_audio_content"), carmy.Description("Tests audio content response")),
		carmy.Tool(func() (carmy.Content, error) {
			return carmy.Content{carmy.Resource{URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource"}}, nil
		}, carmy.None, carmy.Name("test_embedded_resource"), carmy.Description("Tests embedded resource content response")),
		carmy.Tool(func() (carmy.Content, error) {
			return carmy.Content{
				carmy.Text{Text: "This is text content"},
				carmy.Image{Data: png, MIMEType: "image/png"},
				carmy.Resource{URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource"},
			}, nil
		}, carmy.None, carmy.Name("test_multiple_content_types"), carmy.Description("Tests response with multiple content types (text, image, resource)")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				ctx.Log(slog.LevelInfo, msg)
			}
			return carmy.Content{carmy.Text{Text: "Tool with logging executed successfully"}}, nil
		}, carmy.None, carmy.Name("test_tool_with_logging"), carmy.Description("Tests tool that emits log messages during execution")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			for _, done := range []float64{0, 50, 100} {
				ctx.Progress(done, 100, fmt.Sprintf("Completed step %.0f of 100", done))
				time.Sleep(50 * time.Millisecond)
			}
			return carmy.Content{carmy.Text{Text: "Tool with progress executed successfully"}}, nil
		}, carmy.None, carmy.Name("test_tool_with_progress"), carmy.Description("Tests tool that reports progress notifications")),
		carmy.Tool(func() error {
			return carmy.Errorf(carmy.CodeUnavailable, "This tool intentionally returns an error for testing")
		}, carmy.None, carmy.Name("test_error_handling"), carmy.Description("Tests error response handling")),
		carmy.Tool(func(ctx carmy.Context, in ElicitationInput) (carmy.Content, error) {
			var a Account
			ok, err := ctx.Elicit(in.Message, &a)
			if err != nil {
				return nil, err
			}
			return carmy.Content{carmy.Text{Text: fmt.Sprintf("Elicitation result: accepted=%v, username=%s", ok, a.Username)}}, nil
		}, carmy.None, carmy.Name("test_elicitation"), carmy.Description("Tests server-initiated elicitation (user input request)")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			var p Profile
			ok, err := ctx.Elicit("Test defaults for primitives", &p)
			if err != nil {
				return nil, err
			}
			return carmy.Content{carmy.Text{Text: fmt.Sprintf("Elicitation result: accepted=%v, %+v", ok, p)}}, nil
		}, carmy.None, carmy.Name("test_elicitation_sep1034_defaults"), carmy.Description("Tests elicitation with default values per SEP-1034")),
		carmy.Impl[Contact, string](contactTool{}),
		carmy.Tool(func(in Greeting) (string, error) {
			return fmt.Sprintf("Hello %s from %s", in.Name, in.Region), nil
		}, carmy.None, carmy.Name("test_custom_headers"), carmy.Description("Tests a parameter mirrored in a header (SEP-2243)")),
	}
}

// contactTool is json_schema_2020_12_tool: an Impl tool whose input schema
// is written out, with keywords beyond those carmy derives.
type contactTool struct{}

func (contactTool) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613, SEP-2106)",
		Effect:      carmy.None,
		InputSchema: json.RawMessage(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type": "object",
			"$defs": {
				"address": {
					"$anchor": "addressDef",
					"type": "object",
					"properties": {"street": {"type": "string"}, "city": {"type": "string"}}
				}
			},
			"properties": {
				"name": {"type": "string"},
				"address": {"$ref": "#/$defs/address"},
				"contactMethod": {"type": "string", "enum": ["phone", "email"]},
				"phone": {"type": "string"},
				"email": {"type": "string"}
			},
			"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
			"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
			"then": {"required": ["phone"]},
			"else": {"required": ["email"]},
			"additionalProperties": false
		}`),
	}
}

func (contactTool) Execute(_ carmy.Context, in Contact) (string, error) {
	return "contact: " + in.Name, nil
}

// readOnly are the hints of the SDK's fixture tools, which change
// nothing: a carmy that mounts this server (carmy proxy) maps them to
// reads, which need no person's confirmation, as carmy's own tools here.
var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true}

// addSDKTools adds the fixture tools that use what carmy leaves to the
// SDK: sampling, an elicitation form with titled enums (oneOf of const and
// title, enumNames), which carmy's schemas do not produce, and a call that
// closes its event stream for the client to resume.
func addSDKTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "test_sampling", Description: "Tests server-initiated sampling (LLM completion request)", Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
		}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
				MaxTokens: 100,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling failed: %w", err)
			}
			text := "(non-text response)"
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "LLM response: " + text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "test_elicitation_sep1330_enums", Description: "Tests elicitation with enum schema improvements per SEP-1330", Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: "Test enum schemas",
				RequestedSchema: map[string]any{
					"type": "object",
					"properties": map[string]any{
						"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
						"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
						"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
						"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
						"titledMulti":    map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"anyOf": titled}},
					},
				},
			})
			if err != nil {
				return nil, nil, fmt.Errorf("elicitation failed: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Elicitation result: action=%s, content=%v", res.Action, res.Content)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "test_reconnection", Description: "Tests SSE stream disconnection and client reconnection (SEP-1699)", Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			}
			time.Sleep(100 * time.Millisecond) // the client reconnects meanwhile
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Reconnection test completed successfully."}}}, nil, nil
		})
}

func addResources(s *mcp.Server) {
	text := func(body string) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: body}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{Name: "static-text", Description: "A static text resource for testing", MIMEType: "text/plain", URI: "test://static-text"},
		text("This is the content of the static text resource."))
	s.AddResource(&mcp.Resource{Name: "static-binary", Description: "A static binary resource (image) for testing", MIMEType: "image/png", URI: "test://static-binary"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: png}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "template", Description: "A resource template with parameter substitution", MIMEType: "application/json", URITemplate: "test://template/{id}/data"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			body, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)}}}, nil
		})
	s.AddResource(&mcp.Resource{Name: "watched-resource", Description: "A resource that clients may subscribe to", MIMEType: "text/plain", URI: "test://watched-resource"},
		text("Watched resource content"))
}

func addPrompts(s *mcp.Server) {
	say := func(c mcp.Content) *mcp.GetPromptResult {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: c}}}
	}
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return say(&mcp.TextContent{Text: "This is a simple prompt for testing."}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return say(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that includes an embedded resource",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			uri := req.Params.Arguments["resourceUri"]
			return say(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return say(&mcp.ImageContent{Data: png, MIMEType: "image/png"}), nil
		})
}

// complete answers completion/complete with no suggestions, which is all
// the suite asks of it.
func complete(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}
