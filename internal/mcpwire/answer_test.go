//lint:file-ignore SA1019 the test maps levels of MCP's logging, deprecated from 2026-07-28 on and still served.
package mcpwire_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

func TestLevel(t *testing.T) {
	tests := []struct {
		in   slog.Level
		want mcp.LoggingLevel
	}{
		{slog.LevelDebug - 4, "debug"},
		{slog.LevelDebug, "debug"},
		{slog.LevelInfo, "info"},
		{slog.LevelInfo + 2, "info"},
		{slog.LevelWarn, "warning"},
		{slog.LevelError, "error"},
		{slog.LevelError + 3, "error"},
		{slog.LevelError + 4, "critical"},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := mcpwire.Level(tt.in); got != tt.want {
				t.Errorf("Level(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAcceptsBoth(t *testing.T) {
	tests := []struct {
		name   string
		accept []string
		want   bool
	}{
		{"both in one header", []string{"application/json, text/event-stream"}, true},
		{"both in two headers", []string{"application/json;q=0.9", "text/event-stream"}, true},
		{"wildcards", []string{"application/*, text/*"}, true},
		{"any", []string{"*/*"}, true},
		{"json only", []string{"application/json"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mcpwire.AcceptsBoth(tt.accept); got != tt.want {
				t.Errorf("AcceptsBoth(%q) = %v, want %v", tt.accept, got, tt.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	h := http.Header{}
	if !mcpwire.HeaderIs(h, "Mcp-Method", "tools/call") || !mcpwire.NoParamHeaders(h) {
		t.Fatal("an absent header must pass")
	}
	h.Set("Mcp-Method", "tools/call")
	if !mcpwire.HeaderIs(h, "Mcp-Method", "tools/call") || mcpwire.HeaderIs(h, "Mcp-Method", "tools/list") {
		t.Fatal("HeaderIs must compare the value")
	}
	h.Add("Mcp-Method", "tools/call")
	if mcpwire.HeaderIs(h, "Mcp-Method", "tools/call") {
		t.Fatal("a header given twice must not pass")
	}
	h.Set("Mcp-Param-Region", "eu")
	if mcpwire.NoParamHeaders(h) {
		t.Fatal("NoParamHeaders missed an Mcp-Param- header")
	}
}

func TestRPCResult(t *testing.T) {
	if got := string(mcpwire.RPCResult([]byte(`"a"`), []byte(`{}`))); got != `{"jsonrpc":"2.0","id":"a","result":{}}` {
		t.Fatalf("RPCResult = %s", got)
	}
}

func TestSessionlessResult(t *testing.T) {
	server := &mcp.Implementation{Name: "carmy", Version: "test"}
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want []string
	}{
		{"complete, never a null content", &mcp.CallToolResult{}, []string{`"content":[]`, `"resultType":"complete"}`, `"name":"carmy"`}},
		{"input required", &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{}}, []string{`"resultType":"input_required"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := mcpwire.SessionlessResult(tt.res, server)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("SessionlessResult = %s, want it to contain %s", b, w)
				}
			}
		})
	}
}
