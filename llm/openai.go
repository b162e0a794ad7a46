package llm

import (
	"encoding/json"
	"slices"

	"github.com/carmy-dev/carmy/internal/shape"
)

// openAIKeep are the keywords strict mode takes, in the conservative set
// documented since strict mode launched.
var openAIKeep = map[string]bool{
	"type": true, "description": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "enum": true, "anyOf": true, "$ref": true,
}

func (x *exporter) openAIRoot(schema json.RawMessage) json.RawMessage {
	s, _ := x.root(schema)
	collapseOptional(s)
	if s == nil {
		return nil
	}
	defs := s.del("$defs")
	s = x.openAI(s, "", 0)
	if defs != nil {
		for i, name := range defs.keys {
			x.chars += len(name)
			defs.vals[i] = x.openAI(defs.vals[i], "$defs."+name, 0)
		}
		s.set("$defs", defs)
	}
	if x.props > openAIMaxProperties {
		x.fail("", "the input has %d properties in all; OpenAI strict mode takes at most %d", x.props, openAIMaxProperties)
	}
	if x.depth > openAIMaxDepth {
		x.fail("", "the input nests objects %d levels deep; OpenAI strict mode takes at most %d", x.depth, openAIMaxDepth)
	}
	if x.enumValues > openAIMaxEnumValues {
		x.fail("", "the input's enums have %d values in all; OpenAI strict mode takes at most %d", x.enumValues, openAIMaxEnumValues)
	}
	if x.chars > openAIMaxChars {
		x.fail("", "the input's property names, type names and enum strings are %d characters in all; OpenAI strict mode takes at most %d", x.chars, openAIMaxChars)
	}
	return s.bytes()
}

// openAI rewrites one schema, in place where it can, and returns it. depth
// is the number of objects around it.
func (x *exporter) openAI(s *jnode, path string, depth int) *jnode {
	if s.kind != '{' {
		x.fail(path, "has the schema %s, which OpenAI strict mode cannot express; give it a concrete type", s.bytes())
		return s
	}
	var notes []string
	mapped := isMap(s)
	if mapped {
		x.depth = max(x.depth, depth+1)
		value := x.openAI(s.get("additionalProperties"), path+"[*]", depth+1)
		notes = x.mapNotes(s, path)
		s = entries(s, value, "array", "object", "string")
		x.props += 2
		x.chars += len("key") + len("value")
	}
	unknown := false
	for _, k := range slices.Clone(s.keys) {
		switch {
		case openAIKeep[k]:
		case noteKeywords[k]:
			if n := note(k, s.del(k)); n != "" {
				notes = append(notes, n)
			}
		case dropKeywords[k]:
			s.del(k)
		default:
			x.fail(path, "uses the keyword %q, which OpenAI strict mode does not take", k)
			unknown = true
		}
	}
	addNotes(s, notes)
	if unknown || mapped {
		return s // a map's list of entries is in strict mode's terms already
	}

	if s.get("$ref") != nil {
		if len(s.keys) > 1 { // strict mode takes no keyword beside $ref, but takes them beside anyOf
			ref := jobj("$ref", s.del("$ref"))
			s.set("anyOf", jarr(ref))
		} else {
			return s
		}
	}
	if anyOf := s.get("anyOf"); anyOf != nil {
		for i, b := range anyOf.vals {
			anyOf.vals[i] = x.openAI(b, path, depth)
		}
		return s
	}
	names, isNullable := types(s)
	if len(names) == 0 && !isNullable {
		x.fail(path, "accepts any JSON value, which OpenAI strict mode cannot express; give it a concrete type")
		return s
	}
	if enum := s.get("enum"); enum != nil {
		// An enum that takes null becomes a union of the enum and null.
		hasNull := slices.ContainsFunc(enum.vals, (*jnode).isNull)
		enum.vals = slices.DeleteFunc(enum.vals, (*jnode).isNull)
		x.countEnum(path, enum)
		if isNullable {
			s.set("type", typeNode(names, false))
		}
		if hasNull {
			return wrapNull(s)
		}
	}
	if slices.Contains(names, "object") {
		x.openAIObject(s, path, depth+1)
	}
	if slices.Contains(names, "array") {
		if items := s.get("items"); items != nil {
			s.set("items", x.openAI(items, path+"[]", depth))
		} else {
			x.fail(path, "is an array of any JSON values, which OpenAI strict mode cannot express; give its items a type")
		}
	}
	return s
}

