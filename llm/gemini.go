package llm

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/carmy-dev/carmy/internal/shape"
)

// geminiOrder is the order of a rewritten schema's keywords.
var geminiOrder = []string{"type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems", "maxItems", "minimum", "maximum"}

// geminiKnown are the keywords of carmy's schemas that the rewriting
// into Gemini's subset reads; the others are noted or dropped, or refused.
var geminiKnown = map[string]bool{
	"type": true, "description": true, "enum": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "format": true, "minItems": true, "maxItems": true,
	"minimum": true, "maximum": true, "$ref": true, "anyOf": true,
}

// geminiFormats are the formats Gemini's schema documents, by type.
var geminiFormats = map[string][]string{
	"string":  {"date-time"},
	"integer": {"int32", "int64"},
	"number":  {"float", "double"},
}

func (x *exporter) geminiRoot(schema json.RawMessage) json.RawMessage {
	s, _ := x.root(schema)
	collapseOptional(s)
	if s == nil {
		return nil
	}
	x.defs = s.del("$defs")
	if props := s.get("properties"); props == nil || len(props.keys) == 0 {
		return nil // Gemini takes no parameters rather than an object with none
	}
	out := x.gemini(s, "")
	if out == nil || len(x.errs) > 0 {
		return nil
	}
	return out.bytes()
}

// gemini returns the rewritten copy of a schema, or nil after reporting
// why Gemini cannot take it.
func (x *exporter) gemini(s *jnode, path string) *jnode {
	if s.kind != '{' {
		x.fail(path, "has the schema %s, which Gemini cannot express; give it a concrete type", s.bytes())
		return nil
	}
	for _, k := range s.keys {
		if !geminiKnown[k] && !noteKeywords[k] && !dropKeywords[k] {
			x.fail(path, "uses the keyword %q, which Gemini does not take", k)
			return nil
		}
	}
	if ref := s.get("$ref"); ref != nil {
		return x.geminiRef(s, ref, path)
	}
	if anyOf := s.get("anyOf"); anyOf != nil {
		var branch *jnode
		n, isNullable := 0, false
		for _, b := range anyOf.vals {
			if isNullSchema(b) {
				isNullable = true
			} else {
				branch, n = b, n+1
			}
		}
		if n != 1 {
			x.fail(path, "is one of several schemas (anyOf), which Gemini cannot express")
			return nil
		}
		out := x.gemini(branch, path)
		if out == nil {
			return nil
		}
		if d := s.get("description"); d != nil {
			out.set("description", d)
		}
		if isNullable {
			out.set("nullable", jtrue())
		}
		return ordered(out, geminiOrder)
	}
	names, isNullable := types(s)
	switch {
	case len(names) == 0 && isNullable:
		x.fail(path, "can only be null, which Gemini cannot declare")
		return nil
	case len(names) == 0:
		x.fail(path, "accepts any JSON value, which Gemini cannot express; give it a concrete type")
		return nil
	case len(names) > 1:
		x.fail(path, "may be a %s, which Gemini cannot express: give it one type", strings.Join(names, " or "))
		return nil
	}
	t := names[0]
	out := jobj("type", jstr(strings.ToUpper(t)))
	var notes []string
	if isMap(s) {
		value := x.gemini(s.get("additionalProperties"), path+"[*]")
		if value == nil {
			return nil
		}
		out = entries(s, value, "ARRAY", "OBJECT", "STRING")
		notes = append(notes, x.mapNotes(s, path)...)
	} else {
		if d := s.get("description"); d != nil {
			out.set("description", d)
		}
		for i, k := range s.keys {
			v := s.vals[i]
			switch {
			case k == "type" || k == "description" || k == "enum":
			case k == "properties" || k == "required" || k == "additionalProperties":
				if t != "object" {
					x.fail(path, "has %q on a %s, which Gemini does not take", k, t)
				}
			case k == "items":
				if t != "array" {
					x.fail(path, "has %q on a %s, which Gemini does not take", k, t)
				}
			case k == "format":
				if f, _ := v.str(); slices.Contains(geminiFormats[t], f) && s.get("enum") == nil {
					out.set(k, v)
				} else if n := note(k, v); n != "" {
					notes = append(notes, n)
				}
			case (k == "minItems" || k == "maxItems") && t == "array":
				out.set(k, v)
			case (k == "minimum" || k == "maximum") && (t == "integer" || t == "number"):
				if !isTypeLimit(v) {
					out.set(k, v)
				}
			case noteKeywords[k]:
				if n := note(k, v); n != "" {
					notes = append(notes, n)
				}
			}
		}
		if enum := s.get("enum"); enum != nil {
			if slices.ContainsFunc(enum.vals, (*jnode).isNull) {
				isNullable = true
			}
			vals := slices.DeleteFunc(slices.Clone(enum.vals), (*jnode).isNull)
			if t == "string" {
				out.set("format", jstr("enum"))
				out.set("enum", jarr(vals...))
			} else {
				notes = append(notes, "one of "+string(jarr(vals...).bytes()))
			}
		}
		switch t {
		case "object":
			if !x.geminiObject(s, out, path) {
				return nil
			}
		case "array":
			items := s.get("items")
			if items == nil {
				x.fail(path, "is an array of any JSON values, which Gemini cannot express; give its items a type")
				return nil
			}
			it := x.gemini(items, path+"[]")
			if it == nil {
				return nil
			}
			out.set("items", it)
		}
	}
	if isNullable {
		out.set("nullable", jtrue())
	}
	addNotes(out, notes)
	return ordered(out, geminiOrder)
}

