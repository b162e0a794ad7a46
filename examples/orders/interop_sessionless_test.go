package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The clients that speak the sessionless protocol, relative to this
// package's directory.
var (
	client2Dir   = filepath.Join("..", "..", "interop", "client2")
	inspectorDir = filepath.Join("..", "..", "interop", "inspector")
	// node22 is where .ci/run installs Node 22, which the Inspector needs.
	node22 = filepath.Join("..", "..", ".ci", "node22", "node_modules", "node", "bin", "node")
)

const sessionless = "2026-07-28"

// versionLog serves the example in-process and records the
// MCP-Protocol-Version header of every request, which tells what the
// client settled on whatever it reports itself.
type versionLog struct {
	mu       sync.Mutex
	versions []string
}

func (v *versionLog) seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(v.versions)))
}

// serveOrders serves a fresh order service on a loopback port for the
// test's duration and returns its /mcp URL and the log of versions.
func serveOrders(t *testing.T) (string, *versionLog) {
	t.Helper()
	reg, err := newBuilder(NewStore()).Build()
	if err != nil {
		t.Fatal(err)
	}
	log := &versionLog{}
	h := reg.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("MCP-Protocol-Version"); v != "" {
			log.mu.Lock()
			log.versions = append(log.versions, v)
			log.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		if err := reg.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv.URL + "/mcp", log
}

// TestTypeScriptClientV2 drives the example with @modelcontextprotocol/client
// (v2 of the official TypeScript SDK), through interop/client2/client.mjs:
// negotiating (server/discover, then 2026-07-28), pinned to 2026-07-28,
// and in the SDK's default legacy mode (a session-based version), over
// streamable HTTP and stdio. See docs/interop.md.
func TestTypeScriptClientV2(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not on PATH; @modelcontextprotocol/client needs Node.js 20 or later (then run: npm ci --prefix interop/client2)")
	}
	if _, err := os.Stat(filepath.Join(client2Dir, "node_modules", "@modelcontextprotocol", "client", "package.json")); err != nil {
		t.Skip("skipping: interop/client2/node_modules does not hold @modelcontextprotocol/client (run: npm ci --prefix interop/client2)")
	}
	for _, mode := range []string{"auto", "pin", "legacy"} {
		t.Run(mode+"/streamable-http", func(t *testing.T) {
			url, log := serveOrders(t)
			t.Log(runNode(t, node, client2Dir, "client.mjs", mode, "http", url))
			seen := log.seen()
			if sessionlessSeen := slices.Contains(seen, sessionless); sessionlessSeen != (mode != "legacy") {
				t.Errorf("%s: MCP-Protocol-Version headers %v", mode, seen)
			}
		})
	}
	t.Run("auto/stdio", func(t *testing.T) {
		bin := buildOrders(t)
		t.Log(runNode(t, node, client2Dir, "client.mjs", "auto", "stdio", bin, "-stdio"))
	})
}

// TestInspectorCLI drives the example with the MCP Inspector's CLI
// (@modelcontextprotocol/inspector, run as inspector --cli): tools/list and
// a call, in the protocol era it calls modern (the sessionless
// 2026-07-28) and in its default, legacy, one. The Inspector needs Node
// 22.19 or later: the node22 that .ci/run installs, else node on PATH when
// it is recent enough.
func TestInspectorCLI(t *testing.T) {
	node := findNode22(t)
	launcher := filepath.Join("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(filepath.Join(inspectorDir, launcher)); err != nil {
		t.Skip("skipping: interop/inspector/node_modules does not hold the Inspector (run: npm ci --prefix interop/inspector)")
	}
	// inspect runs the CLI and returns its result; a tool's error result
	// is exit status 5 (tool_is_error), with the result still on standard
	// output.
	inspect := func(t *testing.T, target []string, wantExit int, args ...string) map[string]any {
		t.Helper()
		cmdArgs := append(append([]string{launcher, "--cli"}, target...), append(args, "--format", "json", "--quiet")...)
		stdout, stderr, code := nodeOutput(t, node, inspectorDir, cmdArgs...)
		var res struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); code != wantExit || err != nil || res.Result == nil {
			t.Fatalf("inspector %s: exit status %d (want %d), result %v:\n%s%s", strings.Join(args, " "), code, wantExit, err, stderr, stdout)
		}
		return res.Result
	}
	check := func(t *testing.T, target []string, era string) {
		tools := inspect(t, target, 0, "--protocol-era", era, "--method", "tools/list")["tools"]
		var names []string
		list, _ := tools.([]any)
		for _, tool := range list {
			m, _ := tool.(map[string]any)
			name, _ := m["name"].(string)
			names = append(names, name)
			a, _ := m["annotations"].(map[string]any)
			meta, _ := m["_meta"].(map[string]any)
			if a["idempotentHint"] != meta["carmy/idempotent"] || a["readOnlyHint"] == nil || a["destructiveHint"] == nil || a["openWorldHint"] == nil {
				t.Errorf("%s: annotations %v, _meta %v", name, a, meta)
			}
		}
		slices.Sort(names)
		if want := []string{"cancel_order", "create_order", "export_orders", "get_order", "list_orders", "whoami"}; !slices.Equal(names, want) {
			t.Errorf("tools/list: %v, want %v", names, want)
		}
		res := inspect(t, target, 0, "--protocol-era", era, "--method", "tools/call", "--tool-name", "create_order",
			"--tool-args-json", `{"sku":"A-100","quantity":2}`)
		order, _ := res["structuredContent"].(map[string]any)
		if res["isError"] == true || order["sku"] != "A-100" || order["status"] != "placed" {
			t.Errorf("tools/call create_order: %v", res)
		}
		res = inspect(t, target, 5, "--protocol-era", era, "--method", "tools/call", "--tool-name", "create_order",
			"--tool-args-json", `{"sku":"","quantity":0}`)
		meta, _ := res["_meta"].(map[string]any)
		e, _ := meta["carmy/error"].(map[string]any)
		if res["isError"] != true || e["code"] != "invalid_input" {
			t.Errorf("tools/call create_order with invalid input: %v", res)
		}
	}
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era+"/streamable-http", func(t *testing.T) {
			url, log := serveOrders(t)
			check(t, []string{url}, era)
			if seen := log.seen(); slices.Contains(seen, sessionless) != (era == "modern") {
				t.Errorf("%s: MCP-Protocol-Version headers %v", era, seen)
			}
		})
	}
	t.Run("modern/stdio", func(t *testing.T) {
		check(t, []string{buildOrders(t), "-stdio"}, "modern")
	})
}

// findNode22 returns a Node.js of version 22.19 or later, or skips.
func findNode22(t *testing.T) string {
	t.Helper()
	candidates := []string{node22}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		out, err := exec.Command(c, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.Split(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
		if len(v) < 2 {
			continue
		}
		major, _ := strconv.Atoi(v[0])
		minor, _ := strconv.Atoi(v[1])
		if major > 22 || major == 22 && minor >= 19 {
			abs, err := filepath.Abs(c)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Skip("skipping: the MCP Inspector needs Node.js 22.19 or later (npm install --prefix .ci/node22 --no-save node@22, as .ci/run does)")
	return ""
}
