package carmy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/carmy-dev/carmy/internal/shape"
)

// This file turns a registry's tools into the tool definitions of LLM
// provider APIs, and a provider's tool call back into a call of Execute.
// The rules each provider's schema dialect imposes, and the reasons for
// them, are in docs/llm-sdks.md.

// OpenAITool is the definition of one tool for OpenAI function calling, as
// an element of the "tools" array of a Chat Completions request. Encode it
// with encoding/json, or copy its fields into an SDK's type.
type OpenAITool struct {
	Type     string         `json:"type"` // always "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an [OpenAITool]: the tool's name,
// description and input schema, rewritten for strict mode.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"` // always true
}

// AnthropicTool is the definition of one tool for Anthropic tool use, as
// an element of the "tools" array of a Messages request.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// GeminiFunction is the declaration of one tool for Gemini function
// calling, as an element of the "functionDeclarations" array of a tool in
// a generateContent request. Parameters is nil for a tool that takes no
// input fields.
type GeminiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ExportError is one reason a provider's tool format cannot express a
// tool. The exports return all of them at once, joined with
// [errors.Join]; reach each with errors.As or by unwrapping the join.
type ExportError struct {
	Provider string // "OpenAI", "Anthropic" or "Gemini"
	Tool     string
	// Path locates the problem in the tool's input, in the notation of
	// [FieldError] paths, with "[]" for any item of an array and "[*]" for
	// any value of a map: "lines[].tags[*]". "" is the tool itself or its
	// input as a whole.
	Path string
	Err  error
}

// Error names the tool, the provider and the place in the input.
func (e *ExportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "carmy: tool %q for %s: ", e.Tool, e.Provider)
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem.
func (e *ExportError) Unwrap() error { return e.Err }

// Provider names, as ExportError.Provider reads.
const (
	providerOpenAI    = "OpenAI"
	providerAnthropic = "Anthropic"
	providerGemini    = "Gemini"
)

// Tool names each provider accepts. carmy's names may also hold "." and
// be up to 128 long; OpenAI and Anthropic document ^[a-zA-Z0-9_-]{1,64}$.
// Gemini's documents differ between its APIs; this is what all of them
// accept: a letter or "_" first, then letters, digits, "_" and "-", at
// most 64 in all.
var (
	openAIName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	anthropicName = openAIName
	geminiName    = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
)

// OpenAI strict mode's documented limits on one schema.
const (
	openAIMaxProperties   = 5000    // object properties in all
	openAIMaxDepth        = 10      // levels of object nesting
	openAIMaxEnumValues   = 1000    // enum values in all
	openAIMaxChars        = 120_000 // property names, $defs names and enum strings, in all
	openAILargeEnum       = 250     // an enum with more values than this...
	openAILargeEnumMaxLen = 15_000  // ...may hold at most this many characters of strings
)

// OpenAITools returns the definitions of the registry's tools for OpenAI
// function calling in strict mode, sorted by name. Each input schema is
// rewritten to strict mode's rules: every property listed in "required",
// an optional property made nullable (a null union), "additionalProperties"
// false on every object, a map given as a list of {"key", "value"}
// entries, and the keywords strict mode may refuse removed, the constraints
// among them restated in the description. carmy still validates every call
// against the full schema; send calls through [Registry.Dispatch], which
// undoes the rewriting.
//
// A tool that strict mode cannot express (a field that takes any JSON
// value, a name OpenAI does not accept, a schema over its documented
// limits) is left out, and the error says why, for each such tool, as
// [*ExportError] values. The definitions of the other tools are returned
// either way.
func (r *Registry) OpenAITools() ([]OpenAITool, error) {
	return exportTools(r, providerOpenAI, openAIName, "an OpenAI function name", func(x *exporter, m *ToolMetadata) OpenAITool {
		return OpenAITool{Type: "function", Function: OpenAIFunction{
			Name: m.Name, Description: m.Description, Parameters: x.openAIRoot(m.InputSchema), Strict: true,
		}}
	})
}

// AnthropicTools returns the definitions of the registry's tools for
// Anthropic tool use, sorted by name. The input schema is carmy's, which
// Anthropic takes as it is, except that a nullable root (a tool whose
// input is a pointer) is declared as a plain object: a call always sends
// an object, and carmy reads an absent input as {}.
//
// A tool whose name Anthropic does not accept is left out, and the error
// says so, as [*ExportError] values. The definitions of the other tools
// are returned either way.
func (r *Registry) AnthropicTools() ([]AnthropicTool, error) {
	return exportTools(r, providerAnthropic, anthropicName, "an Anthropic tool name", func(x *exporter, m *ToolMetadata) AnthropicTool {
		return AnthropicTool{Name: m.Name, Description: m.Description, InputSchema: x.anthropicRoot(m.InputSchema)}
	})
}

