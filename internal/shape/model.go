// Package shape turns Go types into the one model that carmy derives
// everything from: the published JSON Schema, the strict decoder and the
// rule checks. Deriving all three from one model is what keeps the promise
// that the runtime accepts exactly what the schema allows.
package shape

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// Kind is how a Go type travels as JSON.
type Kind uint8

// The kinds of node.
const (
	KindBool     Kind = iota + 1
	KindInt           // signed integer, Bits wide
	KindUint          // unsigned integer, Bits wide
	KindFloat         // Bits wide
	KindString        // a Go string kind
	KindText          // a string decoded by UnmarshalText (uuid.UUID and the like)
	KindTime          // time.Time as an RFC 3339 string
	KindBytes         // []byte as base64
	KindStruct        // an object with fixed members
	KindSlice         // an array of any length
	KindArray         // an array of exactly Len items
	KindMap           // an object with string keys and Elem values
	KindPtr           // a nullable Elem
	KindAny           // any JSON value, decoded into an empty interface
	KindRaw           // any JSON value, kept as raw bytes
	KindDuration      // time.Duration as a string in Go's syntax ("1h30m")
	KindOpaque        // a type with its own JSON and its own schema
)

// Node is the model of one Go type. Nodes are built once per type, shared,
// and never modified after [Of] returns them.
type Node struct {
	Kind   Kind
	Type   reflect.Type
	Bits   int   // integer and float width
	Elem   *Node // pointer, slice, array, map
	Len    int   // array length
	Fields []*Field
	byName map[string]*Field

	// Rules holds constraints the type itself declares (JSONSchemaExtend).
	Rules Rules
	// Desc and Title are the type's descriptions.
	Desc, Title string
	// Format annotates string kinds: "date-time", "uuid".
	Format string
	// Recursive marks a named type that contains itself; only such types
	// go to $defs.
	Recursive bool
	// Opaque is the declared schema of a type with its own JSON.
	Opaque *Opaque

	// checked is true when a value of this type, anywhere below, has rules
	// to check after decoding.
	checked bool
}

// Field is one member of a struct node.
type Field struct {
	Name     string // JSON member name
	GoName   string
	Index    []int
	Pos      int // position in the struct node's Fields
	Node     *Node
	Required bool // the key must be present
	Nullable bool // null is allowed (pointer fields)
	Rules    Rules
	Desc     string
	Title    string
	Default  any
	Examples []any
	// Runtime is the validator tag for the rules carmy does not enforce
	// itself; "" when there are none. Cross marks rules that need the
	// enclosing struct (eqfield and the like).
	Runtime string
	Cross   bool
	// RequestID marks the field tagged carmy:"request_id", whose value is
	// the call's request id when the transport gives none.
	RequestID bool
	// Header is the HTTP header that mirrors the field's value, from the
	// tag carmy:"header=Name": MCP clients send it as Mcp-Param-Name
	// beside the body, and the schema publishes it as x-mcp-header.
	Header string
	// Omit says when the encoder leaves the member out: never, when its
	// value is empty (omitempty) or when it is zero (omitzero). A required
	// member is always written, whatever the tag says.
	Omit Omit
	key  []byte // the quoted name and a colon, as the encoder writes them
}

// Omit is when an optional struct member is left out of an encoding.
type Omit uint8

// The omit modes.
const (
	OmitNever Omit = iota
	OmitEmpty      // json:",omitempty": false, 0, "", a nil pointer, an empty slice, map or string
	OmitZero       // json:",omitzero": the zero value, or IsZero() reporting true
)

// RequestIDHint ends the description of a field tagged
// carmy:"request_id", so that a model knows what to send in it.
const RequestIDHint = "A request id for this action: 1 to 255 printable ASCII characters (! to ~), new for each new action. Reuse the same value when you retry this call, so that it runs once."

// Lookup returns the struct member with the exact JSON name.
func (n *Node) Lookup(name string) (*Field, bool) {
	f, ok := n.byName[name]
	return f, ok
}

// Checked reports whether values of this type carry rules to check.
func (n *Node) Checked() bool { return n.checked }

// Names returns the JSON member names of a struct node, in field order.
func (n *Node) Names() []string {
	names := make([]string, len(n.Fields))
	for i, f := range n.Fields {
		names[i] = f.Name
	}
	return names
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	durationType      = reflect.TypeFor[time.Duration]()
	uuidType          = reflect.TypeFor[uuid.UUID]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	jsontextValueType = reflect.TypeFor[jsontext.Value]()
	textMarshaler     = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonMarshalers    = []reflect.Type{
		reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler](),
		reflect.TypeFor[jsonv2.MarshalerTo](), reflect.TypeFor[jsonv2.UnmarshalerFrom](),
	}
)

