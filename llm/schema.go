package llm

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/carmy-dev/carmy/internal/shape"
)

// types returns the names a schema's "type" lists, and whether "null" is
// one of them; none when the schema has no type.
func types(s *jnode) (names []string, nullable bool) {
	t := s.get("type")
	if t == nil {
		return nil, false
	}
	var all []string
	if v, ok := t.str(); ok {
		all = []string{v}
	} else if t.kind == '[' {
		for _, e := range t.vals {
			if v, ok := e.str(); ok {
				all = append(all, v)
			}
		}
	}
	for _, v := range all {
		if v == "null" {
			nullable = true
		} else {
			names = append(names, v)
		}
	}
	return names, nullable
}

// typeNode writes a list of type names as "type" reads them.
func typeNode(names []string, nullable bool) *jnode {
	if nullable {
		names = append(slices.Clip(names), "null")
	}
	if len(names) == 1 {
		return jstr(names[0])
	}
	return jstrs(names)
}

// isMap reports whether a schema is carmy's schema of a Go map: an object
// with no fixed properties and a schema for the values of its members.
func isMap(s *jnode) bool {
	ap := s.get("additionalProperties")
	return ap != nil && ap.kind == '{' && s.get("properties") == nil
}

func isNullSchema(s *jnode) bool {
	if s.kind != '{' || s.get("$ref") != nil || s.get("anyOf") != nil {
		return false
	}
	names, nullable := types(s)
	return nullable && len(names) == 0
}

// requiredSet returns the names an object schema requires.
func requiredSet(s *jnode) map[string]bool {
	set := map[string]bool{}
	if req := s.get("required"); req != nil && req.kind == '[' {
		for _, v := range req.vals {
			if name, ok := v.str(); ok {
				set[name] = true
			}
		}
	}
	return set
}