// GeminiFunctions returns the declarations of the registry's tools for
// Gemini function calling, sorted by name. Each input schema is rewritten
// into Gemini's OpenAPI subset: references inlined, "nullable": true
// instead of a null type, upper-case type names, enums for strings only, a
// map given as a list of {"key", "value"} entries, and every keyword
// outside the subset removed, the constraints among them restated in the
// description. Send calls through [Registry.Dispatch], which undoes the
// rewriting.
//
// A tool that Gemini cannot declare (a recursive input type, which would
// have to be inlined forever; a field that takes any JSON value; a name
// Gemini does not accept) is left out, and the error says why, for each
// such tool, as [*ExportError] values. The declarations of the other tools
// are returned either way.
func (r *Registry) GeminiFunctions() ([]GeminiFunction, error) {
	return exportTools(r, providerGemini, geminiName, "a Gemini function name", func(x *exporter, m *ToolMetadata) GeminiFunction {
		return GeminiFunction{Name: m.Name, Description: m.Description, Parameters: x.geminiRoot(m.InputSchema)}
	})
}

// exportTools converts every tool for one provider, sorted by name; a tool
// the provider cannot take is left out, and its problems returned.
func exportTools[T any](r *Registry, provider string, name *regexp.Regexp, what string, convert func(*exporter, *ToolMetadata) T) ([]T, error) {
	var out []T
	var errs []error
	for _, n := range r.names {
		m := &r.tools[n].meta
		x := &exporter{provider: provider, tool: m.Name}
		x.checkName(name, what)
		v := convert(x, m)
		if len(x.errs) > 0 {
			errs = append(errs, x.errs...)
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}

// Dispatch runs a tool call as a model wrote it: the tool's name and its
// arguments, the JSON text the provider returned (OpenAI's
// "function.arguments", Anthropic's "input", Gemini's "args", encoded). It
// undoes what the exports did to the schema, then calls [Registry.Execute]
// with the options applied:
//
//   - a null member for a field that is optional in the tool's own schema
//     is dropped, as if the model had left it out: strict mode makes a model
//     send every field, null for those it means to omit. A null for a
//     required field stays, and validation reports it;
//   - a list of {"key", "value"} entries where the schema has a map becomes
//     that map. Entries that are not of that form, or repeat a key, are
//     [CodeInvalidInput] before the tool is reached.
//
// At every depth: in nested objects, in arrays of objects and in map
// values. Arguments that are not JSON, and calls of unknown tools, go to
// Execute as they are, which reports them.
func (r *Registry) Dispatch(ctx context.Context, name, arguments string, opts ...CallOption) (Result, error) {
	c := Call{Tool: name, Input: json.RawMessage(arguments)}
	for _, o := range opts {
		o(&c)
	}
	c.Tool = name
	if t, ok := r.tools[name]; ok {
		in, err := modelArguments(name, inputSchema(t), c.Input)
		if err != nil {
			return Result{}, err
		}
		c.Input = in
	}
	return r.Execute(ctx, c)
}

// --- JSON values that keep their order ---------------------------------------

// jnode is a JSON value that keeps the order of object members and the
// exact text of scalars, so that schemas read as carmy wrote them and
// numbers keep every digit.
type jnode struct {
	kind byte     // '{', '[', or the kind of a scalar: '"', '0', 't', 'f', 'n'
	raw  []byte   // the text of a scalar
	keys []string // the member names of an object
	vals []*jnode // the member values of an object, the items of an array
	done bool     // already rewritten for the provider
}

func parseJSON(b []byte) (*jnode, error) {
	d := jsontext.NewDecoder(bytes.NewReader(b))
	n, err := readJSON(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return n, nil
}

func readJSON(d *jsontext.Decoder) (*jnode, error) {
	k := d.PeekKind()
	if k != '{' && k != '[' {
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		return &jnode{kind: byte(v.Kind()), raw: slices.Clone(v)}, nil
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	n := &jnode{kind: byte(k)}
	end := jsontext.Kind('}')
	if k == '[' {
		end = ']'
	}
	for d.PeekKind() != end {
		if k == '{' {
			name, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, name.String())
		}
		v, err := readJSON(d)
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, v)
	}
	_, err := d.ReadToken()
	return n, err
}

func (n *jnode) appendTo(b []byte) []byte {
	switch n.kind {
	case '{':
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = jsontext.AppendQuote(b, k) // names are valid UTF-8: they were read as JSON or written here
			b = append(b, ':')
			b = n.vals[i].appendTo(b)
		}
		return append(b, '}')
	case '[':
		b = append(b, '[')
		for i, v := range n.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.appendTo(b)
		}
		return append(b, ']')
	}
	return append(b, n.raw...)
}

func (n *jnode) bytes() json.RawMessage { return n.appendTo(nil) }

