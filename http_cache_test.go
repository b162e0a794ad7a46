package carmy_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestListsArePrivate: every list that depends on who asks says so, so
// that a shared cache never gives one caller's list to another: GET /tools
// with Cache-Control: private and Vary: Authorization, and MCP tools/list
// with cacheScope "private" (the SDK's default is "public"), in the
// session generation over HTTP and stdio, and in the sessionless one.
func TestListsArePrivate(t *testing.T) {
	t.Parallel()
	srv, _ := hostServer(t, nil)
	t.Run("GET /tools", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/tools")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Cache-Control"); got != "private" {
			t.Errorf("Cache-Control = %q, want private", got)
		}
		if got := resp.Header.Values("Vary"); !slices.Contains(got, "Authorization") {
			t.Errorf("Vary = %q, want Authorization among them", got)
		}
	})
	scope := func(t *testing.T, answer string) {
		t.Helper()
		var msg struct {
			Result struct {
				CacheScope string            `json:"cacheScope"`
				Tools      []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(answer), &msg); err != nil || len(msg.Result.Tools) == 0 {
			t.Fatalf("tools/list answer %s: %v", answer, err)
		}
		if msg.Result.CacheScope != "private" {
			t.Fatalf("tools/list cacheScope = %q, want private", msg.Result.CacheScope)
		}
	}
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	t.Run("MCP session over HTTP", func(t *testing.T) {
		_, msgs := openHTTPSession(t, srv.URL, "").post(list)
		if len(msgs) != 1 {
			t.Fatalf("answers %q", msgs)
		}
		scope(t, msgs[0])
	})
	t.Run("MCP sessionless", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
		scope(t, string(mcpPostSession(t, srv.URL, "2026-07-28", "", body, map[string]string{"Mcp-Method": "tools/list"})))
	})
	t.Run("MCP over stdio", func(t *testing.T) {
		h := &hostTools{}
		reg := build(t, carmy.New().Tool(h.defs()...))
		p := newStdioPeer(t, reg)
		p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		p.until(1.0)
		p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		p.send(list)
		msgs := p.until(7.0)
		scope(t, msgs[len(msgs)-1])
	})
}
