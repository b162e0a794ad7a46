package shape

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/carmy-dev/carmy/internal/canon"
)

// Decode decodes data, a JSON object, into dst, an addressable value of the
// struct type n models. It is strict: names match exactly, unknown members,
// duplicate names, invalid UTF-8, trailing data, wrong types, missing
// required members and null where the schema forbids it are all problems.
// It reports every problem it can find; a malformed document stops at its
// first syntax error. Empty input and null count as {}. Fatal reports that
// the document was malformed or not an object, so that dst holds nothing
// worth checking further.
func Decode(n *Node, data []byte, dst reflect.Value) (problems []Problem, fatal bool) {
	if isBlank(data) || string(bytes.Trim(data, " \t\r\n")) == "null" {
		data = emptyObject
	}
	d := decoders.Get().(*decoder)
	d.buf = *bytes.NewBuffer(data)
	d.dec.Reset(&d.buf)
	d.problems, d.path = d.problems[:0], d.path[:0]
	fatal = !d.root(n, dst)
	problems = d.problems
	d.problems = nil
	d.buf = bytes.Buffer{}
	decoders.Put(d)
	return problems, fatal
}

// DecodeValue decodes data, one JSON value of any kind, into dst, an
// addressable value of the type n models, as strictly as Decode decodes an
// input. It reads what Encode writes: a tool's output.
func DecodeValue(n *Node, data []byte, dst reflect.Value) []Problem {
	d := decoders.Get().(*decoder)
	d.buf = *bytes.NewBuffer(data)
	d.dec.Reset(&d.buf)
	d.problems, d.path, d.syntax = d.problems[:0], d.path[:0], false
	d.value(n, nil, dst)
	if !d.syntax {
		if _, err := d.dec.ReadToken(); err != io.EOF {
			if err == nil {
				err = errors.New("unexpected data after the value")
			}
			d.fail(err)
		}
	}
	problems := d.problems
	d.problems = nil
	d.buf = bytes.Buffer{}
	decoders.Put(d)
	return problems
}

var emptyObject = []byte("{}")

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

var decoders = sync.Pool{New: func() any { return &decoder{dec: jsontext.NewDecoder(bytes.NewReader(nil))} }}

type decoder struct {
	buf      bytes.Buffer
	dec      *jsontext.Decoder
	problems []Problem
	path     path
	syntax   bool // a syntax error ended decoding
	scratch  []byte
	strs     stringCache
}

func (d *decoder) add(msg string) {
	d.problems = append(d.problems, Problem{Path: d.path.String(), Message: msg})
}

func (d *decoder) addf(format string, args ...any) { d.add(fmt.Sprintf(format, args...)) }

// fail records a syntax error, replacing every other problem: once the
// document is malformed nothing else said about it can be trusted.
func (d *decoder) fail(err error) {
	if d.syntax {
		return
	}
	d.syntax = true
	msg := "malformed JSON: " + err.Error()
	at := d.dec.StackPointer()
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg = fmt.Sprintf("malformed JSON at byte %d: %v", se.ByteOffset, se.Err)
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			at = se.JSONPointer // the repeated name, not the member before it
		}
	} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "malformed JSON: the document ends early"
	}
	d.problems = append(d.problems[:0], Problem{Path: d.pointerPath(at), Message: msg})
}

func (d *decoder) pointerPath(at jsontext.Pointer) string {
	var p path
	for tok := range at.Tokens() {
		if i, err := strconv.Atoi(tok); err == nil && d.isArrayToken(len(p)) {
			p = append(p, seg{index: i})
			continue
		}
		p = append(p, seg{name: tok})
	}
	return p.String()
}

func (d *decoder) isArrayToken(i int) bool {
	k, _ := d.dec.StackIndex(i + 1)
	return k == '['
}

// root decodes the top-level object and reports whether it was one.
func (d *decoder) root(n *Node, v reflect.Value) bool {
	d.syntax = false
	switch k := d.dec.PeekKind(); {
	case n.Kind == KindOpaque && k != 0:
		d.opaque(n, v) // its declared schema says what the root may be
	case k == '{':
		d.object(n, v)
	case k == 0:
		_, err := d.dec.ReadToken()
		d.fail(err)
		return false
	default:
		d.skip()
		if !d.syntax {
			d.addf("the input must be a JSON object, not %s", kindNoun(k))
		}
		return false
	}
	if d.syntax {
		return false
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the top-level object")
		}
		d.fail(err)
		return false
	}
	return true
}

