package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/toolsrc"

	"github.com/carmy-dev/carmy/internal/modtest"
)

// TestGenEndToEnd runs carmy gen on a fixture module, builds the program,
// moves the binary away from the source and checks that the schemas it
// prints carry the doc comments.
func TestGenEndToEnd(t *testing.T) {
	t.Parallel()
	dir := copyModule(t, "genapp")

	code, stdout, stderr := output(t, carmyCmd(t, dir, "gen", "-v", "./..."))
	if code != 0 {
		t.Fatalf("carmy gen: exit %d\n%s%s", code, stdout, stderr)
	}
	genPath := filepath.Join(dir, toolsrc.GenFile)
	first, err := os.ReadFile(genPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(first, []byte(toolsrc.GenHeader+"\n")) {
		t.Errorf("carmy_gen.go does not start with the header:\n%s", first)
	}
	if _, err := os.Stat(filepath.Join(dir, "model", toolsrc.GenFile)); err == nil {
		t.Error("carmy gen wrote a file for package model, which declares no tools")
	}

	// Deterministic: running again (in process this time) writes the same
	// bytes, and a changed file is rewritten to them.
	if err := os.WriteFile(genPath, append([]byte(toolsrc.GenHeader+"\n\npackage main\n"), "// edited\n"...), 0o666); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := generate(dir, []string{"./..."}, t.Logf); err != nil {
			t.Fatal(err)
		}
		again, err := os.ReadFile(genPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("carmy gen is not deterministic; first:\n%s\nthen:\n%s", first, again)
		}
	}

	// Build, move the binary away from the source, delete the source.
	bin := filepath.Join(t.TempDir(), "genapp.bin")
	modtest.Go(t, dir, "build", "-o", bin, ".")
	elsewhere := filepath.Join(t.TempDir(), "genapp")
	if err := os.Rename(bin, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(elsewhere)
	cmd.Dir = filepath.Dir(elsewhere)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running the fixture: %v", err)
	}
	var tools []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		OutputSchema json.RawMessage `json:"output_schema"`
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatalf("the fixture's output: %v\n%s", err, out)
	}
	byName := map[string]int{}
	for i, tool := range tools {
		byName[tool.Name] = i
	}

	for _, c := range []struct {
		tool, where, path, want string
	}{
		// A function's doc comment is the tool's description.
		{"create_order", "", "", "Place an order for a product."},
		{"list_items", "", "", "List the items, a page at a time."},             // a generic function
		{"cancel_order", "", "", "Cancel an order that has not shipped yet."},   // a method value
		{"ping", "", "", "Tell whether the service is up."},                     // a method expression
		{"described_one", "", "", "The option wins"},                            // Description wins
		{"create_order", "in", "", "CreateOrder is the input of create_order."}, // a type
		{"create_order", "in", "sku", "Product SKU, as printed on the box."},    // above a field
		{"create_order", "in", "quantity", "How many to order."},                // at the end of its line
		{"create_order", "in", "note", "Free text for the courier"},             // the tag wins
		{"create_order", "in", "ship", "Where to deliver."},
		{"create_order", "in", "ship.street", "Street and number."}, // another package of the module
		{"create_order", "in", "ship.city", "City, in the local spelling."},
		{"create_order", "in", "ship.country", "Country code, ISO 3166-1 alpha-2."}, // directive dropped
		{"create_order", "in", "due", "When the order is due; a time.Time, whose own doc comment stays out."},
		{"create_order", "in", "lines[]", "Line is one line of an order."}, // a grouped type ( … )
		{"create_order", "in", "lines[].item", "Item number."},
		{"create_order", "in", "lines[].status", "Status of the line."},
		{"create_order", "out", "", "Order is the output of create_order."},
		{"create_order", "out", "order_id", "OrderID identifies the order."},
		{"list_items", "out", "", "Page is one page of a listing; generic types are keyed by their declared name."},
		{"list_items", "out", "items", "Items on this page."},
		{"list_items", "out", "items[]", "Item is one thing listed."},
		{"list_items", "out", "items[].name", "Name of the item."},
		{"list_items", "in", "cursor", "Cursor from the previous page's next."},
		{"sum", "in", "", "SumIn is the input of sum, a hand-written tool."}, // carmy.Impl
		{"sum", "in", "terms", "Terms to add up."},
		{"sum", "out", "total", "Total of the terms."},
	} {
		i, ok := byName[c.tool]
		if !ok {
			t.Errorf("no tool %s in %s", c.tool, out)
			continue
		}
		var got string
		switch c.where {
		case "":
			got = tools[i].Description
		case "in":
			got = descriptionAt(t, tools[i].InputSchema, c.path)
		case "out":
			got = descriptionAt(t, tools[i].OutputSchema, c.path)
		}
		if got != c.want {
			t.Errorf("%s %s %q: description %q, want %q", c.tool, c.where, c.path, got, c.want)
		}
	}
	// A type given to carmy.SchemaFor.
	extra := exec.Command(elsewhere, "extra")
	if out, err := extra.Output(); err != nil || descriptionAt(t, out, "remark") != "Remark about the extra." {
		t.Errorf("carmy.SchemaFor[Extra]: %v\n%s", err, out)
	}

	if strings.Contains(string(out), "This comment loses") || strings.Contains(string(out), "loses to the Description") {
		t.Errorf("a comment won over a tag or an option:\n%s", out)
	}
	if strings.Contains(string(first), "Unreached") || strings.Contains(string(first), "time.Time\":") || strings.Contains(string(first), "secret") {
		t.Errorf("the generated file has comments no tool reaches:\n%s", first)
	}
}

