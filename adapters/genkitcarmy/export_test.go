package genkitcarmy

import (
	"testing"

	"github.com/firebase/genkit/go/ai"
)

// ToolDefinition is the definition of the toolset's tool name, as Genkit
// offers it to a model.
func ToolDefinition(t *testing.T, ts *Toolset, name string) *ai.ToolDefinition {
	t.Helper()
	for _, tl := range ts.tools {
		if tl.Name() == name {
			return tl.Definition()
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}
