package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// A nested skill is a skill of its own and its files are its enclosing
// skill's too; every file has its URI (escaped where a URI must be), its
// type, and the digest of its bytes.
func TestLoad(t *testing.T) {
	folder := fstest.MapFS{
		"outer/SKILL.md":             {Data: []byte("---\nname: outer\ndescription: Outer\n---\n")},
		"outer/inner/SKILL.md":       {Data: []byte("---\nname: inner\ndescription: Inner\n---\n")},
		"outer/notes/a file.txt":     {Data: []byte("hello")},
		"outer/inner/scripts/run.py": {Data: []byte("print(1)\n")},
		"outer/logo.bin":             {Data: []byte{0xff, 0x00}},
	}
	got, errs := Load(folder)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(got) != 2 || got[0].Path != "outer" || got[1].Path != "outer/inner" {
		t.Fatalf("skills %v", got)
	}
	var uris []string
	for _, f := range got[0].Files {
		uris = append(uris, f.URI)
	}
	want := "[skill://outer/SKILL.md skill://outer/inner/SKILL.md skill://outer/inner/scripts/run.py skill://outer/logo.bin skill://outer/notes/a%20file.txt]"
	if fmt.Sprint(uris) != want {
		t.Errorf("outer's files %v, want %s", uris, want)
	}
	if len(got[1].Files) != 2 || got[1].URI() != "skill://outer/inner/SKILL.md" {
		t.Errorf("inner's files %v", got[1].Files)
	}
	byPath := map[string]*File{}
	for _, f := range got[0].Files {
		byPath[f.Path] = f
	}
	if f := byPath["notes/a file.txt"]; f.Digest != "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || !f.Text() || !strings.HasPrefix(f.MIME, "text/plain") {
		t.Errorf("a file.txt: %s %s", f.Digest, f.MIME)
	}
	if f := byPath["logo.bin"]; f.Text() || f.MIME != "application/octet-stream" {
		t.Errorf("logo.bin: text %v, %s", f.Text(), f.MIME)
	}
	if byPath[Manifest].MIME != "text/markdown" {
		t.Errorf("SKILL.md is %s", byPath[Manifest].MIME)
	}
}

// The front matter is the YAML as other languages' parsers read it, every
// field in order: a date stays a string, a number a number.
func TestFrontmatter(t *testing.T) {
	tests := []struct{ md, want string }{
		{"---\nname: a\ndescription: d\n---\n", `{"name":"a","description":"d"}`},
		{"\uFEFF---\r\nname: a\r\ndescription: d\r\n---  \r\nbody", `{"name":"a","description":"d"}`},
		{"---\nname: a\ndescription: >\n  two\n  lines\nlicense: MIT\nmetadata:\n  version: 2.1\n  date: 2026-01-02\n  tags: [x, y]\n  draft: false\n  owner: null\n---\n",
			`{"name":"a","description":"two lines\n","license":"MIT","metadata":{"version":2.1,"date":"2026-01-02","tags":["x","y"],"draft":false,"owner":null}}`},
		{"---\nname: a\ndescription: d\n--- not the end\n---\n", ""}, // a mapping cannot hold that line
	}
	for _, tt := range tests {
		got, _, _, err := frontmatter([]byte(tt.md))
		if tt.want == "" {
			if err == nil {
				t.Errorf("%q: %s, want an error", tt.md, got)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%q: %s, %v; want %s", tt.md, got, err, tt.want)
		}
	}
}

// The generated skill's SKILL.md carries the front matter its entry
// says, as the extension requires of every skill.
func TestGeneratedFrontmatter(t *testing.T) {
	s := Generate(Rules{RequestIDMeta: "carmy/request_id", Tools: []Tool{{Name: "pay", Effect: "write", Confirmation: "required", Rate: "once per hour", Tasks: "required"}}})
	front, name, desc, err := frontmatter(s.Files[0].Data)
	if err != nil || name != "tool-rules" || desc != s.Description {
		t.Fatal(err, name, desc)
	}
	var a, b any
	_ = json.Unmarshal(front, &a)
	_ = json.Unmarshal(s.Frontmatter, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("SKILL.md says %s, the entry %s", front, s.Frontmatter)
	}
	if s.URI() != "skill://carmy/tool-rules/SKILL.md" {
		t.Errorf("URI %s", s.URI())
	}
	for _, want := range []string{"`pay` needs a person's approval", "`pay`: once per hour", "run only as tasks: `pay`", "`carmy/request_id`"} {
		if !strings.Contains(string(s.Files[0].Data), want) {
			t.Errorf("the rules lack %q", want)
		}
	}
}

// A skill past the extension's limit of files is refused, naming its
// SKILL.md.
func TestLoadTooManyFiles(t *testing.T) {
	folder := fstest.MapFS{"a/SKILL.md": {Data: []byte("---\nname: a\ndescription: d\n---\n")}}
	for i := range MaxFiles {
		folder[fmt.Sprintf("a/f%03d", i)] = &fstest.MapFile{}
	}
	_, errs := Load(folder)
	var e *Error
	if len(errs) != 1 || !errors.As(errs[0], &e) || e.File != "a/SKILL.md" || !strings.Contains(e.Error(), "513 files") {
		t.Errorf("%v", errs)
	}
}
