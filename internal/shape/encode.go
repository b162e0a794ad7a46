package shape

import (
	"encoding"
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// maxEncodeDepth bounds how deep the encoder follows values: a pointer
// cycle would otherwise recurse until the stack overflows, which no
// recover can catch.
const maxEncodeDepth = 1000

// Encode appends the JSON of v, a value of the type n models, to dst. It
// writes what the schema of n publishes, member for member: inline members
// flattened, byte arrays as arrays of integers, map keys sorted, nil slices
// and maps as [] and {}, durations in Go's syntax, times in RFC 3339. A
// value JSON cannot carry (a NaN, a year beyond 9999, invalid UTF-8, a
// pointer cycle) is an error naming where it is.
func Encode(dst []byte, n *Node, v reflect.Value) ([]byte, error) {
	e := encoder{buf: dst}
	e.value(n, v)
	if e.err != nil {
		slices.Reverse(e.where)
		if p := e.where.String(); p != "" {
			return dst, fmt.Errorf("%s %w", p, e.err)
		}
		return dst, e.err
	}
	return e.buf, nil
}

// encoder writes one value. It keeps no path on the way down, which would
// cost an allocation per value: a failure collects where it happened on
// the way back up, in where, innermost first.
type encoder struct {
	buf   []byte
	depth int
	err   error
	where path
}

func (e *encoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

// failed reports whether encoding has failed, adding s to where it did.
func (e *encoder) failed(s seg) bool {
	if e.err == nil {
		return false
	}
	e.where = append(e.where, s)
	return true
}

func (e *encoder) value(n *Node, v reflect.Value) {
	if e.err != nil {
		return
	}
	switch n.Kind {
	case KindBool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case KindInt:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case KindUint:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case KindFloat:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			e.fail("is %v, which JSON cannot carry", f)
			return
		}
		bits := n.Bits
		if bits == 32 && math.Abs(f) == math.MaxFloat32 {
			// The shortest float32 decimal, 3.4028235e+38, lies beyond
			// the float's exact value that the schema bounds the type
			// by; the float64 form is that value and reads back the same.
			bits = 64
		}
		e.buf = jsontext.AppendFloat(e.buf, f, bits)
	case KindString:
		e.str(v.String())
	case KindDuration:
		e.buf = append(e.buf, '"')
		e.buf = append(e.buf, time.Duration(v.Int()).String()...)
		e.buf = append(e.buf, '"')
	case KindTime:
		t := v.Interface().(time.Time)
		if y := t.Year(); y < 0 || y > 9999 {
			e.fail("is in the year %d, which RFC 3339 cannot write", y)
			return
		}
		e.buf = append(e.buf, '"')
		e.buf = t.AppendFormat(e.buf, time.RFC3339Nano)
		e.buf = append(e.buf, '"')
	case KindText:
		e.text(n, v)
	case KindBytes:
		b := v.Bytes()
		e.buf = append(e.buf, '"')
		e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
		e.buf = append(e.buf, '"')
	case KindPtr:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		if e.enter() {
			e.value(n.Elem, v.Elem())
			e.depth--
		}
	case KindStruct:
		if e.enter() {
			e.object(n, v)
			e.depth--
		}
	case KindSlice, KindArray:
		if e.enter() {
			e.array(n, v)
			e.depth--
		}
	case KindMap:
		if e.enter() {
			e.mapValue(n, v)
			e.depth--
		}
	case KindAny:
		if !v.IsValid() || v.Kind() == reflect.Interface && v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.free(v.Interface())
	case KindRaw:
		e.raw(v.Bytes())
	case KindOpaque:
		e.opaque(n, v)
	default:
		e.fail("has the type %s, which carmy cannot encode", n.Type)
	}
}

// enter counts one more level of nesting, failing past the bound.
func (e *encoder) enter() bool {
	e.depth++
	if e.depth > maxEncodeDepth {
		e.fail("is nested more than %d levels deep (a pointer cycle?)", maxEncodeDepth)
		return false
	}
	return true
}

func (e *encoder) object(n *Node, v reflect.Value) {
	e.buf = append(e.buf, '{')
	first := true
	for _, f := range n.Fields {
		fv := fieldOf(v, f)
		if !f.Required && f.Omit != OmitNever && omitted(f, fv) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		e.buf = append(e.buf, f.key...)
		e.value(f.Node, fv)
		if e.failed(seg{name: f.Name}) {
			return
		}
	}
	e.buf = append(e.buf, '}')
}

var zeroer = reflect.TypeFor[interface{ IsZero() bool }]()

// omitted reports whether an optional member is left out. omitempty keeps
// encoding/json's meaning, which is also what decoding the absent member
// gives back: false, 0, "", nil, and empty slices, maps and arrays.
func omitted(f *Field, v reflect.Value) bool {
	if f.Omit == OmitZero {
		if v.Type().Implements(zeroer) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
			return v.Interface().(interface{ IsZero() bool }).IsZero()
		}
		return v.IsZero()
	}
	switch v.Kind() {
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

func (e *encoder) array(n *Node, v reflect.Value) {
	e.buf = append(e.buf, '[')
	for i := range v.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.value(n.Elem, v.Index(i))
		if e.failed(seg{index: i}) {
			return
		}
	}
	e.buf = append(e.buf, ']')
}

// mapValue writes a map with its keys sorted, so that one value always
// encodes the same: replays and digests compare bytes.
func (e *encoder) mapValue(n *Node, v reflect.Value) {
	e.buf = append(e.buf, '{')
	if v.Len() == 0 {
		e.buf = append(e.buf, '}')
		return
	}
	keys := make([]reflect.Value, 0, v.Len())
	iter := v.MapRange()
	for iter.Next() {
		keys = append(keys, iter.Key())
	}
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(k.String())
		e.buf = append(e.buf, ':')
		e.value(n.Elem, v.MapIndex(k))
		if e.failed(seg{name: k.String(), isKey: true}) {
			return
		}
	}
	e.buf = append(e.buf, '}')
}

