package carmy

import (
	"testing"

	"github.com/carmy-dev/carmy/internal/console"
)

// ConsoleHeader is the header in which the console's page sends the
// console secret.
const ConsoleHeader = console.Header

// PromptInput is the text the MCP confirmation prompt shows for an input
// of tool.
func PromptInput(t testing.TB, r *Registry, tool, input string) string {
	t.Helper()
	form, err := r.tab().tools[tool].canonicalInput([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	s, err := promptInput(form)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