func (x *exporter) countEnum(path string, enum *jnode) {
	x.enumValues += len(enum.vals)
	chars := 0
	for _, v := range enum.vals {
		if s, ok := v.str(); ok {
			chars += len(s)
		}
	}
	x.chars += chars
	if len(enum.vals) > openAILargeEnum && chars > openAILargeEnumMaxLen {
		x.fail(path, "has an enum of %d strings, %d characters in all; OpenAI strict mode takes at most %d characters in an enum of more than %d values",
			len(enum.vals), chars, openAILargeEnumMaxLen, openAILargeEnum)
	}
}

// openAIObject makes every property required, the optional ones nullable,
// and closes the object.
func (x *exporter) openAIObject(s *jnode, path string, depth int) {
	x.depth = max(x.depth, depth)
	if ap := s.get("additionalProperties"); ap != nil && !ap.isFalse() {
		x.fail(path, "accepts members beyond its properties, which OpenAI strict mode cannot express")
	}
	props := s.get("properties")
	if props == nil || props.kind != '{' {
		props = jobj()
		s.set("properties", props)
	}
	required := requiredSet(s)
	x.props += len(props.keys)
	for i, name := range props.keys {
		x.chars += len(name)
		p := x.openAI(props.vals[i], shape.JoinPath(path, name), depth)
		if !required[name] {
			p = nullable(p)
		}
		props.vals[i] = p
	}
	s.del("required")
	s.del("additionalProperties")
	s.set("required", jstrs(props.keys))
	s.set("additionalProperties", jfalse())
}

// nullable makes a rewritten schema also accept null: a null type in the
// type list, or a null branch of anyOf for references and enums.
func nullable(s *jnode) *jnode {
	if s.kind != '{' {
		return s
	}
	if anyOf := s.get("anyOf"); anyOf != nil {
		if !slices.ContainsFunc(anyOf.vals, isNullSchema) {
			anyOf.vals = append(anyOf.vals, jobj("type", jstr("null")))
		}
		return s
	}
	if s.get("$ref") != nil || s.get("enum") != nil {
		return wrapNull(s)
	}
	names, isNullable := types(s)
	if !isNullable && len(names) > 0 {
		s.set("type", typeNode(names, true))
	}
	return s
}

// wrapNull returns {"anyOf": [s, {"type": "null"}]}, with s's description
// moved to the union.
func wrapNull(s *jnode) *jnode {
	w := jobj()
	desc := s.del("description")
	w.set("anyOf", jarr(s, jobj("type", jstr("null"))))
	if desc != nil {
		w.set("description", desc)
	}
	return w
}

// entries returns the schema of a map's entries list: an array of
// {"key", "value"} objects, with the map's description, nullability and
// size bounds. The type names are the provider's.
func entries(m, value *jnode, arrayT, objectT, stringT string) *jnode {
	_, isNullable := types(m)
	item := jobj(
		"type", jstr(objectT),
		"properties", jobj("key", jobj("type", jstr(stringT)), "value", value),
		"required", jstrs([]string{"key", "value"}),
	)
	if objectT == "object" {
		item.set("additionalProperties", jfalse())
	}
	out := jobj("type", typeNode([]string{arrayT}, isNullable && arrayT == "array"))
	if d := m.get("description"); d != nil {
		out.set("description", d)
	}
	out.set("items", item)
	if v := m.get("minProperties"); v != nil {
		out.set("minItems", v)
	}
	if v := m.get("maxProperties"); v != nil {
		out.set("maxItems", v)
	}
	return out
}

// mapNotes returns what the description of a map's entries list says
// beyond the map's own description, and reports the keywords of the map
// that the list cannot keep.
func (x *exporter) mapNotes(m *jnode, path string) []string {
	notes := []string{mapNote}
	for i, k := range m.keys {
		switch {
		case k == "type" || k == "description" || k == "additionalProperties" || k == "minProperties" || k == "maxProperties":
			// kept by entries
		case noteKeywords[k]:
			if n := note(k, m.vals[i]); n != "" {
				notes = append(notes, n)
			}
		case dropKeywords[k]:
		default:
			x.fail(path, "uses the keyword %q on a map, which %s cannot take", k, x.provider)
		}
	}
	return notes
}
