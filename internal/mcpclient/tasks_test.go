package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTaskCallAnsweredAtOnceTakesItsTime: an upstream may answer a call
// made as a task at once, with the result of the whole run. That answer
// is waited for as long as the call may take, not cut at the bound that
// keeps reading the answer that names a task once the call ended.
func TestTaskCallAnsweredAtOnceTakesItsTime(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer srv.Close()
	c, err := Connect(context.Background(), Config{Name: "slow", URL: srv.URL, ConnectTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Call(ctx, &Request{Name: "slow", Arguments: json.RawMessage(`{}`), Task: true})
	if err != nil {
		t.Fatalf("the call made as a task, answered at once after 1.5s: %v; want its result", err)
	}
	if !strings.Contains(string(res.Content), `"done"`) {
		t.Errorf("result %s; want the upstream's text", res.Content)
	}
}
