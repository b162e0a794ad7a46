package policy

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/go-json-experiment/json/jsontext"
)

// kind is the Cedar type a JSON Schema type maps to.
type kind uint8

const (
	kindAny     kind = iota // no one Cedar type: mapped by the value, left out of the schema
	kindString              // String
	kindLong                // Long
	kindDecimal             // decimal
	kindBool                // Bool
	kindRecord              // a record with declared attributes
	kindSet                 // Set of items
	kindMap                 // an object of any keys: a Record by the value, left out of the schema
)

// typ is the Cedar view of a tool input's JSON Schema: what the mapping
// of a value follows, and what the tool's Cedar schema declares.
type typ struct {
	kind  kind
	attrs []attr // kindRecord, sorted by name
	items *typ   // kindSet
	// absent: a value of this type may map to nothing (null, a number
	// Cedar cannot hold exactly), so an attribute of it is optional.
	absent bool
}

type attr struct {
	name     string
	t        *typ
	required bool // required by the JSON Schema and never absent
}

// schemaDoc is the part of a JSON Schema the mapping reads.
type schemaDoc struct {
	Type                 json.RawMessage       `json:"type"`
	Properties           map[string]*schemaDoc `json:"properties"`
	Required             []string              `json:"required"`
	Items                *schemaDoc            `json:"items"`
	AdditionalProperties json.RawMessage       `json:"additionalProperties"`
	Minimum              *json.Number          `json:"minimum"`
	Maximum              *json.Number          `json:"maximum"`
}

// typeOf reads a tool's JSON input schema; a schema it cannot read is an
// input of any shape, mapped by its values alone.
func typeOf(schema []byte) *typ {
	var d schemaDoc
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return &typ{kind: kindAny, absent: true}
	}
	return d.typ(0)
}

// maxDepth bounds the schemas and values the mapping follows: deeper
// parts are left out (they stay in input_json).
const maxDepth = 32

func (d *schemaDoc) typ(depth int) *typ {
	if d == nil || depth > maxDepth {
		return &typ{kind: kindAny, absent: true}
	}
	var names []string
	var one string
	if err := json.Unmarshal(d.Type, &one); err == nil {
		names = []string{one}
	} else {
		_ = json.Unmarshal(d.Type, &names)
	}
	t := &typ{}
	if i := slices.Index(names, "null"); i >= 0 {
		names = slices.Delete(names, i, i+1)
		t.absent = true
	}
	if len(names) != 1 {
		t.kind, t.absent = kindAny, true
		return t
	}
	switch names[0] {
	case "string":
		t.kind = kindString
	case "boolean":
		t.kind = kindBool
	case "integer":
		t.kind = kindLong
		// An integer beyond int64 is left out: only bounds within it
		// promise a value.
		if !within64(d.Minimum) || !within64(d.Maximum) {
			t.absent = true
		}
	case "number":
		t.kind, t.absent = kindDecimal, true
	case "array":
		t.kind, t.items = kindSet, d.Items.typ(depth+1)
		t.absent = t.absent || t.items.absent
	case "object":
		if len(d.Properties) == 0 && string(d.AdditionalProperties) != "false" {
			t.kind = kindMap
			return t
		}
		t.kind = kindRecord
		for name, p := range d.Properties {
			at := p.typ(depth + 1)
			t.attrs = append(t.attrs, attr{name: name, t: at, required: slices.Contains(d.Required, name) && !at.absent})
		}
		slices.SortFunc(t.attrs, func(a, b attr) int { return strings.Compare(a.name, b.name) })
	default:
		t.kind, t.absent = kindAny, true
	}
	return t
}

func within64(n *json.Number) bool {
	if n == nil {
		return false
	}
	_, err := strconv.ParseInt(string(*n), 10, 64)
	return err == nil
}

// Value maps a JSON value to Cedar by the value alone, as the mapping
// does where the schema declares no one type: strings are String,
// integers within int64 Long, other numbers decimal where exact, booleans
// Bool, objects Record, arrays Set; null, and a number Cedar cannot hold
// exactly, are absent (ok false). An array with an absent element is
// absent.
func Value(raw []byte) (types.Value, bool) {
	d := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(d)
	d.Reset(bytes.NewReader(raw))
	v, ok, err := decodeValue(d, anyType, 0)
	if err != nil {
		return nil, false
	}
	if _, err := d.ReadToken(); err != io.EOF { // one value, and nothing after it
		return nil, false
	}
	return v, ok
}

var anyType = &typ{kind: kindAny, absent: true}

var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }} // Reset before each use

