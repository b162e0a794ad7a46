package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Schema returns the JSON Schema (draft 2020-12) of the type n models. The
// root is inline; only recursive types go to $defs. A pointer root is
// nullable.
//
// Schemas are cached per node, so per Go type; the bytes returned are
// shared and must not be modified.
func Schema(n *Node) json.RawMessage {
	if s, ok := schemas.Load(n); ok {
		return s.(json.RawMessage)
	}
	s := emit(n)
	schemas.Store(n, s)
	return s
}

// schemas caches the schema of each node; Reset clears it with the nodes.
var schemas sync.Map // *Node → json.RawMessage

func emit(n *Node) json.RawMessage {
	e := &emitter{names: map[string]*Node{}, defs: map[*Node]string{}}
	root := e.use(n, nil, n.Kind == KindPtr, annotations{}, true)
	if len(e.queue) > 0 {
		defs := &object{}
		for i := 0; i < len(e.queue); i++ { // emitting a def may queue more
			d := e.queue[i]
			defs.set(e.defs[d], e.body(d, nil, false, annotations{}))
		}
		root.set("$defs", defs)
	}
	b, err := jsonv2.Marshal(root)
	if err != nil {
		panic(fmt.Sprintf("carmy: schema of %s does not encode: %v", n.Type, err)) // a bug in this package
	}
	return b
}

// annotations are what a use of a type says about it beyond rules.
type annotations struct {
	desc, title string
	def         any
	examples    []any
}

type emitter struct {
	names map[string]*Node
	defs  map[*Node]string
	queue []*Node
}

// use emits the schema of one use of a node: a field, an element, the root.
func (e *emitter) use(n *Node, r *Rules, nullable bool, a annotations, root bool) *object {
	for n.Kind == KindPtr {
		n = n.Elem
	}
	if n.Kind == KindOpaque {
		return e.opaque(n, nullable, a)
	}
	if n.Recursive && !root {
		ref := &object{}
		ref.set("$ref", "#/$defs/"+e.defName(n))
		if !nullable {
			e.annotate(ref, n, a)
			return ref
		}
		null := &object{}
		null.set("type", "null")
		o := &object{}
		o.set("anyOf", []any{ref, null})
		e.annotate(o, n, a)
		return o
	}
	if n.Recursive {
		e.defName(n)
	}
	return e.body(n, r, nullable, a)
}

// opaque emits a declared schema as it was written, made nullable and
// annotated as its use asks.
func (e *emitter) opaque(n *Node, nullable bool, a annotations) *object {
	o := rawObject(n.Opaque.Doc)
	if nullable {
		null := &object{}
		null.set("type", "null")
		wrap := &object{}
		wrap.set("anyOf", []any{o, null})
		o = wrap
	}
	if a.title != "" {
		o.set("title", a.title)
	}
	if a.desc != "" {
		o.set("description", a.desc)
	}
	return o
}