// skip consumes the next value.
func (d *decoder) skip() {
	if err := d.dec.SkipValue(); err != nil {
		d.fail(err)
	}
}

func (d *decoder) readValue() (jsontext.Value, bool) {
	v, err := d.dec.ReadValue()
	if err != nil {
		d.fail(err)
		return nil, false
	}
	return v, true
}

func kindNoun(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "nothing"
}

// want names what a node's values look like, for messages.
func want(n *Node) string {
	switch n.Kind {
	case KindBool:
		return "a boolean"
	case KindInt, KindUint:
		return "an integer"
	case KindFloat:
		return "a number"
	case KindString, KindText:
		return "a string"
	case KindDuration:
		return "a duration string such as \"1h30m\""
	case KindTime:
		return "an RFC 3339 date-time string"
	case KindBytes:
		return "a base64 string"
	case KindStruct, KindMap:
		return "an object"
	case KindSlice, KindArray:
		return "an array"
	case KindPtr:
		return want(n.Elem)
	}
	return "a JSON value"
}

// mismatch consumes a value of the wrong kind and says what was expected.
func (d *decoder) mismatch(n *Node, k jsontext.Kind) {
	d.skip()
	if !d.syntax {
		d.addf("must be %s, not %s", want(n), kindNoun(k))
	}
}

// value decodes the next value into v, which has the type n models; r holds
// the rules of its use, nil when there are none.
func (d *decoder) value(n *Node, r *Rules, v reflect.Value) {
	k := d.dec.PeekKind()
	if k == 0 {
		d.skip()
		return
	}
	if n.Kind == KindOpaque {
		d.opaque(n, v)
		return
	}
	if k == 'n' {
		switch n.Kind {
		case KindPtr, KindAny:
			d.skip()
			v.SetZero()
		case KindRaw:
			d.raw(v)
		default:
			d.mismatch(n, k)
		}
		return
	}
	switch n.Kind {
	case KindPtr:
		if v.IsNil() {
			v.Set(reflect.New(n.Type.Elem()))
		}
		d.value(n.Elem, r, v.Elem())
	case KindStruct:
		if k != '{' {
			d.mismatch(n, k)
			return
		}
		d.object(n, v)
	case KindSlice, KindArray:
		if k != '[' {
			d.mismatch(n, k)
			return
		}
		d.array(n, r, v)
	case KindMap:
		if k != '{' {
			d.mismatch(n, k)
			return
		}
		d.mapValue(n, r, v)
	case KindBool:
		if k != 't' && k != 'f' {
			d.mismatch(n, k)
			return
		}
		d.readValue()
		v.SetBool(k == 't')
	case KindInt, KindUint, KindFloat:
		if k != '0' {
			d.mismatch(n, k)
			return
		}
		raw, ok := d.readValue()
		if ok {
			d.number(n, r, raw, v)
		}
	case KindString, KindText, KindTime, KindBytes, KindDuration:
		if k != '"' {
			d.mismatch(n, k)
			return
		}
		raw, ok := d.readValue()
		if ok {
			d.text(n, raw, v)
		}
	case KindAny:
		if x, ok := d.freeValue(); ok {
			v.Set(reflect.ValueOf(&x).Elem())
		}
	case KindRaw:
		d.raw(v)
	}
}