// decodeValue reads one JSON value and maps it by the type t expects; ok
// is false for a value that maps to nothing. Parts deeper than maxDepth
// are left out.
func decodeValue(d *jsontext.Decoder, t *typ, depth int) (types.Value, bool, error) {
	if depth > maxDepth {
		return nil, false, d.SkipValue()
	}
	switch d.PeekKind() {
	case '[':
		return decodeSet(d, t, depth)
	case '{':
		return decodeRecord(d, t, depth)
	}
	tok, err := d.ReadToken()
	if err != nil {
		return nil, false, err
	}
	switch tok.Kind() {
	case '"':
		if t.kind != kindString && t.kind != kindAny {
			return nil, false, nil
		}
		return types.String(tok.String()), true, nil
	case 't', 'f':
		if t.kind != kindBool && t.kind != kindAny {
			return nil, false, nil
		}
		return types.Boolean(tok.Bool()), true, nil
	case '0':
		n := tok.String()
		switch t.kind {
		case kindLong:
			v, ok := long(n)
			return v, ok, nil
		case kindDecimal:
			v, ok := decimal(n)
			return v, ok, nil
		case kindAny:
			if l, ok := long(n); ok {
				return l, true, nil
			}
			v, ok := decimal(n)
			return v, ok, nil
		}
	}
	return nil, false, nil // null, or not of the declared type
}

func decodeSet(d *jsontext.Decoder, t *typ, depth int) (types.Value, bool, error) {
	if t.kind != kindSet && t.kind != kindAny {
		return nil, false, d.SkipValue()
	}
	items := t.items
	if items == nil {
		items = anyType
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, err
	}
	var vals []types.Value
	all := true
	for d.PeekKind() != ']' {
		v, ok, err := decodeValue(d, items, depth+1)
		if err != nil {
			return nil, false, err
		}
		// A set without one of its elements would say something else.
		all = all && ok
		if all {
			vals = append(vals, v)
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, err
	}
	if !all {
		return nil, false, nil
	}
	return types.NewSet(vals...), true, nil
}

func decodeRecord(d *jsontext.Decoder, t *typ, depth int) (types.Value, bool, error) {
	if t.kind != kindRecord && t.kind != kindMap && t.kind != kindAny {
		return nil, false, d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, err
	}
	m := types.RecordMap{}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, false, err
		}
		key := name.String()
		at := anyType
		if t.kind == kindRecord {
			i, found := slices.BinarySearchFunc(t.attrs, key, func(a attr, k string) int { return strings.Compare(a.name, k) })
			if !found {
				if err := d.SkipValue(); err != nil {
					return nil, false, err
				}
				continue
			}
			at = t.attrs[i].t
		}
		v, ok, err := decodeValue(d, at, depth+1)
		if err != nil {
			return nil, false, err
		}
		if ok {
			m[types.String(key)] = v
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, false, err
	}
	return types.NewRecord(m), true, nil
}

// long is an integer within int64, written in any JSON form ("5", "5.0",
// "5e0").
func long(n string) (types.Value, bool) {
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return types.Long(i), true
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return nil, false
	}
	return types.Long(r.Num().Int64()), true
}

// decimalScale is Cedar's decimal: four digits after the point.
var decimalScale = big.NewInt(10_000)

// decimal is a number that Cedar's decimal holds exactly: at most four
// digits after the point, within its range.
func decimal(s string) (types.Value, bool) {
	if !strings.ContainsAny(s, "eE") {
		whole, frac, _ := strings.Cut(s, ".")
		frac = strings.TrimRight(frac, "0")
		if len(frac) <= 4 && len(whole) <= 15 {
			i, err := strconv.ParseInt(whole+frac+strings.Repeat("0", 4-len(frac)), 10, 64)
			if err == nil {
				d, err := types.NewDecimal(i, -4)
				return d, err == nil
			}
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, false
	}
	r.Mul(r, new(big.Rat).SetInt(decimalScale))
	if !r.IsInt() || !r.Num().IsInt64() {
		return nil, false
	}
	d, err := types.NewDecimal(r.Num().Int64(), -4)
	return d, err == nil
}

// input is a tool input's Cedar record: the validated JSON input mapped
// by the tool's type. An input that is not a JSON object is an empty
// record.
func input(t *typ, raw []byte) types.Record {
	d := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(d)
	d.Reset(bytes.NewReader(raw))
	if d.PeekKind() != '{' {
		return types.Record{}
	}
	if t.kind != kindRecord {
		t = &typ{kind: kindMap}
	}
	v, ok, err := decodeValue(d, t, 0)
	if err != nil || !ok {
		return types.Record{}
	}
	return v.(types.Record)
}
