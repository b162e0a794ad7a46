package carmy_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPCapabilities: initialize (session-based) and server/discover
// (sessionless) advertise what carmy does, tools without list changes and
// logging, and nothing else.
func TestMCPCapabilities(t *testing.T) {
	t.Parallel()
	srv, _ := hostServer(t, nil)
	tests := []struct {
		name, version, body string
		// tasks: the tasks extension is served to the sessionless protocol
		tasks bool
	}{
		{"initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, false},
		{"server/discover", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mcpPost(t, srv.URL, tt.version, tt.body)
			var msg struct {
				Result struct {
					Capabilities map[string]json.RawMessage `json:"capabilities"`
				} `json:"result"`
			}
			if err := json.Unmarshal(res, &msg); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			caps := msg.Result.Capabilities
			want := 3
			if tt.tasks {
				if string(caps["extensions"]) != `{"io.modelcontextprotocol/tasks":{}}` {
					t.Errorf("capabilities %s; want the tasks extension", res)
				}
			} else if string(caps["tasks"]) != `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}` {
				t.Errorf("capabilities %s; want a session's experimental tasks", res)
			}
			if len(caps) != want || string(caps["tools"]) != "{}" || string(caps["logging"]) != "{}" {
				t.Errorf("capabilities %s; want tools (no listChanged) and logging, and the tasks extension sessionless only, a session's tasks in sessions only", res)
			}
		})
	}
}

// TestMCPUnknownTool: a call of a tool that does not exist names the
// closest one, as over HTTP, in both generations.
func TestMCPUnknownTool(t *testing.T) {
	t.Parallel()
	srv, _ := hostServer(t, nil)
	for _, version := range []string{"2025-06-18", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoam","arguments":{}}}`
			session := ""
			if version == "2026-07-28" {
				body = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoam","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			} else {
				session = openSession(t, srv)
				mcpPostSession(t, srv.URL, "2025-06-18", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
			}
			res := mcpPostSession(t, srv.URL, version, session, body, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "whoam"})
			if !strings.Contains(string(res), `did you mean \"whoami\"?`) || !strings.Contains(string(res), `"unknown_tool"`) {
				t.Errorf("answer %s; want the suggestion and carmy's code", res)
			}
		})
	}
}

func mcpPost(t *testing.T, url, version, body string) []byte {
	t.Helper()
	headers := map[string]string{}
	if version != "" {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		headers["Mcp-Method"] = m.Method
	}
	return mcpPostSession(t, url, version, "", body, headers)
}

// mcpPostSession posts one message and returns the JSON-RPC message of the
// answer, read from an event stream if the server chose one.
func mcpPostSession(t *testing.T, url, version, session, body string, headers map[string]string) []byte {
	t.Helper()
	_, msg := mcpExchange(t, url, body, map[string]string{"Mcp-Protocol-Version": version, "Mcp-Session-Id": session}, headers)
	return msg
}
