package console

import (
	"regexp"
	"strings"
	"testing"
)

// The page loads every asset it names from the embedded files, and holds
// no inline script or style, which the console's Content-Security-Policy
// (default-src 'self') would block.
func TestPageLoadsItsAssets(t *testing.T) {
	page, err := Files.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="/console/assets/([^"]+)"`).FindAllStringSubmatch(string(page), -1)
	named := map[string]bool{}
	for _, m := range refs {
		named[m[1]] = true
		if _, err := Files.ReadFile(m[1]); err != nil {
			t.Errorf("the page loads %s, which is not embedded: %v", m[1], err)
		}
	}
	for _, want := range []string{"console.js", "console.css"} {
		if !named[want] {
			t.Errorf("the page does not load %s", want)
		}
	}
	for _, inline := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(page), -1) {
		if !strings.Contains(inline, "src=") {
			t.Errorf("inline script %s: the Content-Security-Policy blocks it", inline)
		}
	}
	if strings.Contains(string(page), "<style") || strings.Contains(string(page), " style=") {
		t.Error("inline style: the Content-Security-Policy blocks it")
	}
}
