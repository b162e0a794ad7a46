package shape

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Rules are the constraints on one value that carmy publishes in the schema
// and enforces itself.
type Rules struct {
	Min, XMin, Max, XMax *Bound // inclusive and exclusive bounds of numbers
	MinLen, MaxLen       *int   // characters of strings, items of arrays, members of maps
	Enum                 []Literal
	Pattern              *regexp.Regexp
	Format               string
	NonNull              bool // a pointer element that must not be null
	// NonZero refuses the zero value of a type whose zero JSON is not
	// empty: the nil UUID, the zero time, an array of zeros (validator's
	// required on them).
	NonZero bool
	Items   *Rules // rules of every element (validate's dive)
	// IfSet holds the rules after the validator's omitempty on a value
	// that is not a pointer. They hold unless the value is empty as the
	// validator sees it: "" or 0 for strings and numbers, nil for slices
	// and maps. A decoded [] or {} is not nil, so its rules hold; only an
	// absent member decodes to nil. (After omitempty, the rules of a
	// pointer are the pointer's own: they hold on every non-nil pointer,
	// and a nil one has no value to check.)
	IfSet *Rules
}

func (r *Rules) empty() bool {
	return r.Min == nil && r.XMin == nil && r.Max == nil && r.XMax == nil &&
		r.MinLen == nil && r.MaxLen == nil && r.Enum == nil && r.Pattern == nil && !r.NonNull && !r.NonZero &&
		(r.Items == nil || r.Items.empty()) && (r.IfSet == nil || r.IfSet.empty())
}

// items returns the element rules, creating them.
func (r *Rules) items() *Rules {
	if r.Items == nil {
		r.Items = &Rules{}
	}
	return r.Items
}

// Bound is an exact number from a tag.
type Bound struct {
	Lit string   // as written in the schema
	Rat *big.Rat // exact value
	F   float64  // nearest float64
	F32 float64  // nearest float32
	I   int64    // exact when IOK
	IOK bool
	U   uint64 // exact when UOK
	UOK bool
}