func (n *jnode) index(k string) int {
	if n.kind != '{' {
		return -1
	}
	return slices.Index(n.keys, k)
}

func (n *jnode) get(k string) *jnode {
	if i := n.index(k); i >= 0 {
		return n.vals[i]
	}
	return nil
}

// set replaces a member's value, or adds the member at the end.
func (n *jnode) set(k string, v *jnode) {
	if i := n.index(k); i >= 0 {
		n.vals[i] = v
		return
	}
	n.keys = append(n.keys, k)
	n.vals = append(n.vals, v)
}

// del removes a member and returns its value.
func (n *jnode) del(k string) *jnode {
	i := n.index(k)
	if i < 0 {
		return nil
	}
	v := n.vals[i]
	n.keys = slices.Delete(n.keys, i, i+1)
	n.vals = slices.Delete(n.vals, i, i+1)
	return v
}

// str returns the value of a JSON string.
func (n *jnode) str() (string, bool) {
	if n == nil || n.kind != '"' {
		return "", false
	}
	s, err := jsontext.AppendUnquote(nil, n.raw)
	return string(s), err == nil
}

func (n *jnode) isNull() bool  { return n != nil && n.kind == 'n' }
func (n *jnode) isFalse() bool { return n != nil && n.kind == 'f' }

func jstr(s string) *jnode {
	b, _ := jsontext.AppendQuote(nil, s)
	return &jnode{kind: '"', raw: b}
}

func jfalse() *jnode { return &jnode{kind: 'f', raw: []byte("false")} }
func jtrue() *jnode  { return &jnode{kind: 't', raw: []byte("true")} }

func jarr(items ...*jnode) *jnode { return &jnode{kind: '[', vals: items} }

func jstrs(s []string) *jnode {
	a := jarr()
	for _, v := range s {
		a.vals = append(a.vals, jstr(v))
	}
	return a
}

// jobj builds an object from name, value pairs.
func jobj(kv ...any) *jnode {
	o := &jnode{kind: '{'}
	for i := 0; i < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1].(*jnode))
	}
	return o
}

// --- Schema helpers ----------------------------------------------------------

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
// `pattern: ^[A-Z]+$`. It returns "" for the limits of a Go type.
func note(k string, v *jnode) string {
	if (k == "minimum" || k == "maximum") && isTypeLimit(v) {
		return ""
	}
	if s, ok := v.str(); ok {
		return k + ": " + s
	}
	return k + ": " + string(v.bytes())
}

// addNotes appends notes to a schema's description, which it adds after
// the type when there is none.
func addNotes(s *jnode, notes []string) {
	if len(notes) == 0 {
		return
	}
	text := strings.Join(notes, "; ")
	if d, _ := s.get("description").str(); d != "" {
		text = d + " (" + text + ")"
	}
	if s.index("description") >= 0 {
		s.set("description", jstr(text))
		return
	}
	at := s.index("type") + 1 // 0 without a type
	s.keys = slices.Insert(s.keys, at, "description")
	s.vals = slices.Insert(s.vals, at, jstr(text))
}

// --- Export common -----------------------------------------------------------

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

// --- Anthropic ---------------------------------------------------------------

func (x *exporter) anthropicRoot(schema json.RawMessage) json.RawMessage {
	s, wasNullable := x.root(schema)
	switch {
	case s == nil:
		return nil
	case wasNullable:
		return s.bytes()
	}
	return slices.Clone(schema) // as carmy wrote it, byte for byte
}

// --- OpenAI ------------------------------------------------------------------

// openAIKeep are the keywords strict mode takes, in the conservative set
// documented since strict mode launched.
var openAIKeep = map[string]bool{
	"type": true, "description": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "enum": true, "anyOf": true, "$ref": true,
}