// str writes a JSON string, escaping only what JSON requires.
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			var err error
			if e.buf, err = jsontext.AppendQuote(e.buf, s); err != nil {
				e.fail("is not valid UTF-8")
			}
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

func (e *encoder) text(n *Node, v reflect.Value) {
	if n.Type == uuidType {
		var u uuid.UUID
		reflect.ValueOf(&u).Elem().Set(v)
		e.buf = appendUUID(e.buf, u)
		return
	}
	b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		e.fail("cannot be written as text: %v", err)
		return
	}
	if !utf8.Valid(b) {
		e.fail("is not valid UTF-8 text")
		return
	}
	e.str(string(b))
}

// free writes a free-form value (an interface), whose schema allows any
// JSON: the JSON library's own encoding is right for it.
func (e *encoder) free(x any) {
	b, err := jsonv2.Marshal(x, jsonv2.Deterministic(true))
	if err != nil {
		e.fail("cannot be encoded: %v", err)
		return
	}
	e.buf = append(e.buf, b...)
}

// opaque writes a value of a type with its own JSON by its own methods,
// and checks what they wrote against the declared schema.
func (e *encoder) opaque(n *Node, v reflect.Value) {
	if !v.CanAddr() {
		// A MarshalJSON with a pointer receiver needs an addressable value.
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p.Elem()
	}
	b, err := jsonv2.Marshal(v.Addr().Interface(), jsonv2.Deterministic(true))
	if err != nil {
		e.fail("cannot be encoded: %v", err)
		return
	}
	if problems := n.Opaque.Validate(b); len(problems) > 0 {
		if problems[0].Path != "" {
			e.fail("%s %s", problems[0].Path, problems[0].Message)
		} else {
			e.fail("%s", problems[0].Message)
		}
		return
	}
	e.raw(b)
}

// raw writes JSON held as bytes, after checking that it is JSON.
func (e *encoder) raw(b []byte) {
	if len(b) == 0 {
		e.buf = append(e.buf, "null"...)
		return
	}
	start := len(e.buf)
	var err error
	if e.buf, err = jsontext.AppendFormat(e.buf, b); err != nil {
		e.buf = e.buf[:start]
		e.fail("is not valid JSON: %v", err)
	}
}

func quote(dst []byte, s string) []byte {
	out, _ := jsontext.AppendQuote(dst, s) // invalid UTF-8 in a tag becomes U+FFFD
	return out
}

// appendUUID writes u quoted in its canonical form, as its String method
// does, without the allocation.
func appendUUID(dst []byte, u uuid.UUID) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hex[b>>4], hex[b&0xf])
	}
	return append(dst, '"')
}