// opaque decodes a value of a type with its own JSON: checked against its
// declared schema, then read by the type's own UnmarshalJSON.
func (d *decoder) opaque(n *Node, v reflect.Value) {
	raw, ok := d.readValue()
	if !ok {
		return
	}
	if problems := n.Opaque.problems(raw, d.path); len(problems) > 0 {
		d.problems = append(d.problems, problems...)
		return
	}
	// The type reads the JSON itself: a -0 there would reach it as the
	// float -0, which the canonical form a person approves writes as 0.
	raw = canon.UnsignZeros(raw)
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok {
		if err := u.UnmarshalJSON(bytes.Clone(raw)); err != nil {
			d.addf("cannot be read: %v", err)
		}
		return
	}
	// A hand-written tool's input with its schema written out: the JSON
	// library's errors name Go types, which callers must not see.
	var se *jsonv2.SemanticError
	if err := jsonv2.Unmarshal(bytes.Clone(raw), v.Addr().Interface()); errors.As(err, &se) && se.JSONPointer != "" {
		at := len(d.path)
		for tok := range se.JSONPointer.Tokens() {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
				d.path = append(d.path, seg{index: i}) // a member named by digits reads as an index here
			} else {
				d.path = append(d.path, seg{name: tok})
			}
		}
		d.addf("has a value the tool cannot read, though its schema allows it; send %s", kindHint(se.JSONKind))
		d.path = d.path[:at]
	} else if err != nil {
		d.add("has a value the tool cannot read, though its schema allows it")
	}
}

// kindHint says what to send instead of a value of kind k.
func kindHint(k jsontext.Kind) string {
	if k == 0 {
		return "another value"
	}
	return "something other than " + kindNoun(k)
}

// freeValue decodes any JSON value as encoding/json decodes it into an
// any: objects as map[string]any, arrays as []any, numbers as float64. A
// number beyond float64's range becomes ±Inf, its nearest float, rather
// than a problem: the schema of a free-form value, {}, allows every number.
func (d *decoder) freeValue() (any, bool) {
	switch d.dec.PeekKind() {
	case '{':
		if _, err := d.dec.ReadToken(); err != nil {
			d.fail(err)
			return nil, false
		}
		m := map[string]any{}
		for d.dec.PeekKind() != '}' {
			name, ok := d.name()
			if !ok {
				return nil, false
			}
			key := string(name)
			x, ok := d.freeValue()
			if !ok {
				return nil, false
			}
			m[key] = x
		}
		if _, err := d.dec.ReadToken(); err != nil {
			d.fail(err)
			return nil, false
		}
		return m, true
	case '[':
		if _, err := d.dec.ReadToken(); err != nil {
			d.fail(err)
			return nil, false
		}
		a := []any{}
		for d.dec.PeekKind() != ']' {
			x, ok := d.freeValue()
			if !ok {
				return nil, false
			}
			a = append(a, x)
		}
		if _, err := d.dec.ReadToken(); err != nil {
			d.fail(err)
			return nil, false
		}
		return a, true
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		d.fail(err)
		return nil, false
	}
	switch tok.Kind() {
	case 't', 'f':
		return tok.Bool(), true
	case '"':
		return tok.String(), true
	case '0':
		f, _ := strconv.ParseFloat(tok.String(), 64) // ±Inf when out of range
		if f == 0 {
			f = 0 // -0 is 0, as the canonical form a person approves writes it
		}
		return f, true
	}
	return nil, true
}

// itemRules returns the rules of the elements of a use with rules r.
func itemRules(r *Rules) *Rules {
	if r == nil {
		return nil
	}
	return r.Items
}

func (d *decoder) raw(v reflect.Value) {
	raw, ok := d.readValue()
	if ok {
		v.SetBytes(bytes.Clone(canon.UnsignZeros(raw))) // -0 is 0 (see opaque)
	}
}

func (d *decoder) object(n *Node, v reflect.Value) {
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
		return
	}
	var seenSmall [64]bool
	seen := seenSmall[:]
	if len(n.Fields) > len(seenSmall) {
		seen = make([]bool, len(n.Fields))
	}
	for d.dec.PeekKind() != '}' {
		name, ok := d.name()
		if !ok {
			return
		}
		f, known := n.byName[string(name)]
		if !known {
			d.path = append(d.path, seg{name: truncate(string(name))}) // a hostile key may be huge
			d.unknown(n, truncate(string(name)))
			d.path = d.path[:len(d.path)-1]
			d.skip()
			if d.syntax {
				return
			}
			continue
		}
		seen[f.Pos] = true
		d.path = append(d.path, seg{name: f.Name})
		if !f.Nullable && f.Node.Kind == KindPtr && d.dec.PeekKind() == 'n' {
			d.skip()
			d.addf("must not be null: it is required")
		} else {
			d.value(f.Node, &f.Rules, fieldOf(v, f))
		}
		d.path = d.path[:len(d.path)-1]
		if d.syntax {
			return
		}
	}
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
		return
	}
	for i, f := range n.Fields {
		if f.Required && !seen[i] {
			d.path = append(d.path, seg{name: f.Name})
			d.addf("is required: add %s", want(f.Node))
			d.path = d.path[:len(d.path)-1]
		}
	}
}

