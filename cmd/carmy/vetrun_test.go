package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSplitPosn(t *testing.T) {
	for _, tt := range []struct {
		posn      string
		file      string
		line, col int
	}{
		{"/src/shop/tools.go:14:16", "/src/shop/tools.go", 14, 16},
		{"/src/shop/tools.go:14", "/src/shop/tools.go", 14, 0},
		{"/src/shop/tools.go", "/src/shop/tools.go", 0, 0},
		{`C:\src\shop\tools.go:3:1`, `C:\src\shop\tools.go`, 3, 1},
		{"/src/a:b/tools.go:3:1", "/src/a:b/tools.go", 3, 1},
		{"-", "-", 0, 0},
	} {
		t.Run(tt.posn, func(t *testing.T) {
			file, line, col := splitPosn(tt.posn)
			if file != tt.file || line != tt.line || col != tt.col {
				t.Errorf("splitPosn(%q) = %q, %d, %d; want %q, %d, %d", tt.posn, file, line, col, tt.file, tt.line, tt.col)
			}
		})
	}
}

// TestVetTree: go vet's JSON, one object per package, read and printed as
// the standard drivers print it.
func TestVetTree(t *testing.T) {
	const out = `{
	"example.com/m/b [example.com/m/b.test]": {
		"carmy": [
			{"category": "tool", "posn": "/m/b/b_test.go:9:2", "end": "/m/b/b_test.go:9:9", "message": "carmy: in a test"},
			{"category": "rule", "posn": "/m/b/b.go:10:2", "end": "/m/b/b.go:10:5", "message": "carmy: b10"}
		]
	}
}
{
	"example.com/m/a": {
		"carmy": [
			{"category": "rule", "posn": "/m/a/a.go:12:2", "end": "/m/a/a.go:12:5", "message": "carmy: a12"},
			{"category": "rule", "posn": "/m/a/a.go:2:2", "end": "/m/a/a.go:2:5", "message": "carmy: a2"},
			{"category": "rule", "posn": "/m/a/a.go:2:2", "end": "/m/a/a.go:2:5", "message": "carmy: a2"}
		]
	}
}
`
	tests := []struct {
		name  string
		out   string
		drop  bool
		lines []string
		code  int
	}{
		{"sorted and once each", out, false, []string{
			"/m/a/a.go:2:2: carmy: a2", "/m/a/a.go:12:2: carmy: a12", "/m/b/b.go:10:2: carmy: b10", "/m/b/b_test.go:9:2: carmy: in a test"}, 3},
		{"without test files", out, true, []string{
			"/m/a/a.go:2:2: carmy: a2", "/m/a/a.go:12:2: carmy: a12", "/m/b/b.go:10:2: carmy: b10"}, 3},
		{"nothing", "", false, nil, 0},
		{"an analysis that failed", `{"example.com/m/a": {"carmy": {"error": "boom"}}}`, false, []string{"carmy: boom"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := readVetTree(strings.NewReader(tt.out))
			if err != nil {
				t.Fatal(err)
			}
			if tt.drop {
				tree.dropTestFiles()
			}
			var w bytes.Buffer
			code := tree.print(&w, -1)
			want := strings.Join(tt.lines, "\n")
			if want != "" {
				want += "\n"
			}
			if code != tt.code || w.String() != want {
				t.Errorf("exit %d, printed:\n%s\nwant exit %d and:\n%s", code, w.String(), tt.code, want)
			}
		})
	}
	if _, err := readVetTree(strings.NewReader(`{"a": `)); err == nil {
		t.Error("readVetTree read a truncated object")
	}
}