// descriptionAt returns the description of the schema at a path of
// property names, "[]" stepping into array items.
func descriptionAt(t *testing.T, schema json.RawMessage, path string) string {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	if path != "" {
		for _, step := range strings.Split(path, ".") {
			name, items := strings.CutSuffix(step, "[]")
			props, _ := s["properties"].(map[string]any)
			s, _ = props[name].(map[string]any)
			if items && s != nil {
				s, _ = s["items"].(map[string]any)
			}
			if s == nil {
				t.Errorf("no %q in %s", path, schema)
				return ""
			}
		}
	}
	d, _ := s["description"].(string)
	return d
}

// TestGenPackageWithoutComments checks that a package with nothing to
// register gets no file, and loses one that is stale.
func TestGenPackageWithoutComments(t *testing.T) {
	t.Parallel()
	dir := copyModule(t, "genapp")
	model := filepath.Join(dir, "model")
	stale := []byte(toolsrc.GenHeader + "\n\npackage model\n")
	if err := os.WriteFile(filepath.Join(model, toolsrc.GenFile), stale, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := generate(dir, []string{"./model"}, t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(model, toolsrc.GenFile)); err == nil {
		t.Error("the stale carmy_gen.go of a package without tools is still there")
	}

	// A carmy_gen.go that carmy gen did not write is never overwritten.
	mine := []byte("package main\n\n// Mine.\nvar Mine = 1\n")
	if err := os.WriteFile(filepath.Join(dir, toolsrc.GenFile), mine, 0o666); err != nil {
		t.Fatal(err)
	}
	err := generate(dir, []string{"."}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "not written by carmy gen") {
		t.Errorf("generate over a hand-written carmy_gen.go: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, toolsrc.GenFile)); !bytes.Equal(b, mine) {
		t.Error("the hand-written carmy_gen.go was changed")
	}
}

// TestGenErrors checks that gen refuses packages that do not compile.
func TestGenErrors(t *testing.T) {
	t.Parallel()
	dir := copyModule(t, "genapp")
	if err := os.WriteFile(filepath.Join(dir, "broken.go"), []byte("package main\n\nvar x int = \"no\"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := output(t, carmyCmd(t, dir, "gen"))
	if code != 1 || !strings.Contains(stderr, "do not compile") || !strings.Contains(stderr, "broken.go") {
		t.Errorf("carmy gen on a broken package: exit %d\n%s", code, stderr)
	}
}

// TestPackageDocs checks where comments are read from, without the go
// command.
func TestPackageDocs(t *testing.T) {
	const src = `package p

// A is a type.
type A struct {
	// X is above.
	X int
	Y int // Y is at the end.
	// Z is above, and wins over the end of the line.
	Z int // not this
	// V and W share it.
	V, W string
	B      // embedded, at the end
	*C
	unexported int // kept; the walker leaves it out
}

// The group's comment belongs to nobody.
type (
	// D is in a group.
	D int
	E string // E is at the end of its line.
	F bool
)

// G is generic.
type G[T any, U comparable] struct {
	// Items of G.
	Items []T
}

// H is alone in parentheses.
type (
	H int
)

// NoDoc is here to be missed.

type NoDoc int

// f is a function.
func f() {}

// m is a method on a pointer.
func (*A) m() {}

// n is a method on a generic value.
func (G[T, U]) n() {}

// Spans two lines
// that become one.
//
// A second paragraph, with a [D] link.
//
//	code stays
//	indented
//
//go:noinline
func long() {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := toolsrc.PackageDocs([]*ast.File{f}, fset)
	want := map[string]string{
		"A":            "A is a type.",
		"A.X":          "X is above.",
		"A.Y":          "Y is at the end.",
		"A.Z":          "Z is above, and wins over the end of the line.",
		"A.V":          "V and W share it.",
		"A.W":          "V and W share it.",
		"A.B":          "embedded, at the end",
		"A.unexported": "kept; the walker leaves it out",
		"D":            "D is in a group.",
		"E":            "E is at the end of its line.",
		"G":            "G is generic.",
		"G.Items":      "Items of G.",
		"H":            "H is alone in parentheses.",
		"f":            "f is a function.",
		"(*A).m":       "m is a method on a pointer.",
		"G.n":          "n is a method on a generic value.",
		"long":         "Spans two lines that become one.\n\nA second paragraph, with a D link.\n\n\tcode stays\n\tindented",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected comment %s: %q", k, got[k])
		}
	}

	// Test files are not read.
	tf, err := parser.ParseFile(fset, "p_test.go", "package p\n\n// T is a test type.\ntype T int\n", parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if d := toolsrc.PackageDocs([]*ast.File{tf}, fset); len(d) != 0 {
		t.Errorf("comments read from a test file: %v", d)
	}
}

// TestRender checks the generated file's form: header, sorted keys, quoting,
// and an import name that does not clash with the package's own names.
func TestRender(t *testing.T) {
	comments := map[string]string{
		"example.com/p.B":     "Second.",
		"example.com/p.A":     "First, with \"quotes\"\nand a newline.",
		"example.com/p.A.Fld": "A field.",
	}
	var outs [][]byte
	for range 5 {
		b, err := toolsrc.Render("p", "carmy", comments)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	for _, b := range outs[1:] {
		if !bytes.Equal(b, outs[0]) {
			t.Fatal("render is not deterministic")
		}
	}
	want := toolsrc.GenHeader + `

package p

import "github.com/carmy-dev/carmy"

func init() {
	carmy.RegisterComments(map[string]string{
		"example.com/p.A":     "First, with \"quotes\"\nand a newline.",
		"example.com/p.A.Fld": "A field.",
		"example.com/p.B":     "Second.",
	})
}
`
	if string(outs[0]) != want {
		t.Errorf("render:\n%s\nwant:\n%s", outs[0], want)
	}
	f, err := parser.ParseFile(token.NewFileSet(), toolsrc.GenFile, outs[0], parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if !toolsrc.IsGenerated(f) {
		t.Error("isGenerated does not recognise the rendered file")
	}
	if m, ok := toolsrc.RegisteredComments(f); !ok || len(m) != 3 || m["example.com/p.A"] != comments["example.com/p.A"] {
		t.Errorf("registeredComments = %v, %v", m, ok)
	}

	b, err := toolsrc.Render("p", "_carmy", comments)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("import _carmy \"github.com/carmy-dev/carmy\"")) || !bytes.Contains(b, []byte("_carmy.RegisterComments(")) {
		t.Errorf("render with another import name:\n%s", b)
	}
}