func (x *exporter) geminiObject(s, out *jnode, path string) bool {
	if ap := s.get("additionalProperties"); ap != nil && !ap.isFalse() {
		x.fail(path, "accepts members beyond its properties, which Gemini cannot express")
		return false
	}
	props := s.get("properties")
	if props == nil || props.kind != '{' || len(props.keys) == 0 {
		x.fail(path, "is an object with no properties, which Gemini cannot declare")
		return false
	}
	required := requiredSet(s)
	gp := jobj()
	var req []string
	ok := true
	for i, name := range props.keys {
		p := x.gemini(props.vals[i], shape.JoinPath(path, name))
		if p == nil {
			ok = false
			continue
		}
		gp.set(name, p)
		if required[name] {
			req = append(req, name)
		}
	}
	out.set("properties", gp)
	if len(req) > 0 {
		out.set("required", jstrs(req))
	}
	return ok
}

// geminiRef inlines a reference, which Gemini's schemas cannot hold; a
// reference to a type being inlined is recursion, which inlining cannot
// end.
func (x *exporter) geminiRef(s, ref *jnode, path string) *jnode {
	name, ok := refName(ref)
	var def *jnode
	if ok && x.defs != nil {
		def = x.defs.get(name)
	}
	if def == nil {
		x.fail(path, "has the reference %s, which does not resolve to an entry of the schema's $defs", ref.bytes())
		return nil
	}
	for i := range x.inlining {
		if in := &x.inlining[i]; in.name == name {
			if !in.reported {
				x.fail(in.path, "is of the recursive type %s, which Gemini cannot declare: its schemas have no references, and inlining a type that contains itself never ends; cut the recursion (a fixed depth, or IDs instead of nested values) or use another provider", name)
				in.reported = true
			}
			return nil
		}
	}
	x.inlining = append(x.inlining, inlined{name: name, path: path})
	out := x.gemini(def, path)
	x.inlining = x.inlining[:len(x.inlining)-1]
	if out == nil {
		return nil
	}
	if d := s.get("description"); d != nil {
		out.set("description", d)
	}
	return ordered(out, geminiOrder)
}

// ordered sorts an object's members into an order; others keep theirs,
// after.
func ordered(n *jnode, order []string) *jnode {
	out := jobj()
	for _, k := range order {
		if v := n.get(k); v != nil {
			out.set(k, v)
		}
	}
	for i, k := range n.keys {
		if !slices.Contains(order, k) {
			out.set(k, n.vals[i])
		}
	}
	return out
}
