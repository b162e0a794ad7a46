package bench

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"

	"github.com/carmy-dev/carmy"
)

type burnInput struct {
	Note string `json:"note"`
}

// TestMCPGoClient connects mark3labs/mcp-go's client to carmy's /mcp over
// streamable HTTP in each protocol generation: its default (the newest
// version both sides speak, sessionless), pinned to 2026-07-28, and pinned
// to the session-based 2025-11-25. In each it lists the tools, calls one
// that reports the principal the host authenticated, and has a call
// confirmed by elicitation.
func TestMCPGoClient(t *testing.T) {
	whoami := carmy.Tool(func(ctx carmy.Context) (string, error) { return ctx.Principal, nil }, carmy.Read,
		carmy.Name("whoami"), carmy.Register(false))
	burned := 0
	burn := carmy.Tool(func(in burnInput) error { burned++; return nil }, carmy.Destructive,
		carmy.Name("burn"), carmy.RequireConfirmation(), carmy.Register(false))
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice"})
	reg, err := carmy.New().Tool(whoami, burn).Authenticate(tokens).ElicitConfirmation().Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()

	for _, tc := range []struct {
		name    string
		opts    []mcpgoclient.ClientOption
		version string // the version the connection must end up on
	}{
		{"default", nil, "2026-07-28"},
		{"pinned 2026-07-28", []mcpgoclient.ClientOption{mcpgoclient.WithProtocolVersion("2026-07-28")}, "2026-07-28"},
		{"pinned 2025-11-25", []mcpgoclient.ClientOption{mcpgoclient.WithProtocolVersion("2025-11-25")}, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tr, err := mcpgotransport.NewStreamableHTTP(srv.URL+"/mcp",
				mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer alice-secret"}))
			if err != nil {
				t.Fatal(err)
			}
			asked := 0
			opts := append(slices.Clone(tc.opts), mcpgoclient.WithElicitationHandler(elicitationFunc(func(context.Context, mcpgomcp.ElicitationRequest) (*mcpgomcp.ElicitationResult, error) {
				asked++
				return &mcpgomcp.ElicitationResult{ElicitationResponse: mcpgomcp.ElicitationResponse{
					Action: mcpgomcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true},
				}}, nil
			})))
			c := mcpgoclient.NewClient(tr, opts...)
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Initialize(ctx, mcpgomcp.InitializeRequest{Params: mcpgomcp.InitializeParams{
				ClientInfo: mcpgomcp.Implementation{Name: "interop", Version: "1"},
			}}); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if got := c.ProtocolVersion(); got != tc.version {
				t.Errorf("protocol version %q, want %q", got, tc.version)
			}
			list, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, []string{"burn", "whoami"}) {
				t.Errorf("tools %v", names)
			}
			res, err := c.CallTool(ctx, mcpgomcp.CallToolRequest{Params: mcpgomcp.CallToolParams{Name: "whoami"}})
			if err != nil {
				t.Fatalf("whoami: %v", err)
			}
			if text := resultText(res); res.IsError || text != "alice" {
				t.Errorf("whoami = %q (error %v), want the principal alice", text, res.IsError)
			}
			before := burned
			res, err = c.CallTool(ctx, mcpgomcp.CallToolRequest{Params: mcpgomcp.CallToolParams{Name: "burn", Arguments: map[string]any{"note": "x"}}})
			if err != nil {
				t.Fatalf("burn: %v", err)
			}
			if res.IsError || asked != 1 || burned != before+1 {
				t.Errorf("burn confirmed by elicitation: error %v (%s), asked %d, ran %d times", res.IsError, resultText(res), asked, burned-before)
			}
		})
	}
}

type elicitationFunc func(context.Context, mcpgomcp.ElicitationRequest) (*mcpgomcp.ElicitationResult, error)

func (f elicitationFunc) Elicit(ctx context.Context, req mcpgomcp.ElicitationRequest) (*mcpgomcp.ElicitationResult, error) {
	return f(ctx, req)
}

func resultText(res *mcpgomcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(mcpgomcp.TextContent); ok {
		var s string
		if json.Unmarshal([]byte(tc.Text), &s) == nil {
			return s
		}
		return tc.Text
	}
	return ""
}