// fieldOf returns the field f of v, a struct value, without the call of
// FieldByIndex for the common field that is not promoted from an embedded
// struct.
func fieldOf(v reflect.Value, f *Field) reflect.Value {
	if len(f.Index) == 1 {
		return v.Field(f.Index[0])
	}
	return v.FieldByIndex(f.Index)
}

// name reads an object member name. The bytes are valid until the next
// read.
func (d *decoder) name() ([]byte, bool) {
	raw, ok := d.readValue()
	if !ok {
		return nil, false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], true
	}
	var err error
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], raw)
	if err != nil {
		d.fail(err)
		return nil, false
	}
	return d.scratch, true
}

func (d *decoder) unknown(n *Node, name string) {
	names := n.Names()
	if c := closest(name, names); c != "" {
		d.addf("unknown field %q; did you mean %q? (names are case-sensitive)", name, c)
		return
	}
	if len(names) == 0 {
		d.addf("unknown field %q; this tool takes no input fields", name)
		return
	}
	if len(names) <= 12 {
		d.addf("unknown field %q; known fields: %s", name, quoteList(names))
		return
	}
	d.addf("unknown field %q", name)
}

func quoteList(names []string) string {
	var b []byte
	for i, n := range names {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, n)
	}
	return string(b)
}

func (d *decoder) array(n *Node, r *Rules, v reflect.Value) {
	items := itemRules(r)
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
		return
	}
	if n.Kind == KindSlice {
		v.SetZero() // the items go to a new backing array
	}
	i := 0
	for d.dec.PeekKind() != ']' {
		d.path = append(d.path, seg{index: i})
		switch {
		case n.Kind == KindSlice:
			if i == v.Cap() {
				v.Grow(growBy(n, i))
			}
			v.SetLen(i + 1)
			d.value(n.Elem, items, v.Index(i))
		case i < n.Len:
			d.value(n.Elem, items, v.Index(i))
		default:
			d.skip()
		}
		d.path = d.path[:len(d.path)-1]
		if d.syntax {
			return
		}
		i++
	}
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
		return
	}
	if n.Kind == KindSlice && i == 0 {
		v.Set(reflect.MakeSlice(n.Type, 0, 0)) // [] is an empty slice, never nil
	}
	if n.Kind == KindArray && i != n.Len {
		d.addf("must have exactly %d items, not %d", n.Len, i)
	}
}

// growBy is how many items to make room for when a slice node's value
// holding have items is full: a few at first, so that short arrays take
// one allocation, not one per doubling; then one, which append's rule
// doubles.
func growBy(n *Node, have int) int {
	if have > 0 {
		return 1
	}
	if size := n.Elem.Type.Size(); size > 0 {
		return max(1, min(4, 256/int(min(size, 256))))
	}
	return 4
}

func (d *decoder) mapValue(n *Node, r *Rules, v reflect.Value) {
	items := itemRules(r)
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(n.Type))
	}
	keyType := n.Type.Key()
	for d.dec.PeekKind() != '}' {
		name, ok := d.name()
		if !ok {
			return
		}
		key := d.makeString(name)
		d.path = append(d.path, seg{name: key, isKey: true})
		elem := reflect.New(n.Type.Elem()).Elem()
		d.value(n.Elem, items, elem)
		d.path = d.path[:len(d.path)-1]
		if d.syntax {
			return
		}
		v.SetMapIndex(reflect.ValueOf(key).Convert(keyType), elem)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		d.fail(err)
	}
}

