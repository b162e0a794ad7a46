package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/modtest"
)

// TestReadmeQuickStart runs the README's quick start as a new user would:
// its program, in a module of its own, prints what the README says; then,
// after carmy gen, the README's test of package main sees the doc comments
// in the schema.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	modtest.NeedGo(t)
	root := modtest.CheckoutRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, quick, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	quick, _, _ = strings.Cut(quick, "\n## ")
	blocks := regexp.MustCompile("(?s)```(go|text)\n(.*?)```").FindAllStringSubmatch(quick, -1)
	if len(blocks) != 3 || blocks[0][1] != "go" || blocks[1][1] != "text" || blocks[2][1] != "go" {
		t.Fatalf("the Quick start has %d blocks; want the program, what it prints and its test", len(blocks))
	}
	program, prints, test := blocks[0][2], blocks[1][2], blocks[2][2]

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/quickstart\n\ngo 1.26.0\n")
	write("main.go", program)
	modtest.PointAtCheckout(t, dir, root)
	if got := modtest.Go(t, dir, "run", "."); got != prints {
		t.Errorf("the program prints\n%s\nthe README says\n%s", got, prints)
	}

	write("main_test.go", "package main\n\nimport (\n\t\"strings\"\n\t\"testing\"\n\n\t\"github.com/carmy-dev/carmy\"\n)\n\n"+test)
	if err := generate(dir, []string{"."}, t.Logf); err != nil {
		t.Fatal(err)
	}
	modtest.Go(t, dir, "test", "-count=1", ".")
}