// durationPattern is the syntax time.ParseDuration reads: a sign, then 0 or
// decimal numbers each with a unit. The range (about ±2562047h) is beyond
// what a pattern can say: a longer duration matches it and is refused with
// a message saying so.
const durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// durationDesc describes a time.Duration whose type has no description.
const durationDesc = `A duration in Go's syntax: a sequence of decimal numbers, each with a unit (ns, us, ms, s, m, h), such as "1h30m", "250ms" or "0s".`

var cache struct {
	sync.Mutex
	nodes map[reflect.Type]*Node
	errs  map[reflect.Type]error
}

// Of returns the model of t, built once and cached. The error joins every
// problem found anywhere in the type, each naming where it is.
func Of(t reflect.Type) (*Node, error) {
	cache.Lock()
	defer cache.Unlock()
	if n, ok := cache.nodes[t]; ok {
		return n, nil
	}
	if err, ok := cache.errs[t]; ok {
		return nil, err
	}
	b := builder{building: map[reflect.Type]*Node{}, active: map[reflect.Type]bool{}}
	n := b.node(t, t.String())
	if err := errors.Join(b.errs...); err != nil {
		if cache.errs == nil {
			cache.errs = map[reflect.Type]error{}
		}
		cache.errs[t] = err
		return nil, err
	}
	for changed := true; changed; {
		// A pass sees a node of a cycle before the nodes after it are
		// marked ([]Expr inside Expr): repeat until nothing changes.
		changed = false
		markChecked(n, map[*Node]bool{}, &changed)
	}
	for _, sn := range b.structs {
		requireZeroBreaking(sn)
	}
	if cache.nodes == nil {
		cache.nodes = map[reflect.Type]*Node{}
	}
	for t, n := range b.building {
		if _, ok := cache.nodes[t]; !ok {
			cache.nodes[t] = n
		}
	}
	cache.nodes[t] = n
	return n, nil
}

// Reset forgets every cached model, so that descriptions registered since
// are picked up.
func Reset() {
	cache.Lock()
	defer cache.Unlock()
	cache.nodes, cache.errs = nil, nil
	schemas.Clear()
}

type builder struct {
	building map[reflect.Type]*Node
	active   map[reflect.Type]bool // named types whose build has not returned
	structs  []*Node               // every struct node built
	errs     []error
}

func (b *builder) fail(where, format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
}

func (b *builder) node(t reflect.Type, where string) *Node {
	if n, ok := cache.nodes[t]; ok {
		return n
	}
	if n, ok := b.building[t]; ok {
		if b.active[t] {
			n.Recursive = true
		}
		return n
	}
	if t.Name() == "" {
		return b.build(t, where, &Node{Type: t})
	}
	n := &Node{Type: t}
	b.building[t] = n
	b.active[t] = true
	defer delete(b.active, t)
	return b.build(t, where, n)
}

