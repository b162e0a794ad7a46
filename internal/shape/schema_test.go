package shape

import (
	"encoding/json"
	"slices"
	"testing"
)

type schemaNode struct {
	Name     string        `json:"name"`
	Children []*schemaNode `json:"children,omitempty"`
}

type schemaInput struct {
	Plain    string     `json:"plain"`
	Optional string     `json:"optional,omitempty"`
	Pointer  *int       `json:"pointer"`
	Small    uint8      `json:"small"`
	Signed   int16      `json:"signed"`
	Kind     string     `json:"kind" validate:"oneof=a b"`
	Tree     schemaNode `json:"tree"`
	Nested   struct {
		X int `json:"x"`
	} `json:"nested"`
}

// TestSchema: one rule for required and null, the ranges of sized
// integers, closed objects and $defs only where a type recurses.
func TestSchema(t *testing.T) {
	s := schemaOf[schemaInput](t)
	if s["type"] != "object" || s["additionalProperties"] != false {
		t.Fatalf("root = %v; want an inline, closed object", s)
	}
	var required []string
	for _, r := range s["required"].([]any) {
		required = append(required, r.(string))
	}
	slices.Sort(required)
	if want := []string{"kind", "nested", "plain", "signed", "small", "tree"}; !slices.Equal(required, want) {
		t.Errorf("required = %v, want %v: every field but pointers and omitempty ones", required, want)
	}
	if typ, _ := json.Marshal(prop(s, "pointer")["type"]); string(typ) != `["integer","null"]` {
		t.Errorf("pointer type = %s; want nullable", typ)
	}
	if typ := prop(s, "optional")["type"]; typ != "string" {
		t.Errorf("optional type = %v; want string, not nullable: only pointers take null", typ)
	}
	for _, c := range []struct {
		field    string
		min, max float64
	}{{"small", 0, 255}, {"signed", -32768, 32767}} {
		p := prop(s, c.field)
		if p["minimum"] != c.min || p["maximum"] != c.max {
			t.Errorf("%s = %v; want %v..%v", c.field, p, c.min, c.max)
		}
	}
	if enum, _ := json.Marshal(prop(s, "kind")["enum"]); string(enum) != `["a","b"]` {
		t.Errorf("kind enum = %s", enum)
	}
	if prop(s, "nested")["additionalProperties"] != false {
		t.Errorf("nested = %v; want a closed object", prop(s, "nested"))
	}
	defs, _ := s["$defs"].(map[string]any)
	if len(defs) != 1 || defs["schemaNode"] == nil {
		t.Errorf("$defs = %v; want the recursive type alone", defs)
	}
}
