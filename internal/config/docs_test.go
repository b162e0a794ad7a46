package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every key carmy.toml accepts has its row in docs/hosting.md's table.
func TestHostingDocsListEveryKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "hosting.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range knownKeys {
		row := "| `" + k + "` |"
		switch k {
		case "tokens", "mount":
			row = "| `[[" + k + "]]` |"
		case "oauth", "effect_permissions", "rate_limits":
			row = "| `[" + k + "]` |"
		}
		if !strings.Contains(string(doc), "\n"+row) {
			t.Errorf("docs/hosting.md's carmy.toml table has no row %s", row)
		}
	}
}
