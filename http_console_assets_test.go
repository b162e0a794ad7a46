package carmy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/console"
)

// The console describes a time.Duration field in words by recognizing its
// schema's pattern: the pattern in console.js must be the one carmy
// publishes, or the page falls back to showing the regular expression.
func TestConsoleKnowsDurationPattern(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties struct {
			D struct {
				Pattern string `json:"pattern"`
			} `json:"d"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(carmy.SchemaFor[struct {
		D time.Duration `json:"d"`
	}](), &schema); err != nil {
		t.Fatal(err)
	}
	pattern := schema.Properties.D.Pattern
	if pattern == "" {
		t.Fatal("a time.Duration field's schema has no pattern")
	}
	literal, err := json.Marshal(pattern) // a JSON string is a JavaScript string literal
	if err != nil {
		t.Fatal(err)
	}
	js, err := console.Files.ReadFile("console.js")
	if err != nil {
		t.Fatal(err)
	}
	if want := "const DURATION_PATTERN = " + string(literal) + ";"; !strings.Contains(string(js), want) {
		t.Errorf("console.js lacks\n%s\n(the pattern of a time.Duration field's schema)", want)
	}
}
