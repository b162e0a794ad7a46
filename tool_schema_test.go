package carmy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden schemas in testdata/schemas")

const goldenDir = "testdata/schemas"

// TestSchemaGolden keeps the schema of every corpus type as a golden file
// and checks each one: it compiles under an independent JSON Schema
// validator, every $ref resolves, every $defs entry is used, and the root
// is inline.
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, c := range corpus.Types {
		t.Run(c.Name, func(t *testing.T) {
			if seen[c.Name] {
				t.Fatalf("two corpus types are named %s", c.Name)
			}
			seen[c.Name] = true
			raw := c.Schema()
			if raw == nil {
				if c.Tool != nil {
					_, err := carmy.New().Tool(c.Tool("t")).Build()
					t.Fatalf("SchemaFor returned nil; Build says: %v", err)
				}
				t.Fatal("SchemaFor returned nil")
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, raw, "", "  "); err != nil {
				t.Fatalf("schema is not JSON: %v\n%s", err, raw)
			}
			buf.WriteByte('\n')
			got := buf.Bytes()
			file := filepath.Join(goldenDir, c.Name+".json")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -run TestSchemaGolden -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("schema differs from %s (run go test -run TestSchemaGolden -update after checking the change)\n%s", file, firstDiff(string(want), string(got)))
				}
			}
			checkSchema(t, c.Name, got, c.Tool != nil)
		})
	}
	// A golden file no corpus type writes is stale.
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if !seen[name] {
			t.Errorf("%s belongs to no corpus type; delete it", f)
		}
	}
}

// checkSchema checks one schema document beyond what the golden file pins.
func checkSchema(t *testing.T, name string, doc []byte, object bool) {
	t.Helper()
	if _, err := compileSchema(name, doc); err != nil {
		t.Errorf("does not compile under santhosh-tekuri/jsonschema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("schema is not an object: %s", doc)
	}
	if _, ok := root["$ref"]; ok {
		t.Errorf("the root is a $ref; it must be inline")
	}
	if object {
		if root["type"] != "object" || root["additionalProperties"] != false {
			t.Errorf("an input's root must be {\"type\":\"object\",\"additionalProperties\":false,...}")
		}
	}
	used := map[string]bool{}
	walkSchema(root, "#", func(s map[string]any, at string) {
		if ref, ok := s["$ref"].(string); ok {
			if _, ok := resolvePointer(root, ref); !ok {
				t.Errorf("%s: $ref %q does not resolve", at, ref)
			}
			used[ref] = true
		}
		if _, ok := s["properties"]; ok && s["additionalProperties"] != false {
			t.Errorf("%s: an object with properties must say additionalProperties: false", at)
		}
		if d, ok := s["$defs"]; ok && at != "#" {
			t.Errorf("%s: $defs below the root: %v", at, d)
		}
	})
	defs, _ := root["$defs"].(map[string]any)
	for _, k := range slices.Sorted(mapsKeys(defs)) {
		if !used["#/$defs/"+escapePointer(k)] {
			t.Errorf("$defs/%s is never referenced", k)
		}
	}
}

// compileSchema compiles a schema document under draft 2020-12.
func compileSchema(name string, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// contentEncoding, like format, is an annotation; the oracle checks it
	// so that []byte fields agree with carmy's base64 decoding.
	c.AssertContent()
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// walkSchema calls fn for every subschema of s.
func walkSchema(s map[string]any, at string, fn func(map[string]any, string)) {
	fn(s, at)
	for _, k := range slices.Sorted(mapsKeys(s)) {
		switch k {
		case "properties", "$defs":
			m, _ := s[k].(map[string]any)
			for _, p := range slices.Sorted(mapsKeys(m)) {
				if sub, ok := m[p].(map[string]any); ok {
					walkSchema(sub, at+"/"+k+"/"+escapePointer(p), fn)
				}
			}
		case "items", "additionalProperties", "not":
			if sub, ok := s[k].(map[string]any); ok {
				walkSchema(sub, at+"/"+k, fn)
			}
		case "anyOf", "oneOf", "allOf", "prefixItems":
			list, _ := s[k].([]any)
			for i, x := range list {
				if sub, ok := x.(map[string]any); ok {
					walkSchema(sub, at+"/"+k+"/"+strconv.Itoa(i), fn)
				}
			}
		}
	}
}

// resolvePointer resolves a reference within the document.
func resolvePointer(root any, ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := root
	if p == "" {
		return cur, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// firstDiff shows where two texts first differ, line by line.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return ""
}