func (b *builder) build(t reflect.Type, where string, n *Node) *Node {
	n.Desc = comment(t, "")
	switch {
	case t == timeType:
		n.Kind, n.Format = KindTime, "date-time"
		return n
	case t == uuidType:
		n.Kind, n.Format = KindText, "uuid"
		return n
	case t == durationType:
		n.Kind = KindDuration
		if n.Desc == "" {
			n.Desc = durationDesc
		}
		return n
	case t == rawMessageType || t == jsontextValueType:
		n.Kind = KindRaw
		return n
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface {
		for _, m := range jsonMarshalers {
			if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
				o, err := opaqueOf(t)
				if err != nil {
					b.fail(where, "%v", err)
					return n
				}
				n.Kind, n.Opaque = KindOpaque, o
				return n
			}
		}
		if t.Implements(textMarshaler) && reflect.PointerTo(t).Implements(textUnmarshaler) {
			n.Kind = KindText
			b.extend(t, where, n)
			return n
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		n.Kind = KindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n.Kind, n.Bits = KindInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.Kind, n.Bits = KindUint, t.Bits()
	case reflect.Uintptr:
		b.fail(where, "type %s is a uintptr; use a sized integer type", t)
	case reflect.Float32, reflect.Float64:
		n.Kind, n.Bits = KindFloat, t.Bits()
	case reflect.String:
		n.Kind = KindString
	case reflect.Complex64, reflect.Complex128:
		b.fail(where, "type %s is a complex number, which JSON cannot carry; use two float64 fields", t)
	case reflect.Chan:
		b.fail(where, "type %s is a channel, which JSON cannot carry", t)
	case reflect.Func:
		b.fail(where, "type %s is a func, which JSON cannot carry", t)
	case reflect.UnsafePointer:
		b.fail(where, "type %s is an unsafe.Pointer, which JSON cannot carry", t)
	case reflect.Interface:
		if t.NumMethod() != 0 {
			b.fail(where, "type %s is an interface with methods; carmy cannot know which concrete type to decode: use a struct, or any for free-form JSON", t)
		}
		n.Kind = KindAny
	case reflect.Pointer:
		n.Kind = KindPtr
		n.Elem = b.node(t.Elem(), where)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !t.Elem().Implements(textMarshaler) {
			n.Kind = KindBytes
			break
		}
		n.Kind = KindSlice
		n.Elem = b.node(t.Elem(), where+"[]")
	case reflect.Array:
		n.Kind, n.Len = KindArray, t.Len()
		n.Elem = b.node(t.Elem(), where+"[]")
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key().Implements(textMarshaler) {
			b.fail(where, "type %s has keys of type %s; JSON object keys are strings: use map[string]%s", t, t.Key(), t.Elem())
			return n
		}
		n.Kind = KindMap
		n.Elem = b.node(t.Elem(), where+"[]")
	case reflect.Struct:
		n.Kind = KindStruct
		b.structFields(t, where, n)
		b.structs = append(b.structs, n)
	}
	b.extend(t, where, n)
	return n
}

// extend applies a type's JSONSchemaExtend method, if it has one.
func (b *builder) extend(t reflect.Type, where string, n *Node) {
	if err := applyExtend(t, n); err != nil {
		b.fail(where, "%v", err)
	}
}

type candidate struct {
	f      *Field
	depth  int
	tagged bool
}

func (b *builder) structFields(t reflect.Type, where string, n *Node) {
	var all []candidate
	b.collect(t, where, nil, 0, &all, map[reflect.Type]bool{t: true})
	// Go's rule, as encoding/json applies it: of the fields that share a
	// name, the shallowest wins, a tagged one breaking a tie; a remaining
	// tie is an error here, where encoding/json would silently drop both.
	slices.SortStableFunc(all, func(x, y candidate) int {
		if c := strings.Compare(x.f.Name, y.f.Name); c != 0 {
			return c
		}
		if x.depth != y.depth {
			return x.depth - y.depth
		}
		if x.tagged != y.tagged {
			if x.tagged {
				return -1
			}
			return 1
		}
		return 0
	})
	var kept []*Field
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].f.Name == all[i].f.Name {
			j++
		}
		if j-i > 1 && all[i].depth == all[i+1].depth && all[i].tagged == all[i+1].tagged {
			b.fail(where, "fields %s and %s both have the JSON name %q; rename one with a json tag", all[i].f.GoName, all[i+1].f.GoName, all[i].f.Name)
		} else {
			kept = append(kept, all[i].f)
		}
		i = j
	}
	slices.SortFunc(kept, func(x, y *Field) int { return slices.Compare(x.Index, y.Index) })
	n.Fields = kept
	n.byName = make(map[string]*Field, len(kept))
	for i, f := range kept {
		f.Pos = i
		n.byName[f.Name] = f
	}
	if len(kept) == 0 && t.NumField() > 0 && !hasJSONTag(t) {
		b.fail(where, "type %s has no exported fields, so it would encode as {} and lose its data; export the fields or tag them", t)
	}
}

func hasJSONTag(t reflect.Type) bool {
	for i := range t.NumField() {
		if _, ok := t.Field(i).Tag.Lookup("json"); ok {
			return true
		}
	}
	return false
}

