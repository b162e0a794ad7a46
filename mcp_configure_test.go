package carmy_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// TestConfigureMCP: resources, prompts and completions a host adds with
// the SDK's own API are served beside carmy's tools, in both generations.
func TestConfigureMCP(t *testing.T) {
	t.Parallel()
	f := &featureTools{}
	reg := build(t, carmy.New().Tool(f.defs()...).
		ConfigureMCP(func(s *mcp.Server) {
			s.AddResource(&mcp.Resource{URI: "test://readme", Name: "readme", MIMEType: "text/plain"},
				func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
				})
			s.AddPrompt(&mcp.Prompt{Name: "greeting", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
				func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + req.Params.Arguments["who"]}}}}, nil
				})
		}).
		ConfigureMCPOptions(func(o *mcp.ServerOptions) {
			o.CompletionHandler = func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"Ada", "Alan"}}}, nil
			}
		}))
	srv := serve(t, reg)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			s := mcpConnect(t, srv.URL, version, nil)
			caps := s.InitializeResult().Capabilities
			if caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil || caps.Tools == nil || caps.Tools.ListChanged {
				t.Errorf("capabilities %+v", caps)
			}
			res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://readme"})
			if err != nil || res.Contents[0].Text != "read me" {
				t.Errorf("resources/read: %+v, %v", res, err)
			}
			p, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greeting", Arguments: map[string]string{"who": "Ada"}})
			if err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "Greet Ada" {
				t.Errorf("prompts/get: %+v, %v", p, err)
			}
			c, err := s.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greeting"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "A"}})
			if err != nil || len(c.Completion.Values) != 2 {
				t.Errorf("completion/complete: %+v, %v", c, err)
			}
			tools, err := s.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 3 {
				t.Errorf("tools/list: %d tools, %v", len(tools.Tools), err)
			}
		})
	}
}
