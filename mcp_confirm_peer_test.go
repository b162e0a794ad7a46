package carmy_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// TestConfirmedCallReachesItsClient: a call that runs once the person at
// its client confirmed it by form still reaches that client: its progress
// and its own questions go to the client that made the call.
func TestConfirmedCallReachesItsClient(t *testing.T) {
	tool := carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
		ctx.Progress(1, 2, "asking")
		var ask Ask
		if ok, err := ctx.Elicit("why?", &ask); err != nil || !ok {
			return "", err
		}
		return ask.Reason, nil
	}, carmy.Destructive, carmy.Name("ask_then_burn"), carmy.RequireConfirmation(), carmy.Register(false))
	for _, transport := range []string{"memory", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			reg, err := carmy.New().Tool(tool).Logger(quietLogger()).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			var progress, confirmations atomic.Int32
			s := singleClient(t, reg, transport, "2025-11-25", &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if strings.HasPrefix(req.Params.Message, "Allow ask_then_burn") {
						confirmations.Add(1)
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"reason": "because"}}, nil
				},
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
			})
			p := &mcp.CallToolParams{Name: "ask_then_burn", Arguments: map[string]any{"text": "x"}}
			p.SetProgressToken("p1")
			res, err := s.CallTool(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "because" {
				t.Fatalf("the confirmed call: %s; want the answer to its own question", text)
			}
			if confirmations.Load() != 1 {
				t.Errorf("asked to confirm %d times; want 1", confirmations.Load())
			}
			for deadline := time.Now().Add(5 * time.Second); progress.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if progress.Load() != 1 {
				t.Errorf("the client got %d progress notifications; want 1", progress.Load())
			}
		})
	}
}