func (b *builder) collect(t reflect.Type, where string, index []int, depth int, out *[]candidate, seen map[reflect.Type]bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		fwhere := where + "." + sf.Name
		tag, hasTag := sf.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" { // json:"-," names a member "-"
			continue
		}
		if sf.Tag.Get("jsonschema") == "-" {
			b.fail(fwhere, "jsonschema:\"-\" would hide a field that JSON still carries; use json:\"-\"")
			continue
		}
		idx := append(slices.Clone(index), i)
		embed := sf.Anonymous && name == ""
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "", "omitempty", "omitzero":
			case "inline", "embed":
				embed = true
			case "string":
				b.fail(fwhere, "the json option \",string\" is not supported; use a string field and convert it in the tool")
			default:
				b.fail(fwhere, "the json option %q is not supported", o)
			}
		}
		if embed {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				b.fail(fwhere, "embedded pointer %s is not supported; embed %s by value or give the field a json name", et, et.Elem())
				continue
			}
			if et.Kind() != reflect.Struct {
				if !sf.IsExported() {
					continue
				}
				b.fail(fwhere, "embedded %s is not a struct; give the field a json name", et)
				continue
			}
			if seen[et] {
				b.fail(fwhere, "embedded %s embeds itself", et)
				continue
			}
			seen[et] = true
			b.collect(et, where, idx, depth+1, out, seen)
			delete(seen, et)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := &Field{Name: name, GoName: sf.Name, Index: idx}
		f.Node = b.node(sf.Type, fwhere)
		switch {
		case strings.Contains(","+opts+",", ",omitzero,"):
			f.Omit = OmitZero
		case strings.Contains(","+opts+",", ",omitempty,"):
			f.Omit = OmitEmpty
		}
		f.Required = f.Omit == OmitNever && sf.Type.Kind() != reflect.Pointer
		f.key = append(quote(nil, name), ':')
		f.Nullable = sf.Type.Kind() == reflect.Pointer
		b.fieldTags(sf, fwhere, f, t)
		*out = append(*out, candidate{f: f, depth: depth, tagged: hasTag && name != ""})
	}
}

// fieldTags reads the validate and jsonschema tags and the comments of a
// field into f.
func (b *builder) fieldTags(sf reflect.StructField, where string, f *Field, owner reflect.Type) {
	if err := parseValidate(sf.Tag.Get("validate"), f); err != nil {
		b.fail(where, "%v", err)
	}
	if err := parseSchemaTag(sf.Tag.Get("jsonschema"), f); err != nil {
		b.fail(where, "%v", err)
	}
	if f.Runtime != "" && !f.Cross {
		if err := probeRuntime(sf.Type, f.Runtime); err != nil {
			b.fail(where, "%v", err)
		}
	}
	if d, ok := sf.Tag.Lookup("jsonschema_description"); ok {
		f.Desc = d
	}
	if f.Desc == "" {
		f.Desc = comment(owner, sf.Name)
	}
	switch tag := sf.Tag.Get("carmy"); tag {
	case "":
	case "request_id":
		f.RequestID = true
		if f.Desc != "" {
			f.Desc += " "
		}
		f.Desc += RequestIDHint
	default:
		name, ok := strings.CutPrefix(tag, "header=")
		if !ok {
			b.fail(where, "unknown carmy tag %q; carmy's tags are carmy:\"request_id\" and carmy:\"header=Name\"", tag)
			break
		}
		if err := CheckHeaderName(name); err != nil {
			b.fail(where, "carmy tag %q: %v", tag, err)
			break
		}
		f.Header = name
	}
}

// requireZeroBreaking makes every optional field of a struct node whose
// zero value breaks a rule required. Such a field cannot really be left
// out: the runtime would reject the zero value it decodes to, whether the
// broken rule is the field's own or one inside it (an omitzero struct with
// a required member). The schema says so by requiring it. It needs the
// checked marks, so it runs once the whole type is built.
func requireZeroBreaking(n *Node) {
	for _, f := range n.Fields {
		if !f.Required && !f.Nullable && zeroBreaks(f) {
			f.Required = true
		}
	}
}

// markChecked computes, bottom up, which nodes carry rules below them, and
// reports through changed whether it marked a node that was not marked.
func markChecked(n *Node, visiting map[*Node]bool, changed *bool) bool {
	if visiting[n] {
		return n.checked
	}
	visiting[n] = true
	c := !n.Rules.empty()
	if n.Elem != nil && markChecked(n.Elem, visiting, changed) {
		c = true
	}
	for _, f := range n.Fields {
		if markChecked(f.Node, visiting, changed) || !f.Rules.empty() || f.Runtime != "" {
			c = true
		}
	}
	if n.Recursive {
		// A recursive type may reach rules only through itself; checking
		// it is cheap compared to getting that wrong.
		c = c || len(n.Fields) > 0
	}
	c = c || n.checked
	if c != n.checked {
		// Write only on a change: nodes cached by an earlier Of are
		// shared with running tools, which read checked without a lock.
		*changed = true
		n.checked = c
	}
	return c
}

// Deref follows pointer nodes to the value they point to.
func (n *Node) Deref() *Node {
	for n.Kind == KindPtr {
		n = n.Elem
	}
	return n
}