// text decodes a JSON string into the string-like kinds.
//
// The unquoted bytes are read in place (or from the scratch buffer when the
// string has escapes) and copied only into what is kept: one allocation
// per value at most.
func (d *decoder) text(n *Node, raw jsontext.Value, v reflect.Value) {
	b := raw[1 : len(raw)-1]
	if bytes.IndexByte(b, '\\') >= 0 {
		var err error
		d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], raw)
		if err != nil {
			d.fail(err)
			return
		}
		b = d.scratch
	}
	switch n.Kind {
	case KindString:
		v.SetString(d.makeString(b))
	case KindTime:
		// time.Parse keeps nothing of its input but in the error, which
		// is dropped here; the message copies what it quotes.
		s := unsafe.String(unsafe.SliceData(b), len(b))
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			d.addf("must be an RFC 3339 date-time such as \"2006-01-02T15:04:05Z\", not %q", truncate(s))
			return
		}
		v.Set(reflect.ValueOf(t))
	case KindDuration:
		s := unsafe.String(unsafe.SliceData(b), len(b))
		x, err := time.ParseDuration(s)
		if err != nil {
			if durationSyntax.MatchString(s) {
				d.addf("must be a duration between %v and %v, not %q", time.Duration(math.MinInt64), time.Duration(math.MaxInt64), truncate(s))
			} else {
				d.addf("must be a duration such as \"1h30m\" or \"250ms\" (units ns, us, ms, s, m, h), not %q", truncate(s))
			}
			return
		}
		v.SetInt(int64(x))
	case KindBytes:
		out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
		m, err := base64.StdEncoding.Decode(out, b)
		if err != nil {
			d.addf("must be base64 (standard alphabet, padded): %v", err)
			return
		}
		v.SetBytes(out[:m])
	case KindText:
		// A copy: an UnmarshalText that keeps its argument, against the
		// interface's contract, must not see the decoder's buffers.
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText(bytes.Clone(b)); err != nil {
			if n.Format != "" {
				d.addf("must be a valid %s, not %q", n.Format, truncate(string(b)))
			} else {
				// The type's own words, bounded; never its Go name,
				// which means nothing to a caller.
				d.addf("is not valid: %s", bounded(err.Error()))
			}
		}
	}
}

var durationSyntax = regexp.MustCompile(durationPattern)

// stringCache holds strings made from decoded bytes, by a hash of them, so
// that a string that comes again ("EUR", a SKU, a map key) is shared, not
// allocated again. go-json-experiment/json does the same for the same
// reason. The cache lives in the pooled decoder: the strings in it may be
// kept until the pool drops the decoder.
type stringCache [256]string

// makeString returns string(b), from the cache when it is there.
func (d *decoder) makeString(b []byte) string {
	if len(b) < 2 || len(b) > 256 { // one-byte strings are interned by the runtime
		return string(b)
	}
	var h uint32
	switch {
	case len(b) >= 8:
		lo := binary.LittleEndian.Uint64(b[:8])
		hi := binary.LittleEndian.Uint64(b[len(b)-8:])
		h = hash64(uint32(lo), uint32(lo>>32)) ^ hash64(uint32(hi), uint32(hi>>32))
	case len(b) >= 4:
		h = hash64(binary.LittleEndian.Uint32(b[:4]), binary.LittleEndian.Uint32(b[len(b)-4:]))
	default:
		h = hash64(uint32(binary.LittleEndian.Uint16(b[:2])), uint32(binary.LittleEndian.Uint16(b[len(b)-2:])))
	}
	i := h % uint32(len(d.strs))
	if s := d.strs[i]; s == string(b) {
		return s
	}
	s := string(b)
	d.strs[i] = s
	return s
}

// hash64 mixes two words, as the first rounds of XXH32 do.
func hash64(lo, hi uint32) uint32 {
	const (
		prime3 = 0xc2b2ae3d
		prime4 = 0x27d4eb2f
		prime5 = 0x165667b1
	)
	h := prime5 + uint32(8)
	h += lo * prime3
	h = bits.RotateLeft32(h, 17) * prime4
	h += hi * prime3
	h = bits.RotateLeft32(h, 17) * prime4
	return h
}