// refName returns the name of the $defs entry a local reference points to.
func refName(ref *jnode) (string, bool) {
	s, ok := ref.str()
	name, found := strings.CutPrefix(s, "#/$defs/")
	if !ok || !found || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// mapNote tells the model how a map travels when a provider cannot declare
// one.
const mapNote = `a map, sent as a list of {"key", "value"} entries with each key at most once`

// noteKeywords are the keywords a provider may lack that still say
// something the model should know: when removed from a schema, they are
// restated in its description.
var noteKeywords = map[string]bool{
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "exclusiveMinimum": true, "maximum": true, "exclusiveMaximum": true,
	"multipleOf": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minProperties": true, "maxProperties": true,
	"contentEncoding": true, "contentMediaType": true, "default": true,
	"not": true, // a value required refuses (the nil UUID, the zero time)
}

// dropKeywords are annotations a provider may lack that can go without a
// word.
var dropKeywords = map[string]bool{
	"title": true, "examples": true, "$schema": true, "$id": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// typeLimits are the bounds carmy writes for the range of a 32- or 64-bit
// Go number type. They tell a model nothing it would use, and 64-bit
// integer limits are not even exact as the doubles these APIs read, so
// they are left out of descriptions and of Gemini's schemas.
var typeLimits = []float64{
	math.MinInt32, math.MaxInt32, math.MaxUint32,
	math.MinInt64, math.MaxInt64, math.MaxUint64,
	-math.MaxFloat32, math.MaxFloat32, -math.MaxFloat64, math.MaxFloat64,
}

func isTypeLimit(n *jnode) bool {
	if n.kind != '0' {
		return false
	}
	f, err := strconv.ParseFloat(string(n.raw), 64)
	return err == nil && slices.Contains(typeLimits, f)
}

// note restates one keyword for a description: `minLength: 1`,
// `pattern: ^[A-Z]+$`, and the rules carmy writes as a regular expression
// in words (see words). It returns "" for the limits of a Go type.
func note(k string, v *jnode) string {
	if (k == "minimum" || k == "maximum") && isTypeLimit(v) {
		return ""
	}
	if w := words(k, v); w != "" {
		return w
	}
	if s, ok := v.str(); ok {
		return k + ": " + s
	}
	return k + ": " + string(v.bytes())
}

// words says a rule that carmy writes as a regular expression in words a
// model reads: "must not be the zero time (0001-01-01T00:00:00Z)" for a
// required time, the syntax of a duration; "" for any other keyword.
func words(k string, v *jnode) string {
	switch k {
	case "pattern":
		if p, ok := v.str(); ok {
			return shape.PatternWords(p)
		}
	case "not":
		if v.kind != '{' || len(v.keys) != 1 {
			return ""
		}
		switch v.keys[0] {
		case "pattern":
			if p, ok := v.vals[0].str(); ok && shape.PatternWords(p) != "" {
				return "must not be " + shape.PatternWords(p)
			}
		case "const":
			return "must not be " + string(v.vals[0].bytes())
		}
	}
	return ""
}

// addNotes appends notes to a schema's description, which it adds after
// the type when there is none, and reports whether it changed the
// description. A note the description already is (the syntax of a
// duration) is not repeated.
func addNotes(s *jnode, notes []string) bool {
	d, _ := s.get("description").str()
	notes = slices.DeleteFunc(notes, func(n string) bool { return n == d })
	if len(notes) == 0 {
		return false
	}
	text := strings.Join(notes, "; ")
	if d != "" {
		text = d + " (" + text + ")"
	}
	if s.index("description") >= 0 {
		s.set("description", jstr(text))
		return true
	}
	at := s.index("type") + 1 // 0 without a type
	s.keys = slices.Insert(s.keys, at, "description")
	s.vals = slices.Insert(s.vals, at, jstr(text))
	return true
}

// exporter rewrites one tool's input schema for one provider and collects
// what the provider cannot express.
type exporter struct {
	provider string
	tool     string
	errs     []error
	defs     *jnode    // the root's $defs
	inlining []inlined // Gemini: the $defs entries being inlined, outermost first

	// OpenAI's limits.
	props, depth, enumValues, chars int
}

// inlined is a $defs entry Gemini's rewriting is inlining.
type inlined struct {
	name, path string // the entry, and where it was first referenced
	reported   bool
}

func (x *exporter) fail(path, format string, args ...any) {
	x.errs = append(x.errs, &ExportError{Provider: x.provider, Tool: x.tool, Path: path, Err: fmt.Errorf(format, args...)})
}

func (x *exporter) checkName(re *regexp.Regexp, what string) {
	if !re.MatchString(x.tool) {
		x.fail("", "the name %q is not %s (%s); rename the tool with carmy.Name", x.tool, what, strings.Trim(re.String(), "^$"))
	}
}

// root parses an input schema and checks that its root is an object. A
// nullable root (a tool whose input is a pointer) becomes a plain object:
// a call always sends an object, and carmy reads an absent input as {}.
// It returns nil after reporting a problem, and whether the root was
// nullable.
func (x *exporter) root(schema json.RawMessage) (s *jnode, wasNullable bool) {
	s, err := parseJSON(schema)
	if err != nil || s.kind != '{' {
		x.fail("", "the input schema is not a JSON object")
		return nil, false
	}
	names, wasNullable := types(s)
	if len(names) != 1 || names[0] != "object" || isMap(s) || s.get("anyOf") != nil || s.get("$ref") != nil {
		x.fail("", "the input schema is not an object with properties; every provider takes an object of named arguments")
		return nil, false
	}
	s.set("type", jstr("object"))
	return s, wasNullable
}

// collapseOptional rewrites, everywhere in s, the form carmy gives rules
// that hold unless a value is empty (validate:"omitempty,url"): anyOf an
// empty value and the rules. Providers that take no anyOf of two schemas
// get the rules on the value itself, with a note that it may be empty; the
// runtime still accepts the empty value.
func collapseOptional(s *jnode) {
	if s == nil {
		return
	}
	if s.kind == '{' {
		if anyOf := s.get("anyOf"); anyOf != nil && len(anyOf.vals) == 2 && isEmptyBranch(anyOf.vals[0]) && anyOf.vals[1].kind == '{' {
			rules := anyOf.vals[1]
			s.del("anyOf")
			for i, k := range rules.keys {
				if s.get(k) == nil {
					s.set(k, rules.vals[i])
				}
			}
			addNotes(s, []string{"or empty"})
		}
	}
	for _, v := range s.vals {
		collapseOptional(v)
	}
}

// isEmptyBranch reports whether a schema allows only an empty value: "",
// 0, [] or {}.
func isEmptyBranch(s *jnode) bool {
	if s.kind != '{' || s.get("type") == nil {
		return false
	}
	for i, k := range s.keys {
		v := s.vals[i]
		switch k {
		case "type":
		case "maxLength", "maxItems", "maxProperties":
			if string(v.raw) != "0" {
				return false
			}
		case "enum":
			if len(v.vals) != 1 || string(v.vals[0].raw) != "0" {
				return false
			}
		default:
			return false
		}
	}
	return true
}