// ParseBound reads a JSON number literal exactly.
func ParseBound(s string) (*Bound, error) {
	if !isJSONNumber(s) {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	b := &Bound{Lit: s, Rat: r}
	b.F, _ = r.Float64()
	f32, _ := r.Float32()
	b.F32 = float64(f32)
	if r.IsInt() {
		if r.Num().IsInt64() {
			b.I, b.IOK = r.Num().Int64(), true
		}
		if r.Num().IsUint64() {
			b.U, b.UOK = r.Num().Uint64(), true
		}
		b.Lit = r.Num().String()
	}
	return b, nil
}

func intBound(v int64) *Bound {
	b, _ := ParseBound(strconv.FormatInt(v, 10))
	return b
}

func uintBound(v uint64) *Bound {
	b, _ := ParseBound(strconv.FormatUint(v, 10))
	return b
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

func isJSONNumber(s string) bool { return len(s) < 400 && jsonNumber.MatchString(s) }

// Literal is one allowed value of an enum.
type Literal struct {
	JSON string // the JSON text
	S    string // for strings
	N    *Bound // for numbers
	B    bool   // for booleans
}

func (l Literal) value() any {
	var v any
	_ = json.Unmarshal([]byte(l.JSON), &v)
	if l.N != nil {
		return jsontextRaw(l.N.Lit) // a number, exactly as written
	}
	return v
}

func literalFor(n *Node, text string) (Literal, error) {
	switch n.Deref().Kind {
	case KindString, KindText, KindTime:
		q, _ := json.Marshal(text)
		return Literal{JSON: string(q), S: text}, nil
	case KindInt, KindUint, KindFloat:
		b, err := ParseBound(text)
		if err != nil {
			return Literal{}, err
		}
		if n.Deref().Kind != KindFloat && !b.Rat.IsInt() {
			return Literal{}, fmt.Errorf("%s is not an integer", text)
		}
		return Literal{JSON: b.Lit, N: b}, nil
	case KindBool:
		v, err := strconv.ParseBool(text)
		if err != nil {
			return Literal{}, fmt.Errorf("%q is not a boolean", text)
		}
		return Literal{JSON: strconv.FormatBool(v), B: v}, nil
	}
	return Literal{}, fmt.Errorf("enums are supported on strings, numbers and booleans, not %s", n.Type)
}

// tighten keeps the stricter of two lower (lower=true) or upper bounds.
func tighten(cur **Bound, b *Bound, lower bool) {
	if *cur == nil {
		*cur = b
		return
	}
	c := b.Rat.Cmp((*cur).Rat)
	if (lower && c > 0) || (!lower && c < 0) {
		*cur = b
	}
}

func tightenLen(cur **int, v int, lower bool) {
	if *cur == nil || (lower && v > **cur) || (!lower && v < **cur) {
		*cur = &v
	}
}

// lengthKind reports whether rules on n count characters, items or members.
func lengthKind(n *Node) bool {
	switch n.Kind {
	case KindString, KindSlice, KindArray, KindMap, KindBytes:
		return true
	}
	return false
}

func numberKind(n *Node) bool {
	return n.Kind == KindInt || n.Kind == KindUint || n.Kind == KindFloat
}

// crossField reports whether a validator rule reads other fields of the
// enclosing struct.
func crossField(name string) bool {
	return strings.HasSuffix(name, "field") || strings.HasPrefix(name, "required_") ||
		strings.HasPrefix(name, "excluded_") || strings.HasPrefix(name, "skip_unless") ||
		strings.HasPrefix(name, "fieldcontains") || strings.HasPrefix(name, "fieldexcludes")
}

// parseValidate maps the validator rules of a field that JSON Schema can
// say into f.Rules, and keeps the rest, for the validator at run time, in
// f.Runtime.
func parseValidate(tag string, f *Field) error {
	if tag == "" || tag == "-" {
		return nil
	}
	levels := [][]string{nil}
	for rule := range strings.SplitSeq(tag, ",") {
		if rule == "dive" {
			levels = append(levels, nil)
			continue
		}
		levels[len(levels)-1] = append(levels[len(levels)-1], rule)
	}
	node := f.Node.Deref()
	ptr := f.Node.Kind == KindPtr // the value at this level is a pointer
	rules := &f.Rules
	var runtime []string // validator tag, level by level
	needed := false
	for depth, level := range levels {
		if depth > 0 {
			if node == nil || (node.Kind != KindSlice && node.Kind != KindArray && node.Kind != KindMap) {
				return fmt.Errorf("validate:%q dives into %s, which has no elements", tag, f.Node.Type)
			}
			rules = rules.items()
			node = node.Elem
			if node != nil {
				ptr = node.Kind == KindPtr
				node = node.Deref()
			}
		}
		var keep []string
		conditional := false
		for _, rule := range level {
			if rule == "" {
				continue
			}
			name, param, _ := strings.Cut(rule, "=")
			if isOmit(name) {
				conditional = true
				keep = append(keep, rule)
				continue
			}
			if crossField(name) {
				if strings.HasSuffix(name, "csfield") {
					return fmt.Errorf("validate:%q: %s compares with a field of another struct, which carmy cannot check (it runs the rules of each struct on that struct); move the rule to the struct that holds both fields and use %s", tag, name, strings.Replace(name, "csfield", "field", 1))
				}
				if depth > 0 {
					return fmt.Errorf("validate:%q: %s after dive would compare each element with a field, which carmy cannot check; check it in the tool", tag, name)
				}
				f.Cross = true
			}
			mapped := false
			if target := conditionalTarget(rules, node, ptr, conditional, name); target != nil && !strings.Contains(rule, "|") {
				var err error
				if mapped, err = mapRule(name, param, node, ptr, target, f, depth); err != nil {
					return fmt.Errorf("validate:%q: %v", tag, err)
				}
			}
			if !mapped {
				keep = append(keep, rule)
				needed = true
			}
		}
		runtime = append(runtime, strings.Join(keep, ","))
	}
	if !needed {
		return nil
	}
	for !hasCheck(runtime[len(runtime)-1]) {
		runtime = runtime[:len(runtime)-1]
	}
	var parts []string
	for i, l := range runtime {
		if i > 0 {
			parts = append(parts, "dive")
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	f.Runtime = strings.Join(parts, ",")
	if f.Node.Kind == KindPtr && !strings.HasPrefix(f.Runtime, "required") {
		// carmy lets a pointer be null; the validator would apply the rules
		// to nil.
		f.Runtime = "omitnil," + f.Runtime
	}
	return nil
}

// conditionalTarget returns the rules a validator rule maps into, nil when
// it stays with the validator. After omitempty, the validator skips the
// rules only for an empty value, and what is empty depends on the value:
//   - a pointer (ptr) is empty when nil; a non-nil pointer's value is
//     checked by every rule, even "" or 0. The rules map into the pointer's
//     own, which a nil pointer never reaches;
//   - a string or a number is empty when "" or 0, and a slice or a map when
//     nil: the rules map into IfSet. The schema states a string's or a
//     number's as anyOf the empty value and the rules, and a collection's
//     as they are, since a present one is never nil.
func conditionalTarget(r *Rules, n *Node, ptr, conditional bool, name string) *Rules {
	switch {
	case n == nil:
		return nil
	case !conditional:
		return r
	case name == "required":
		return nil
	case ptr:
		return r
	case n.Kind == KindString || numberKind(n) || n.Kind == KindSlice || n.Kind == KindMap:
		if r.IfSet == nil {
			r.IfSet = &Rules{}
		}
		return r.IfSet
	}
	return nil
}

// emptyValue reports whether v, a value of a kind that IfSet rules apply
// to, is empty as the validator's omitempty sees it: "", 0, or a nil slice
// or map.
func emptyValue(n *Node, v reflect.Value) bool {
	switch n.Kind {
	case KindString:
		return v.Len() == 0
	case KindSlice, KindMap:
		return v.IsNil()
	case KindInt:
		return v.Int() == 0
	case KindUint:
		return v.Uint() == 0
	case KindFloat:
		return v.Float() == 0
	}
	return false
}

// hasCheck reports whether a level of rules checks anything.
func hasCheck(level string) bool {
	for rule := range strings.SplitSeq(level, ",") {
		if rule != "" && !isOmit(rule) {
			return true
		}
	}
	return false
}

func isOmit(rule string) bool {
	return rule == "omitempty" || rule == "omitnil" || rule == "omitzero"
}

// mapRule maps one validator rule; it reports false for a rule that stays
// with the validator. n is the value's node past pointers; ptr says whether
// the value is a pointer.
func mapRule(name, param string, n *Node, ptr bool, r *Rules, f *Field, depth int) (bool, error) {
	switch name {
	case "required":
		switch {
		case (numberKind(n) || n.Kind == KindBool || n.Kind == KindStruct || n.Kind == KindDuration) && ptr:
			// On a pointer, the validator's required means non-nil: 0,
			// false and a zero struct are fine.
			if depth == 0 {
				f.Required, f.Nullable = true, false
			}
			r.NonNull = true // what an output is checked against
			return true, nil
		case n.Kind == KindDuration:
			return false, fmt.Errorf("required on the %s field means non-zero to the validator, so \"0s\" would be refused, which a schema cannot say of a duration string: use a pointer (*%s) if the key must be present and not null, or check it in the tool", n.Type, n.Type)
		case numberKind(n) || n.Kind == KindBool:
			if n.Kind == KindBool {
				return false, fmt.Errorf("required on the bool field means true to the validator, so false would be refused: use a pointer (*bool) if the key must be present and not null, or drop the rule")
			}
			return false, fmt.Errorf("required on the %s field means non-zero to the validator, so 0 would be refused: say min=1, or use a pointer (*%s) if the key must be present and not null", n.Type, n.Type)
		case n.Kind == KindStruct:
			// The validator ignores required on structs unless configured
			// otherwise, and JSON already requires the member: nothing to do.
			return true, nil
		case n.Kind == KindAny || n.Kind == KindRaw:
			return false, nil
		}
		if depth == 0 {
			f.Required, f.Nullable = true, false
		}
		if ptr || depth > 0 {
			r.NonNull = true
		}
		if ptr {
			return true, nil // on a pointer, the validator's required means non-nil: *string may be ""
		}
		switch n.Kind {
		case KindString:
			tightenLen(&r.MinLen, 1, true)
		case KindTime, KindText, KindArray:
			if _, err := zeroSchema(n); err != nil {
				return false, err
			}
			r.NonZero = true
		}
		return true, nil
	case "min", "max", "len", "gt", "gte", "lt", "lte":
		if numberKind(n) {
			b, err := ParseBound(param)
			if err != nil {
				return false, fmt.Errorf("%s=%s: %v", name, param, err)
			}
			switch name {
			case "min", "gte":
				tighten(&r.Min, b, true)
			case "max", "lte":
				tighten(&r.Max, b, false)
			case "len":
				tighten(&r.Min, b, true)
				tighten(&r.Max, b, false)
			case "gt":
				tighten(&r.XMin, b, true)
			case "lt":
				tighten(&r.XMax, b, false)
			}
			return true, nil
		}
		if lengthKind(n) {
			v, err := strconv.Atoi(param)
			if err != nil || v < 0 {
				return false, fmt.Errorf("%s=%s: want a count of %s", name, param, countNoun(n))
			}
			switch name {
			case "min", "gte":
				tightenLen(&r.MinLen, v, true)
			case "max", "lte":
				tightenLen(&r.MaxLen, v, false)
			case "len":
				tightenLen(&r.MinLen, v, true)
				tightenLen(&r.MaxLen, v, false)
			case "gt":
				tightenLen(&r.MinLen, v+1, true)
			case "lt":
				if v == 0 {
					return false, fmt.Errorf("lt=0 can never hold for a length")
				}
				tightenLen(&r.MaxLen, v-1, false)
			}
			return n.Kind != KindBytes, nil
		}
		return false, nil
	case "oneof":
		if n.Kind == KindFloat {
			return false, fmt.Errorf("oneof is not supported on floats by the validator; use min and max, or a string enum")
		}
		if n.Kind != KindString && n.Kind != KindInt && n.Kind != KindUint {
			return false, nil
		}
		var enum []Literal
		for _, v := range splitOneOf(param) {
			l, err := literalFor(n, v)
			if err != nil {
				return false, fmt.Errorf("oneof=%s: %v", param, err)
			}
			enum = append(enum, l)
		}
		if len(enum) == 0 {
			return false, fmt.Errorf("oneof needs at least one value")
		}
		r.Enum = intersect(r.Enum, enum)
		return true, nil
	case "email":
		r.Format = "email"
	case "url", "http_url":
		r.Format = "uri"
	case "uuid", "uuid4", "uuid_rfc4122", "uuid4_rfc4122":
		r.Format = "uuid"
	}
	return false, nil
}

func countNoun(n *Node) string {
	switch n.Kind {
	case KindString:
		return "characters"
	case KindMap:
		return "members"
	case KindBytes:
		return "bytes"
	}
	return "items"
}

// splitOneOf splits the validator's oneof parameter: space-separated words,
// single quotes around a word with spaces.
func splitOneOf(s string) []string {
	var out []string
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end >= 0 {
				out = append(out, s[1:end+1])
				s = s[end+2:]
				continue
			}
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out
}

func intersect(have, add []Literal) []Literal {
	if have == nil {
		return add
	}
	var out []Literal
	for _, a := range add {
		for _, h := range have {
			if a.JSON == h.JSON {
				out = append(out, a)
			}
		}
	}
	return out
}

// parseSchemaTag reads a jsonschema tag: descriptions, titles and the
// keywords carmy enforces.
func parseSchemaTag(tag string, f *Field) error {
	if tag == "" {
		return nil
	}
	n := f.Node.Deref()
	for _, kv := range splitUnescaped(tag) {
		if kv == "" {
			continue
		}
		key, val, hasVal := strings.Cut(kv, "=")
		if !hasVal {
			switch key {
			case "required":
				f.Required = true
				continue
			case "nullable":
				if !f.Nullable {
					return fmt.Errorf("jsonschema:\"nullable\" on a non-pointer field: make the field a pointer")
				}
				continue
			}
			return fmt.Errorf("jsonschema tag option %q is not supported (a comma inside a value must be escaped as \\,)", key)
		}
		var err error
		switch key {
		case "description":
			f.Desc = val
		case "title":
			f.Title = val
		case "format":
			f.Rules.Format = val
		case "pattern":
			if n.Kind != KindString {
				return fmt.Errorf("jsonschema pattern on %s: patterns apply to strings", n.Type)
			}
			f.Rules.Pattern, err = regexp.Compile(val)
		case "enum":
			var l Literal
			l, err = literalFor(n, val)
			if err == nil {
				f.Rules.Enum = append(f.Rules.Enum, l)
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			if !numberKind(n) {
				return fmt.Errorf("jsonschema %s on %s: it applies to numbers", key, n.Type)
			}
			var b *Bound
			b, err = ParseBound(val)
			if err == nil {
				switch key {
				case "minimum":
					tighten(&f.Rules.Min, b, true)
				case "maximum":
					tighten(&f.Rules.Max, b, false)
				case "exclusiveMinimum":
					tighten(&f.Rules.XMin, b, true)
				case "exclusiveMaximum":
					tighten(&f.Rules.XMax, b, false)
				}
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			isStr := strings.HasSuffix(key, "Length")
			if isStr != (n.Kind == KindString) || !lengthKind(n) {
				return fmt.Errorf("jsonschema %s does not apply to %s", key, n.Type)
			}
			v, perr := strconv.Atoi(val)
			if perr != nil || v < 0 {
				return fmt.Errorf("jsonschema %s=%s: want a count", key, val)
			}
			if strings.HasPrefix(key, "min") {
				tightenLen(&f.Rules.MinLen, v, true)
			} else {
				tightenLen(&f.Rules.MaxLen, v, false)
			}
		case "default":
			var l Literal
			l, err = literalFor(n, val)
			f.Default = l.value()
		case "example":
			var l Literal
			l, err = literalFor(n, val)
			f.Examples = append(f.Examples, l.value())
		default:
			return fmt.Errorf("jsonschema tag keyword %q is not supported (carmy supports description, title, enum, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems, pattern, format, default, example, required, nullable)", key)
		}
		if err != nil {
			return fmt.Errorf("jsonschema %s=%s: %v", key, val, err)
		}
	}
	return nil
}

// splitUnescaped splits on commas not preceded by a backslash, as
// invopop/jsonschema reads its tags.
func splitUnescaped(s string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			cur.WriteByte(',')
			i++
		case s[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(out, cur.String())
}

// typeRange returns the bounds that a sized number type can hold.
func typeRange(n *Node) (lo, hi *Bound) {
	switch n.Kind {
	case KindInt:
		return intBound(-1 << (n.Bits - 1)), intBound(1<<(n.Bits-1) - 1)
	case KindUint:
		return uintBound(0), uintBound(math.MaxUint64 >> (64 - n.Bits))
	case KindFloat:
		if n.Bits == 32 {
			return floatBound(-math.MaxFloat32), floatBound(math.MaxFloat32)
		}
		return floatBound(-math.MaxFloat64), floatBound(math.MaxFloat64)
	}
	return nil, nil
}

func floatBound(f float64) *Bound {
	b, _ := ParseBound(strconv.FormatFloat(f, 'g', -1, 64))
	b.Lit = strconv.FormatFloat(f, 'g', -1, 64)
	return b
}

// runeCount counts characters as JSON Schema and the validator do.
func runeCount(s string) int { return utf8.RuneCountInString(s) }

// zeroTimePattern matches the zero time.Time written at offset zero, as the
// decoder reads it: the value validator's required refuses.
const zeroTimePattern = `^0001-01-01T00:00:00(\.0+)?(Z|[+-]00:00)$`

// nilUUIDPattern matches the nil UUID in every form uuid.Parse reads.
const nilUUIDPattern = `^([uU][rR][nN]:[uU][uU][iI][dD]:)?\{?0{8}-?0{4}-?0{4}-?0{4}-?0{12}\}?$`

// zeroSchema is the schema of the zero value's JSON, for "not": what
// required refuses.
func zeroSchema(n *Node) (map[string]any, error) {
	switch n.Kind {
	case KindTime:
		return map[string]any{"pattern": zeroTimePattern}, nil
	case KindText:
		if n.Type == uuidType {
			return map[string]any{"pattern": nilUUIDPattern}, nil
		}
		text, err := reflect.Zero(n.Type).Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, fmt.Errorf("required on %s: its zero value has no text form: %v", n.Type, err)
		}
		return map[string]any{"const": string(text)}, nil
	case KindArray:
		zero, err := zeroJSON(n)
		if err != nil {
			return nil, err
		}
		return map[string]any{"const": zero}, nil
	}
	return nil, fmt.Errorf("required on %s is not supported", n.Type)
}

// zeroJSON is the JSON value of the zero value of an array of scalars.
func zeroJSON(n *Node) (any, error) {
	switch n.Kind {
	case KindInt, KindUint, KindFloat:
		return 0, nil
	case KindBool:
		return false, nil
	case KindString:
		return "", nil
	case KindArray:
		items := make([]any, n.Len)
		for i := range items {
			v, err := zeroJSON(n.Elem)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	}
	return nil, fmt.Errorf("required on an array of %s, whose zero value the schema cannot state; use a slice with min=1, or check it in the tool", n.Type)
}

// isZeroValue reports whether v is what required refuses.
func isZeroValue(n *Node, v reflect.Value) bool {
	if n.Kind == KindTime {
		t := v.Interface().(time.Time)
		_, offset := t.Zone()
		return t.IsZero() && offset == 0
	}
	return v.IsZero()
}
