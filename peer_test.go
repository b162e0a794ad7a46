package carmy_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRuntimeReachesDoorsThroughPeer keeps the doors' wire code out of the
// root: no root file imports the MCP wire package, and the runtime's files
// (the pipeline, the tool's Context, approvals) reach an MCP client only
// through the little the root declares of a peer, never the door's own
// types.
func TestRuntimeReachesDoorsThroughPeer(t *testing.T) {
	const (
		wire = "github.com/carmy-dev/carmy/internal/mcpwire"
		door = "github.com/carmy-dev/carmy/internal/mcpserve"
	)
	runtime := map[string]bool{"pipeline.go": true, "execute.go": true, "call.go": true, "input.go": true, "confirm.go": true, "outcome.go": true, "idempotency.go": true, "middleware.go": true, "context.go": true, "approval.go": true, "peer.go": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == wire:
				t.Errorf("%s imports %s: the MCP wire code is the door's, in internal/mcpserve", name, wire)
			case path == door && runtime[name]:
				t.Errorf("%s imports %s: the runtime reaches an MCP client through the peer interfaces of peer.go", name, door)
			}
		}
		if runtime[name] {
			seen++
		}
	}
	if seen != len(runtime) {
		t.Fatalf("found %d of the %d runtime files; update the list when a file is renamed", seen, len(runtime))
	}
}
