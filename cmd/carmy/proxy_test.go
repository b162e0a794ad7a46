package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProxyStdio runs carmy proxy -stdio in front of an MCP server over
// HTTP, and calls the server's tools through it with an MCP client.
func TestProxyStdio(t *testing.T) {
	var writes atomic.Int32
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	no := false
	up.AddTool(&mcp.Tool{Name: "write", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		writes.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}, nil
	})
	up.AddTool(&mcp.Tool{Name: "wipe", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	config := filepath.Join(dir, "proxy.toml")
	if err := os.WriteFile(config, []byte("[[mount]]\nprefix = \"up\"\nurl = \""+srv.URL+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := carmyCmd(t, dir, "proxy", "-config", config, "-stdio")
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "up_wipe,up_write" {
		t.Fatalf("tools %v, want up_wipe and up_write", names)
	}
	for i := range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_write", Arguments: map[string]any{"text": "hi"}, Meta: mcp.Meta{"carmy/request_id": "once"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("the upstream wrote %d times for one request id, want once", n)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_wipe", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(string(mustJSON(t, res.Content)), "confirm") {
		t.Errorf("a destructive upstream tool ran without a person: %+v", res)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
