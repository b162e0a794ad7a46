package carmy_test

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSDKStaysInTheMCPAdapter holds the module's layers to a rule per
// package, so that a new file or package cannot slip past it: the MCP
// SDK's types appear only in the root's MCP adapter (mcp.go, which
// translates and decides nothing, and holds the builder's ConfigureMCP)
// and in the door's own packages; the runtime reaches an MCP client
// through the little peer.go declares of one, questions and answers in
// carmy's own types. The MCP door (internal/mcpserve) is built, held and
// served by the registry's files alone, and its wire code
// (internal/mcpwire) is the door's own. The HTTP door (internal/httpapi)
// is wired by the root's http.go alone, and reaches no other door.
// Programs that use carmy's public API (examples) may use the SDK, as a
// host does. The rule holds for what a package reaches as well as what it
// imports: a package that reaches the SDK (go list's Deps) is the root, a
// door package, or one that uses carmy's public API, never one that
// reaches it around the root (a store that imports the upstream client,
// say).
func TestSDKStaysInTheMCPAdapter(t *testing.T) {
	const (
		module = "github.com/carmy-dev/carmy"
		sdk    = "github.com/modelcontextprotocol/go-sdk"
		door   = module + "/internal/mcpserve"
		wire   = module + "/internal/mcpwire"
		web    = module + "/internal/httpapi"
	)
	// The door's packages, which speak the SDK.
	doorPackages := map[string]bool{door: true, wire: true, module + "/internal/oauthrs": true,
		module + "/internal/mcpclient": true, // the client of mounted upstreams, behind mount.go's carmy types
		web:                            true}
	// The root's files that may import the door: the adapter, and the
	// files that build, hold and serve it.
	rootDoorFiles := map[string]bool{"mcp.go": true, "builder.go": true, "registry.go": true, "serve.go": true}

	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH:", err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .Deps \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 4 {
			t.Fatalf("go list printed %q", sc.Text())
		}
		pkg, dir := fields[0], fields[1]
		packages++
		deps := map[string]bool{}
		for _, d := range strings.Fields(fields[3]) {
			deps[d] = true
		}
		if deps[sdk+"/mcp"] && pkg != module && !doorPackages[pkg] && !deps[module] && !strings.HasPrefix(pkg, module+"/examples/") {
			t.Errorf("%s reaches the SDK around the root: only the root, the door's packages and users of carmy's public API may", pkg)
		}
		for _, name := range strings.Fields(fields[2]) {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				where := pkg + " " + name
				switch {
				case path == sdk || strings.HasPrefix(path, sdk+"/"):
					if !doorPackages[pkg] && !(pkg == module && name == "mcp.go") && !strings.HasPrefix(pkg, module+"/examples/") {
						t.Errorf("%s imports %s: the SDK's types stay in the root's MCP adapter (mcp.go) and the door's packages", where, path)
					}
				case path == wire:
					if pkg != door {
						t.Errorf("%s imports %s: the MCP wire code is the door's own, in internal/mcpserve", where, path)
					}
				case path == web && pkg == module+"/cmd/carmy":
					// The command reads the API's documents through the
					// door's own types (the task object, the error).
				case path == web:
					if pkg != module || name != "http.go" {
						t.Errorf("%s imports %s: the root's http.go alone wires the HTTP door; the runtime reaches it through http.go", where, path)
					}
				case pkg == web && (path == door || path == wire || path == module+"/internal/mcpclient"):
					t.Errorf("%s imports %s: the HTTP door reaches no other door", where, path)
				case path == door:
					if pkg != module || !rootDoorFiles[name] {
						t.Errorf("%s imports %s: the runtime reaches an MCP client through the peer interfaces of peer.go, and the registry's files alone build and serve the door", where, path)
					}
				}
			}
		}
	}
	if packages < 10 {
		t.Fatalf("go list found %d packages of %s; the rule checked too little", packages, module)
	}
}
