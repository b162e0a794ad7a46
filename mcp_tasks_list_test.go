package carmy_test

import (
	"encoding/json"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestMCPTasksToolSupport: tools/list says each tool's task support
// (execution.taskSupport) as its Tasks mode gives it, in both generations.
func TestMCPTasksToolSupport(t *testing.T) {
	t.Parallel()
	reg := taskRegistry(t, carmy.New(),
		carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("never"), carmy.Tasks(carmy.TaskForbidden), carmy.Register(false)),
		carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("either"), carmy.Register(false)),
		carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("only"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
	)
	srv := serve(t, reg)
	want := map[string]string{"never": "forbidden", "either": "optional", "only": "required"}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
			session := ""
			if version == "2026-07-28" {
				body = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			} else {
				session = openSession(t, srv)
				mcpPostSession(t, srv.URL, version, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
			}
			res := mcpPostSession(t, srv.URL, version, session, body, map[string]string{"Mcp-Method": "tools/list"})
			var msg struct {
				Result struct {
					Tools []struct {
						Name        string         `json:"name"`
						InputSchema map[string]any `json:"inputSchema"`
						Execution   *struct {
							TaskSupport string `json:"taskSupport"`
						} `json:"execution"`
					} `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal(res, &msg); err != nil || len(msg.Result.Tools) != len(want) {
				t.Fatalf("tools/list answered %s (%v); want %d tools", res, err, len(want))
			}
			for _, tool := range msg.Result.Tools {
				if tool.Execution == nil || tool.Execution.TaskSupport != want[tool.Name] || tool.InputSchema["type"] != "object" {
					t.Errorf("tool %s in %s; want execution.taskSupport %q beside the SDK's members", tool.Name, res, want[tool.Name])
				}
			}
		})
	}
}