func (x *exporter) openAIRoot(schema json.RawMessage) json.RawMessage {
	s, _ := x.root(schema)
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
	if s.done {
		return s
	}
	if s.kind != '{' {
		x.fail(path, "has the schema %s, which OpenAI strict mode cannot express; give it a concrete type", s.bytes())
		return s
	}
	var notes []string
	if isMap(s) {
		x.depth = max(x.depth, depth+1)
		value := x.openAI(s.get("additionalProperties"), path+"[*]", depth+1)
		notes = x.mapNotes(s, path)
		s = entries(s, value, "array", "object", "string")
		s.get("items").done = true
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
	s.done = true
	if unknown {
		return s
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
	w.done = true
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

// --- Gemini ------------------------------------------------------------------

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

// --- Dispatch ----------------------------------------------------------------

// inputSchemas holds the parsed input schema of each tool Dispatch has
// called, read-only, for as long as the tool lives.
var inputSchemas sync.Map // weak.Pointer[tool] → *jnode

// inputSchema returns a tool's input schema, parsed; nil if it does not
// parse.
func inputSchema(t *tool) *jnode {
	key := weak.Make(t)
	if s, ok := inputSchemas.Load(key); ok {
		return s.(*jnode)
	}
	s, err := parseJSON(t.meta.InputSchema)
	if err != nil {
		s = nil
	}
	if _, loaded := inputSchemas.LoadOrStore(key, s); !loaded {
		runtime.AddCleanup(t, func(k weak.Pointer[tool]) { inputSchemas.Delete(k) }, key)
	}
	return s
}

// modelArguments undoes, in a model's arguments, what the exports did to
// a tool's schema, which it only reads. It returns the arguments
// unchanged when there is nothing to undo or they are not JSON.
func modelArguments(tool string, s *jnode, args json.RawMessage) (json.RawMessage, error) {
	if s == nil || len(bytes.TrimSpace(args)) == 0 {
		return args, nil
	}
	v, err := parseJSON(args)
	if err != nil {
		return args, nil // Execute reports it
	}
	w := &argWalker{defs: s.get("$defs")}
	w.walk(s, v, "")
	if len(w.problems) > 0 {
		e := &Error{Code: CodeInvalidInput, Fields: w.problems}
		if len(w.problems) == 1 {
			e.Message = fmt.Sprintf("invalid input for %s: %s", tool, describe(w.problems[0]))
		} else {
			e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", tool, len(w.problems))
		}
		return nil, e
	}
	if !w.changed {
		return args, nil
	}
	return v.bytes(), nil
}

type argWalker struct {
	defs     *jnode
	changed  bool
	problems []FieldError
}

// maxRefs bounds the references and unions followed in a row, against a
// schema that goes round without reaching a type.
const maxRefs = 64

// resolve follows references, and unions with null, to the schema that
// says what a value is; nil when there is none to follow.
func (w *argWalker) resolve(s *jnode) *jnode {
	for range maxRefs {
		if s == nil || s.kind != '{' {
			return nil
		}
		if ref := s.get("$ref"); ref != nil {
			name, ok := refName(ref)
			if !ok || w.defs == nil {
				return nil
			}
			s = w.defs.get(name)
			continue
		}
		anyOf := s.get("anyOf")
		if anyOf == nil {
			return s
		}
		var branch *jnode
		for _, b := range anyOf.vals {
			if !isNullSchema(b) {
				if branch != nil {
					return nil // a real union: which branch applies is the validator's business
				}
				branch = b
			}
		}
		s = branch
	}
	return nil
}

func (w *argWalker) walk(s, v *jnode, path string) {
	s = w.resolve(s)
	if s == nil {
		return
	}
	switch v.kind {
	case '[':
		if isMap(s) {
			if w.entriesToMap(v, path) {
				w.walk(s, v, path)
			}
			return
		}
		if items := s.get("items"); items != nil {
			for i, e := range v.vals {
				w.walk(items, e, path+"["+strconv.Itoa(i)+"]")
			}
		}
	case '{':
		props := s.get("properties")
		ap := s.get("additionalProperties")
		required := requiredSet(s)
		for i := 0; i < len(v.keys); i++ {
			name := v.keys[i]
			var sub *jnode
			if props != nil {
				sub = props.get(name)
			}
			switch {
			case sub == nil && ap != nil && ap.kind == '{':
				w.walk(ap, v.vals[i], shape.JoinPath(path, name)) // a map's value
			case sub == nil:
				// not a field: validation reports it
			case v.vals[i].isNull() && !required[name]:
				v.keys = slices.Delete(v.keys, i, i+1)
				v.vals = slices.Delete(v.vals, i, i+1)
				w.changed = true
				i--
			default:
				w.walk(sub, v.vals[i], shape.JoinPath(path, name))
			}
		}
	}
}

// entriesToMap turns a list of {"key", "value"} entries into the object it
// stands for, in place, or reports why it cannot.
func (w *argWalker) entriesToMap(v *jnode, path string) bool {
	m := jobj()
	var problems []FieldError
	for i, e := range v.vals {
		at := path + "[" + strconv.Itoa(i) + "]"
		key, okKey := e.get("key").str()
		value := e.get("value")
		switch {
		case e.kind != '{' || len(e.keys) != 2 || value == nil || e.get("key") == nil:
			problems = append(problems, FieldError{Path: at, Message: `must be an entry {"key": "...", "value": ...} of the map`})
		case !okKey:
			problems = append(problems, FieldError{Path: at + ".key", Message: "must be a string: it is a key of the map"})
		case m.index(key) >= 0:
			problems = append(problems, FieldError{Path: at + ".key", Message: fmt.Sprintf("repeats the key %q; give each key once", key)})
		default:
			m.set(key, value)
		}
	}
	if len(problems) > 0 {
		w.problems = append(w.problems, problems...)
		return false
	}
	*v = *m
	w.changed = true
	return true
}
