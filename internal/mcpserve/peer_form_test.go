package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// TestPeerConfirmsByForm: where the server confirms calls by form, a
// client of a single-client transport that can show forms is asked with
// one, except where the server confirms by form nowhere; a client that
// cannot show forms never is.
func TestPeerConfirmsByForm(t *testing.T) {
	t.Parallel()
	elicits := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	for _, tc := range []struct {
		form mcpserve.FormConfirmation
		opts *mcp.ClientOptions
		want bool
	}{
		{mcpserve.FormOnSingle, elicits, true},
		{mcpserve.FormEverywhere, elicits, true},
		{mcpserve.FormNever, elicits, false},
		{mcpserve.FormOnSingle, nil, false},
		{mcpserve.FormEverywhere, nil, false},
	} {
		for _, v := range versions {
			t.Run(fmt.Sprintf("%d/elicits=%v/%s", tc.form, tc.opts != nil, v), func(t *testing.T) {
				t.Parallel()
				got := make(chan bool, 1)
				h := &host{run: func(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
					got <- c.Peer.ConfirmsByForm()
					return outcomes(ctx, c)
				}}
				_, cs := serve(t, mcpserve.Config{Host: h, Tools: tools(), Version: "v0", FormConfirmation: tc.form}, v, tc.opts)
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "none", Arguments: json.RawMessage(`{}`)}); err != nil {
					t.Fatal(err)
				}
				if g := <-got; g != tc.want {
					t.Errorf("ConfirmsByForm = %v; want %v", g, tc.want)
				}
			})
		}
	}
}
