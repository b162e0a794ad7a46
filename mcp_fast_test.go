package carmy_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestMCPFastPath: carmy answers a sessionless tools/call that nothing
// streams from itself, with the result the SDK's path gives the same call
// (a progress token sends it there): success, a tool error, an unknown
// field, content blocks and a question for the user alike.
func TestMCPFastPath(t *testing.T) {
	t.Parallel()
	f := &featureTools{}
	reg := build(t, carmy.New().Tool(f.defs()...).Tool((&hostTools{}).defs()...))
	srv := serve(t, reg)
	post := func(tool, args, meta string) (string, map[string]any) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":"q-1","method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
			`,"_meta":{` + meta + `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
		resp, b := mcpExchange(t, srv.URL, body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool})
		kind := resp.Header.Get("Content-Type")
		var msg map[string]any
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("%s: %s", err, b)
		}
		if res, ok := msg["result"].(map[string]any); ok {
			if m, ok := res["_meta"].(map[string]any); ok {
				delete(m, "carmy/execution_id")
				delete(m, "progressToken")
			}
		}
		return kind, msg
	}
	for _, tc := range []struct{ name, tool, args string }{
		{"output", "report", `{}`},
		{"tool error", "broken", `{}`},
		{"invalid input", "save_note", `{"text":"hello","extra":1}`},
		{"content", "picture", `{}`},
		{"question", "greet", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fastKind, fast := post(tc.tool, tc.args, "")
			sdkKind, sdk := post(tc.tool, tc.args, `"progressToken":"p",`)
			if !strings.HasPrefix(fastKind, "application/json") || !strings.HasPrefix(sdkKind, "text/event-stream") {
				t.Fatalf("answered as %q and %q; want carmy's JSON and the SDK's event stream", fastKind, sdkKind)
			}
			// Execution ids differ from call to call, and a request state
			// carries its expiry, to the second.
			fb, _ := json.Marshal(fast)
			sb, _ := json.Marshal(sdk)
			fb, sb = unstamped(fb), unstamped(sb)
			if string(fb) != string(sb) {
				t.Errorf("carmy's answer\n%s\nthe SDK's\n%s", fb, sb)
			}
		})
	}
}

var (
	executionID  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}`)
	requestState = regexp.MustCompile(`"requestState":"carmy/round:[^"]+"`)
)

// unstamped is an answer without what differs from call to call: the
// execution id, and the request state, which carries its expiry to the
// second.
func unstamped(b []byte) []byte {
	return requestState.ReplaceAll(executionID.ReplaceAll(b, []byte("ID")), []byte(`"requestState":"S"`))
}