// rawObject reads a schema document into an object, its members kept in
// order and its $schema and $id left out; the boolean schemas become {}
// and {"not":{}}.
func rawObject(doc []byte) *object {
	o := &object{}
	switch string(bytes.TrimSpace(doc)) {
	case "true":
		return o
	case "false":
		o.set("not", &object{})
		return o
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	if _, err := dec.ReadToken(); err != nil {
		return o
	}
	for dec.PeekKind() == '"' {
		k, err := dec.ReadToken()
		if err != nil {
			return o
		}
		name := k.String() // before the next read voids the token
		v, err := dec.ReadValue()
		if err != nil {
			return o
		}
		if name == "$schema" || name == "$id" {
			continue // a document's own; embedded, it would start a new resource
		}
		o.set(name, jsontextRaw(bytes.Clone(v)))
	}
	return o
}

func (e *emitter) annotate(o *object, n *Node, a annotations) {
	if t := cmpOr(a.title, n.Title); t != "" {
		o.set("title", t)
	}
	if d := cmpOr(a.desc, n.Desc); d != "" {
		o.set("description", d)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// body emits a node inline.
func (e *emitter) body(n *Node, r *Rules, nullable bool, a annotations) *object {
	o := &object{}
	if r == nil {
		r = &Rules{}
	}
	if t := jsonType(n); t != "" {
		if nullable {
			o.set("type", []any{t, "null"})
		} else {
			o.set("type", t)
		}
	}
	e.annotate(o, n, a)
	if f := cmpOr(r.Format, n.Format); f != "" {
		o.set("format", f)
	}
	if enum := enumOf(r.Enum, n.Rules.Enum); enum != nil {
		vals := make([]any, 0, len(enum)+1)
		for _, l := range enum {
			vals = append(vals, jsontextRaw(l.JSON))
		}
		if nullable {
			vals = append(vals, nil)
		}
		o.set("enum", vals)
	}
	// alternatives: the value is empty or keeps the rules that follow
	// omitempty (anyOf below).
	alternatives := r.IfSet != nil && !collection(n) && (!r.IfSet.empty() || r.IfSet.Format != "") // formats are checked by the validator
	if numberKind(n) {
		lo, hi := typeRange(n)
		minB, xmin, maxB, xmax := lo, (*Bound)(nil), hi, (*Bound)(nil)
		for _, rr := range []*Rules{&n.Rules, r} {
			if rr.Min != nil {
				tighten(&minB, rr.Min, true)
			}
			if rr.Max != nil {
				tighten(&maxB, rr.Max, false)
			}
			if rr.XMin != nil {
				tighten(&xmin, rr.XMin, true)
			}
			if rr.XMax != nil {
				tighten(&xmax, rr.XMax, false)
			}
		}
		// Beside the alternatives, a bound that is only the type's range
		// says nothing they do not, and reads as if it were the rule: both
		// bound the number (0, and the rules' range within the type's).
		if (xmin == nil || xmin.Rat.Cmp(minB.Rat) < 0) && !(alternatives && minB == lo) {
			o.set("minimum", jsontextRaw(minB.Lit))
		}
		if xmin != nil {
			o.set("exclusiveMinimum", jsontextRaw(xmin.Lit))
		}
		if (xmax == nil || xmax.Rat.Cmp(maxB.Rat) > 0) && !(alternatives && maxB == hi) {
			o.set("maximum", jsontextRaw(maxB.Lit))
		}
		if xmax != nil {
			o.set("exclusiveMaximum", jsontextRaw(xmax.Lit))
		}
	}
	if alternatives {
		o.set("anyOf", []any{emptySchema(n, nullable), e.body(n, r.IfSet, false, annotations{})})
	}
	if r.NonZero || n.Rules.NonZero {
		if z, err := zeroSchema(n); err == nil {
			o.set("not", z)
		}
	}
	minLen, maxLen := lengths(n, r)
	switch n.Kind {
	case KindString:
		setCount(o, "minLength", minLen)
		setCount(o, "maxLength", maxLen)
		if p := patternOf(r, n); p != nil {
			o.set("pattern", p.String())
		}
	case KindBytes:
		o.set("contentEncoding", "base64")
	case KindDuration:
		o.set("pattern", durationPattern)
	case KindSlice, KindArray:
		o.set("items", e.use(n.Elem, r.Items, elemNullable(n, r), annotations{}, false))
		setCount(o, "minItems", minLen)
		setCount(o, "maxItems", maxLen)
	case KindMap:
		setCount(o, "minProperties", minLen)
		setCount(o, "maxProperties", maxLen)
		o.set("additionalProperties", e.use(n.Elem, r.Items, elemNullable(n, r), annotations{}, false))
	case KindStruct:
		props := &object{}
		var required []any
		for _, f := range n.Fields {
			fa := annotations{desc: f.Desc, title: f.Title, def: f.Default, examples: f.Examples}
			p := e.use(f.Node, &f.Rules, f.Nullable, fa, false)
			if f.Header != "" {
				p.set("x-mcp-header", f.Header)
			}
			props.set(f.Name, p)
			if f.Required {
				required = append(required, f.Name)
			}
		}
		o.set("properties", props)
		if required != nil {
			o.set("required", required)
		}
		o.set("additionalProperties", false)
	}
	if a.def != nil {
		o.set("default", a.def)
	}
	if a.examples != nil {
		o.set("examples", a.examples)
	}
	return o
}

// emptySchema is the schema of the empty value of a node of a kind that
// IfSet rules apply to, null included when the use is nullable.
func emptySchema(n *Node, nullable bool) *object {
	o := &object{}
	if nullable {
		o.set("type", []any{jsonType(n), "null"})
	} else {
		o.set("type", jsonType(n))
	}
	switch n.Kind {
	case KindString:
		o.set("maxLength", 0)
	case KindSlice:
		o.set("maxItems", 0)
	case KindMap:
		o.set("maxProperties", 0)
	default:
		o.set("enum", []any{0})
	}
	return o
}

func elemNullable(n *Node, r *Rules) bool {
	return n.Elem.Kind == KindPtr && (r.Items == nil || !r.Items.NonNull)
}

// collection reports whether n is a slice or a map, whose rules after
// omitempty hold on every value a member can carry: a collection is empty,
// to the validator, only when nil, and it is nil only when absent.
func collection(n *Node) bool { return n.Kind == KindSlice || n.Kind == KindMap }

func lengths(n *Node, r *Rules) (minLen, maxLen *int) {
	for _, rr := range []*Rules{&n.Rules, r, r.IfSet} {
		if rr == nil || (rr == r.IfSet && !collection(n)) {
			continue
		}
		if rr.MinLen != nil {
			tightenLen(&minLen, *rr.MinLen, true)
		}
		if rr.MaxLen != nil {
			tightenLen(&maxLen, *rr.MaxLen, false)
		}
	}
	if n.Kind == KindArray {
		tightenLen(&minLen, n.Len, true)
		tightenLen(&maxLen, n.Len, false)
	}
	return minLen, maxLen
}

func setCount(o *object, key string, v *int) {
	if v != nil {
		o.set(key, *v)
	}
}

func patternOf(r *Rules, n *Node) *regexp.Regexp {
	if r.Pattern != nil {
		return r.Pattern
	}
	return n.Rules.Pattern
}

// enumOf intersects the enums of a use and of a type; nil means any value.
func enumOf(a, b []Literal) []Literal {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return intersect(a, b)
}

type jsontextRaw string

func (r jsontextRaw) MarshalJSON() ([]byte, error) { return []byte(r), nil }

var qualified = regexp.MustCompile(`[A-Za-z0-9_.\-]*/`)
var invalidName = regexp.MustCompile(`[^A-Za-z0-9_.\-]+`)

// defName names a recursive type in $defs: its Go name, made a valid
// reference (generic arguments kept readable), and qualified by package
// when two types share a name.
func (e *emitter) defName(n *Node) string {
	if name, ok := e.defs[n]; ok {
		return name
	}
	base := qualified.ReplaceAllString(n.Type.Name(), "")
	base = strings.Trim(invalidName.ReplaceAllString(base, "_"), "_")
	if base == "" {
		base = "T"
	}
	name := base
	if other, taken := e.names[name]; taken && other != n {
		pkg := n.Type.PkgPath()
		name = pkg[strings.LastIndexByte(pkg, '/')+1:] + "." + base
		for i := 2; e.names[name] != nil; i++ {
			name = base + "_" + strconv.Itoa(i)
		}
	}
	e.names[name] = n
	e.defs[n] = name
	e.queue = append(e.queue, n)
	return name
}

// object is a JSON object that keeps its keys in insertion order, so that
// schemas read the same every time.
type object struct {
	keys []string
	vals []any
}

func (o *object) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := jsonv2.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(append(b, kb...), ':')
		vb, err := jsonv2.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b = append(b, vb...)
	}
	return append(b, '}'), nil
}