// bounded cuts a message from a type's own code to a length fit for an
// answer.
func bounded(s string) string {
	if len(s) > 256 {
		return strings.ToValidUTF8(s[:256], "") + "…"
	}
	return s
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// number decodes a JSON number. Integer kinds take any notation of an
// integer (2, 2.0, 2e0), as JSON Schema does, and refuse anything out of the
// type's range.
//
// A float is checked against its bounds here, on the number as written,
// where rounding it could change the answer (see settleFloat).
func (d *decoder) number(n *Node, r *Rules, raw jsontext.Value, v reflect.Value) {
	switch n.Kind {
	case KindFloat:
		s := unsafe.String(unsafe.SliceData(raw), len(raw))
		f, err := strconv.ParseFloat(s, n.Bits)
		if err != nil {
			lo, hi := typeRange(n)
			d.addf("must be between %s and %s (a %d-bit floating-point number)", lo.Lit, hi.Lit, n.Bits)
			return
		}
		f, msg := settleFloat(n, r, raw, f)
		if msg != "" {
			d.add(msg)
			return
		}
		if f == 0 {
			f = 0 // -0 is 0, as the canonical form a person approves writes it
		}
		v.SetFloat(f)
	case KindInt:
		neg, mag, st := parseInteger(raw)
		limit := uint64(1)<<(n.Bits-1) - 1
		if neg {
			limit++
		}
		switch {
		case st == notInteger:
			d.addf("must be an integer, not %s", truncate(string(raw)))
		case st == overflow || mag > limit:
			lo, hi := typeRange(n)
			d.addf("must be between %s and %s (a %d-bit integer)", lo.Lit, hi.Lit, n.Bits)
		case neg:
			v.SetInt(int64(-mag))
		default:
			v.SetInt(int64(mag))
		}
	case KindUint:
		neg, mag, st := parseInteger(raw)
		switch {
		case st == notInteger:
			d.addf("must be an integer, not %s", truncate(string(raw)))
		case st == overflow || (neg && mag != 0) || mag > math.MaxUint64>>(64-n.Bits):
			_, hi := typeRange(n)
			d.addf("must be between 0 and %s (an unsigned %d-bit integer)", hi.Lit, n.Bits)
		default:
			v.SetUint(mag)
		}
	}
}

const (
	integral = iota
	notInteger
	overflow
)

// parseInteger reads a valid JSON number exactly: its sign, its magnitude
// when it is an integer that fits 64 bits, and whether it is one.
func parseInteger(b []byte) (neg bool, mag uint64, status int) {
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	// Fast path: plain digits.
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == len(b) && i <= 19 {
		for _, c := range b {
			mag = mag*10 + uint64(c-'0')
		}
		return neg, mag, integral
	}
	intPart := b[:i]
	rest := b[i:]
	var frac []byte
	if len(rest) > 0 && rest[0] == '.' {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		frac, rest = rest[1:j], rest[j:]
	}
	exp := 0
	if len(rest) > 0 && (rest[0] == 'e' || rest[0] == 'E') {
		rest = rest[1:]
		expNeg := false
		if len(rest) > 0 && (rest[0] == '+' || rest[0] == '-') {
			expNeg, rest = rest[0] == '-', rest[1:]
		}
		for _, c := range rest {
			if exp < 1_000_000 {
				exp = exp*10 + int(c-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	digits := append(append(make([]byte, 0, len(intPart)+len(frac)), intPart...), frac...)
	exp -= len(frac)
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return neg, 0, integral
	}
	for exp < 0 && len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if exp < 0 {
		return neg, 0, notInteger
	}
	if len(digits)+exp > 20 {
		return neg, 0, overflow
	}
	for _, c := range digits {
		hi, lo := bits.Mul64(mag, 10)
		if hi != 0 {
			return neg, 0, overflow
		}
		var carry uint64
		mag, carry = bits.Add64(lo, uint64(c-'0'), 0)
		if carry != 0 {
			return neg, 0, overflow
		}
	}
	for range exp {
		hi, lo := bits.Mul64(mag, 10)
		if hi != 0 {
			return neg, 0, overflow
		}
		mag = lo
	}
	return neg, mag, integral
}
