package carmy

import (
	"io"
	"testing"
)

// SetConsoleOut makes servers print their console URL to w for a test;
// the returned function restores standard error.
func SetConsoleOut(w io.Writer) (restore func()) {
	old := consoleOut
	consoleOut = w
	return func() { consoleOut = old }
}

// ConsoleHeader is the header in which the console's page sends the
// console secret.
const ConsoleHeader = consoleHeader

// SetConsoleTerminal makes servers take consoleOut for a terminal, or
// not, for a test; the returned function restores the check.
func SetConsoleTerminal(terminal bool) (restore func()) {
	old := isTerminal
	isTerminal = func(io.Writer) bool { return terminal }
	return func() { isTerminal = old }
}

// PromptInput is the text the MCP confirmation prompt shows for an input
// of tool.
func PromptInput(t testing.TB, r *Registry, tool, input string) string {
	t.Helper()
	form, err := r.tools[tool].canonicalInput([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	s, err := promptInput(form)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
