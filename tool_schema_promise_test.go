package carmy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
)

// The schema promise: every input the runtime accepts conforms to
// the published input schema, and every input that conforms is accepted.
// TestPromise checks it for every corpus type that can be an input, against
// an independent validator (santhosh-tekuri/jsonschema, draft 2020-12,
// without format assertion), on inputs generated from the schema itself:
// mostly valid documents with boundary values, number notations, nulls,
// missing and extra keys, and a few mutations each.
//
// Allowed disagreement, and only this one: formats are annotations, so
// carmy may reject a value whose only problems are formats (email, url,
// uuid, date-time) that the validator accepts. The one corpus rule that
// only go-playground/validator enforces is a format too (FormatRules.Website,
// omitempty,url). contentEncoding is asserted by the oracle: base64 is
// checked on both sides.

var (
	promiseSeed  = flag.Uint64("promise.seed", 20260101, "seed of TestPromise's input generator")
	promiseCount = flag.Int("promise.n", 100, "inputs TestPromise generates per corpus type")
)

// promiseRegressions are inputs that once exposed a disagreement; they are
// checked before the generated ones.
var promiseRegressions = []struct{ corpus, input string }{
	// An omitzero struct field whose zero value breaks rules inside it
	// (Address.street is required) was optional in the schema but rejected
	// when absent.
	{"omitempty_omitzero", `{"i":"ab","j":[1],"k":{"sku":"x","quantity":1}}`},
	{"omitempty_omitzero", `{"i":"ab","j":[1],"e":{"street":"s","city":"","zip":"12345"},"k":{"sku":"x","quantity":1}}`},
	// json:"-," names a member "-"; it was dropped from the schema and
	// rejected as unknown.
	{"json_dash", `{"shown":"","-":"dash","Default":""}`},
	{"json_dash", `{"shown":"","Default":""}`},
	// validate:"dive,required" on pointers made the elements non-null only
	// for strings; on structs and numbers, null elements slipped through
	// or the type was refused.
	{"rules_nested", `{"plain":[],"dived":[{"sku":"a","quantity":1}],"ptrs":[],"ptrs_dived":[null],"map":{},"map_dived":{},"one":{"sku":"a","quantity":1},"pages":[],"grouped":{},"must":{"sku":"a","quantity":0},"addresses":[{"street":"s","city":"","zip":"12345"},{"street":"s","city":"","zip":"12345"}]}`},
	{"rules_maps", `{"min":{"a":1},"max":{},"len":{"a":""},"gt":{"a":1},"gte":{"a":1},"lt":{},"lte":{},"values":{},"nums":{},"non_null":{"a":null},"lists":{},"lines":{},"ptrs":{}}`},
	{"rules_maps", `{"min":{"a":1},"max":{},"len":{"a":""},"gt":{"a":1},"gte":{"a":1},"lt":{},"lte":{},"values":{},"nums":{},"non_null":{"a":0},"lists":{},"lines":{},"ptrs":{}}`},
	// Floats: a number beyond a bound that rounds onto it, and one inside
	// an exclusive bound that rounds onto it.
	{"rules_numbers", `{"min":1,"max":10,"len":7,"gt":1,"gte":-3,"lt":99,"lte":99,"range":10,"neg":-1,"big":18446744073709551001,"low":-9223372036854775001,"fmin":0.5,"fgt":1e-400,"flt":0,"fboth":0,"f32max":0,"f32gt":1}`},
	{"rules_numbers", `{"min":1,"max":10,"len":7,"gt":1,"gte":-3,"lt":99,"lte":99,"range":10,"neg":-1,"big":18446744073709551001,"low":-9223372036854775001,"fmin":0.49999999999999999999999,"fgt":1,"flt":0,"fboth":2.50000000000000000001,"f32max":0,"f32gt":1}`},
	{"rules_numbers", `{"min":1,"max":10,"len":7,"gt":1,"gte":-3,"lt":99,"lte":99,"range":10,"neg":-1,"big":18446744073709551001,"low":-9223372036854775001,"fmin":0.5,"fgt":1,"flt":1.49999999999999999999999,"fboth":0,"f32max":0,"f32gt":1}`},
	{"sized_numbers", `{"i8":0,"i16":0,"i32":0,"i64":0,"i":0,"u8":0,"u16":0,"u32":0,"u64":0,"u":0,"f32":3.40282347e+38,"f64":1.7976931348623158e308}`},
	{"sized_numbers", `{"i8":0,"i16":0,"i32":0,"i64":0,"i":0,"u8":0,"u16":0,"u32":0,"u64":0,"u":0,"f32":3.4028234663852886e+38,"f64":-1.7976931348623157e308}`},
	// A float32 bound that float32 cannot hold (0.3) refused the bound
	// itself; 0.1 under gt=0.1 rounds onto the bound's float.
	{"rules_numbers", `{"min":1,"max":10,"len":7,"gt":1,"gte":-3,"lt":99,"lte":99,"range":10,"neg":-1,"big":18446744073709551001,"low":-9223372036854775001,"fmin":0.5,"fgt":1,"flt":0,"fboth":0,"f32max":0.3,"f32gt":0.10000000000000000001}`},
	{"rules_numbers", `{"min":1,"max":10,"len":7,"gt":1,"gte":-3,"lt":99,"lte":99,"range":10,"neg":-1,"big":18446744073709551001,"low":-9223372036854775001,"fmin":0.5,"fgt":1,"flt":0,"fboth":0,"f32max":0.30000000000000000001,"f32gt":0.1}`},
	// Rules of a recursive type held at its first levels only.
	{"mutual_recursion", `{"op":"add","args":[{"op":"mul","args":[{"op":""}]}]}`},
	{"mutual_recursion", `{"op":"let","let":{"name":"x","value":{"op":"let","let":{"name":"","value":{"op":"add"}}}}}`},
	{"same_name", `{"local":{"name":"a","children":[{"name":"b","children":[{"name":"","children":[]}]}]},"other":{"label":"x","children":[{"label":"y","children":[{"label":""}]}]},"item":{"name":"a","price":0},"item2":{"code":"abcd"},"others":[]}`},
	// required on a pointer to a number means non-null, and 0 is fine.
	{"pointers", `{"required":"x","quantity":0,"items":[],"by_key":{}}`},
	{"pointers", `{"required":"x","quantity":null,"items":[],"by_key":{}}`},
	// Rules after omitempty: a number that is not 0 as written but rounds
	// to 0 must keep them, as the schema says.
	{"omitempty_rules", `{"code":"","tags":[],"ratio":1e-400}`},
	{"omitempty_rules", `{"code":"","tags":[],"ratio":-0.0}`},
	// Free-form values carry any JSON number.
	{"free_form", `{"any":1e400,"raw":-1e400,"meta":{"a":1e400}}`},
	{"free_form", `{"any":[1e400],"raw":null,"meta":{},"list":[-1e400]}`},
}

// formatMessages are the beginnings of carmy's messages for values whose
// only fault is their format.
var formatMessages = []string{
	"must be a valid email address",
	"must be a valid URL",
	"must be a valid URI",
	"must be a valid UUID",
	"must be a valid uuid",
	"must be an RFC 3339 date-time",
}

func TestPromise(t *testing.T) {
	t.Parallel()
	b := carmy.New()
	type target struct {
		corpus, tool string
		doc          map[string]any // the published input schema
		schema       *jsonschema.Schema
	}
	var targets []*target
	byCorpus := map[string]*target{}
	for _, c := range corpus.Types {
		if c.Tool == nil {
			continue
		}
		tg := &target{corpus: c.Name, tool: "promise_" + c.Name}
		targets = append(targets, tg)
		byCorpus[c.Name] = tg
		b.Tool(c.Tool(tg.tool))
	}
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, tg := range targets {
		meta, ok := reg.Lookup(tg.tool)
		if !ok {
			t.Fatalf("tool %s is missing", tg.tool)
		}
		if tg.schema, err = compileSchema(tg.tool, meta.InputSchema); err != nil {
			t.Fatalf("%s: input schema does not compile: %v", tg.corpus, err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(meta.InputSchema)))
		if err != nil {
			t.Fatal(err)
		}
		tg.doc = v.(map[string]any)
	}

	var total, accepted, formatOnly, failures int
	check := func(tg *target, input string) {
		total++
		verdict, fields := execute(t, reg, tg.tool, input)
		valid, verr := oracle(tg.schema, input)
		if verdict {
			accepted++
		}
		switch {
		case verdict == valid:
			return
		case !verdict && valid && onlyFormats(fields):
			formatOnly++
			return
		}
		failures++
		if failures > 25 {
			return
		}
		t.Errorf("%s: carmy and the schema disagree\ninput:  %s\ncarmy:  %s %v\nschema: %s %v",
			tg.corpus, input, verdictWord(verdict), fields, verdictWord(valid), verr)
	}

	for _, rc := range promiseRegressions {
		tg := byCorpus[rc.corpus]
		if tg == nil {
			t.Fatalf("regression for unknown corpus type %s", rc.corpus)
		}
		check(tg, rc.input)
	}

	rng := rand.New(rand.NewPCG(*promiseSeed, 0x5eed))
	for _, tg := range targets {
		before, acceptedBefore := total, accepted
		for range *promiseCount {
			g := &gen{r: rng, root: tg.doc}
			check(tg, g.document())
		}
		n, a := total-before, accepted-acceptedBefore
		if *promiseCount >= 50 && (a == 0 || a == n) {
			t.Errorf("%s: %d of %d generated inputs accepted; the generator must produce both valid and invalid ones", tg.corpus, a, n)
		}
	}
	if *promiseCount >= 100 && total < 2000 {
		t.Errorf("only %d inputs checked; the promise needs at least 2000", total)
	}
	if failures > 25 {
		t.Errorf("... and %d more disagreements", failures-25)
	}
	if testing.Verbose() {
		t.Logf("%d inputs, %d accepted, %d rejected only for formats", total, accepted, formatOnly)
	}
}

func verdictWord(ok bool) string {
	if ok {
		return "accepted"
	}
	return "rejected"
}

// execute runs one call and reports whether carmy accepted the input.
func execute(t *testing.T, reg *carmy.Registry, tool, input string) (bool, []carmy.FieldError) {
	t.Helper()
	var raw json.RawMessage
	if input != "" {
		raw = json.RawMessage(input)
	}
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: tool, Input: raw})
	if err == nil {
		return true, nil
	}
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput {
		t.Fatalf("%s: input %s: unexpected error %v", tool, input, err)
	}
	if len(e.Fields) == 0 {
		t.Errorf("%s: input %s: invalid_input without field errors: %v", tool, input, err)
	}
	return false, e.Fields
}

// oracle validates an input against the compiled schema. An absent input
// and null count as {}, as they do for a tool's input.
func oracle(s *jsonschema.Schema, input string) (bool, error) {
	text := strings.TrimSpace(input)
	if text == "" || text == "null" {
		text = "{}"
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		panic(fmt.Sprintf("the generator wrote invalid JSON %s: %v", input, err))
	}
	err = s.Validate(v)
	return err == nil, err
}

func onlyFormats(fields []carmy.FieldError) bool {
	for _, f := range fields {
		if !slices.ContainsFunc(formatMessages, func(p string) bool { return strings.HasPrefix(f.Message, p) }) {
			return false
		}
	}
	return len(fields) > 0
}

// gen writes JSON documents for a schema: valid ones with the values where
// mistakes hide (bounds, lengths in characters, notations, nulls), and, at
// a rate chosen per document, mutated ones.
type gen struct {
	r     *rand.Rand
	root  map[string]any
	rate  float64 // chance that a value is mutated
	depth int
	b     strings.Builder
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(n int) int { return g.r.IntN(n) }

// document writes one input.
func (g *gen) document() string {
	switch x := g.r.IntN(100); {
	case x < 35:
		g.rate = 0
	case x < 65:
		g.rate = 0.04
	case x < 90:
		g.rate = 0.12
	default:
		g.rate = 0.35
	}
	switch x := g.r.IntN(200); x {
	case 0:
		return ""
	case 1:
		return "null"
	case 2:
		return "[]"
	case 3:
		return `"{}"`
	}
	g.b.Reset()
	g.value(g.root)
	return g.b.String()
}

func (g *gen) w(s string) { g.b.WriteString(s) }

// value writes a value for schema s.
func (g *gen) value(s map[string]any) {
	if ref, ok := s["$ref"].(string); ok {
		target, ok := resolvePointer(g.root, ref)
		if !ok {
			panic("unresolved " + ref)
		}
		s = target.(map[string]any)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		alt := alts[g.pick(len(alts))].(map[string]any)
		if g.depth > 3 {
			for _, a := range alts { // prefer null deep down, to end recursion
				if a.(map[string]any)["type"] == "null" {
					alt = a.(map[string]any)
				}
			}
		}
		g.value(alt)
		return
	}
	if g.rate > 0 && g.chance(g.rate) {
		g.mutant(s)
		return
	}
	types := schemaTypes(s)
	if slices.Contains(types, "null") && g.chance(0.15) {
		g.w("null")
		return
	}
	if enum, ok := s["enum"].([]any); ok && g.chance(0.9) {
		g.literal(enum[g.pick(len(enum))])
		return
	}
	switch {
	case len(types) == 0:
		g.anyValue(2)
	case types[0] == "null":
		g.w("null")
	case types[0] == "boolean":
		g.w(strconv.FormatBool(g.chance(0.5)))
	case types[0] == "integer":
		g.w(g.integerText(g.integer(s, false)))
	case types[0] == "number":
		g.w(g.number(s, false))
	case types[0] == "string":
		g.str(s, false)
	case types[0] == "array":
		g.array(s, false)
	case types[0] == "object":
		g.object(s, false)
	}
}

// mutant writes a value that is probably wrong for s.
func (g *gen) mutant(s map[string]any) {
	types := schemaTypes(s)
	if g.chance(0.25) || len(types) == 0 {
		wrong := []string{`null`, `"2"`, `2`, `2.5`, `true`, `[]`, `{}`, `[null]`, `{"a":1}`, `""`}
		g.w(wrong[g.pick(len(wrong))])
		return
	}
	if enum, ok := s["enum"].([]any); ok && g.chance(0.5) {
		switch v := enum[0].(type) {
		case string:
			bad := []string{strings.ToUpper(v), v + " ", "", v + "\u0301", "x" + v}
			g.quote(bad[g.pick(len(bad))])
		case json.Number:
			r := ratOf(v)
			g.w(g.integerText(new(big.Int).Add(r.Num(), big.NewInt(int64(g.pick(3)-1+len(enum))))))
		default:
			g.w(`"nope"`)
		}
		return
	}
	switch types[0] {
	case "boolean":
		bad := []string{`"true"`, `0`, `1`, `"false"`}
		g.w(bad[g.pick(len(bad))])
	case "integer":
		if g.chance(0.3) {
			bad := []string{`1.5`, `-0.5`, `2.0000000000000000001`, `1e400`, `-1e400`, `1e-400`, `"1"`, `18446744073709551616`, `-9223372036854775809`, `9223372036854775808`, `1E19`, `-1e19`}
			g.w(bad[g.pick(len(bad))])
			return
		}
		g.w(g.integerText(g.integer(s, true)))
	case "number":
		g.w(g.number(s, true))
	case "string":
		g.str(s, true)
	case "array":
		g.array(s, true)
	case "object":
		g.object(s, true)
	default:
		g.w(`"x"`)
	}
}

func schemaTypes(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, x.(string))
		}
		// the non-null type first
		slices.SortFunc(out, func(a, b string) int {
			if a == "null" {
				return 1
			}
			if b == "null" {
				return -1
			}
			return 0
		})
		return out
	}
	return nil
}

// literal writes an enum value.
func (g *gen) literal(v any) {
	switch v := v.(type) {
	case nil:
		g.w("null")
	case string:
		g.quote(v)
	case json.Number:
		r := ratOf(v)
		if r.IsInt() {
			g.w(g.integerText(r.Num()))
		} else {
			g.w(string(v))
		}
	case bool:
		g.w(strconv.FormatBool(v))
	default:
		b, _ := json.Marshal(v)
		g.w(string(b))
	}
}

func ratOf(v any) *big.Rat {
	r, ok := new(big.Rat).SetString(fmt.Sprint(v))
	if !ok {
		panic(fmt.Sprintf("not a number: %v", v))
	}
	return r
}

func bound(s map[string]any, key string) *big.Rat {
	if v, ok := s[key]; ok {
		return ratOf(v)
	}
	return nil
}

// intRange returns the inclusive integer bounds of s; nil when unbounded.
func intRange(s map[string]any) (lo, hi *big.Int) {
	if b := bound(s, "minimum"); b != nil {
		lo = ceil(b)
	}
	if b := bound(s, "exclusiveMinimum"); b != nil {
		x := new(big.Int).Add(floor(b), big.NewInt(1))
		if lo == nil || x.Cmp(lo) > 0 {
			lo = x
		}
	}
	if b := bound(s, "maximum"); b != nil {
		hi = floor(b)
	}
	if b := bound(s, "exclusiveMaximum"); b != nil {
		x := new(big.Int).Sub(ceil(b), big.NewInt(1))
		if hi == nil || x.Cmp(hi) < 0 {
			hi = x
		}
	}
	return lo, hi
}

func floor(r *big.Rat) *big.Int {
	// Euclidean division: toward negative infinity, as the denominator
	// is positive.
	return new(big.Int).Div(r.Num(), r.Denom())
}

func ceil(r *big.Rat) *big.Int {
	f := floor(r)
	if r.IsInt() {
		return f
	}
	return f.Add(f, big.NewInt(1))
}

// integer picks an integer for s: one inside the bounds, or (bad) one just
// outside them.
func (g *gen) integer(s map[string]any, bad bool) *big.Int {
	lo, hi := intRange(s)
	one := big.NewInt(1)
	var cands []*big.Int
	if bad {
		if lo != nil {
			cands = append(cands, new(big.Int).Sub(lo, one))
		}
		if hi != nil {
			cands = append(cands, new(big.Int).Add(hi, one))
		}
		if len(cands) > 0 {
			return cands[g.pick(len(cands))]
		}
		return big.NewInt(g.r.Int64N(100) - 50)
	}
	small := big.NewInt(g.r.Int64N(41) - 20)
	cands = append(cands, small, big.NewInt(0), big.NewInt(1))
	if lo != nil {
		cands = append(cands, lo, new(big.Int).Add(lo, one), new(big.Int).Add(lo, big.NewInt(g.r.Int64N(5))))
	}
	if hi != nil {
		cands = append(cands, hi, new(big.Int).Sub(hi, one), new(big.Int).Sub(hi, big.NewInt(g.r.Int64N(5))))
	}
	if lo != nil && hi != nil {
		span := new(big.Int).Sub(hi, lo)
		if span.Sign() > 0 {
			off := new(big.Int).SetUint64(g.r.Uint64())
			off.Lsh(off, 64).Or(off, new(big.Int).SetUint64(g.r.Uint64()))
			off.Mod(off, span)
			cands = append(cands, off.Add(off, lo))
		}
	}
	v := cands[g.pick(len(cands))]
	// Keep a valid pick inside the bounds.
	if lo != nil && v.Cmp(lo) < 0 {
		v = lo
	}
	if hi != nil && v.Cmp(hi) > 0 {
		v = hi
	}
	return v
}

// integerText writes an integer in one of JSON's notations for it.
func (g *gen) integerText(v *big.Int) string {
	s := v.String()
	switch g.r.IntN(12) {
	case 0:
		return s + ".0"
	case 1:
		return s + "e0"
	case 2:
		return s + "E+0"
	case 3:
		return s + ".000"
	case 4:
		if v.Sign() == 0 {
			return "0e-1"
		}
		if strings.HasSuffix(s, "0") {
			return strings.TrimSuffix(s, "0") + "e1"
		}
		return s + "0e-1"
	case 5:
		if v.Sign() == 0 {
			return []string{"-0", "-0.0", "0e10", "0.0E-5"}[g.pick(4)]
		}
		// d.ddd notation: 1234 → 1.234e3
		digits := strings.TrimPrefix(s, "-")
		sign := strings.TrimSuffix(s, digits)
		if len(digits) > 1 {
			return sign + digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(len(digits)-1)
		}
		return s
	}
	return s
}

// number writes a number for s, a "number" schema.
func (g *gen) number(s map[string]any, bad bool) string {
	lo, hi := bound(s, "minimum"), bound(s, "maximum")
	xlo, xhi := bound(s, "exclusiveMinimum"), bound(s, "exclusiveMaximum")
	tiny, _ := new(big.Rat).SetString("1e-25") // below float64's precision near 1
	var cands []string
	add := func(r *big.Rat) { cands = append(cands, ratText(r)) }
	if bad {
		one := big.NewRat(1, 1)
		if lo != nil {
			add(new(big.Rat).Sub(lo, one))
			add(new(big.Rat).Sub(lo, tiny))
		}
		if hi != nil {
			add(new(big.Rat).Add(hi, one))
			add(new(big.Rat).Add(hi, tiny))
		}
		if xlo != nil {
			add(xlo)
			add(new(big.Rat).Sub(xlo, tiny))
		}
		if xhi != nil {
			add(xhi)
			add(new(big.Rat).Add(xhi, tiny))
		}
		cands = append(cands, "1e400", "-1e400", "3.40282347e+38", "-3.40282347e38", "1.7976931348623158e308", "1.8e308", "3.5e38")
		return cands[g.pick(len(cands))]
	}
	cands = append(cands, "0", "-0.0", "1.5", "-0.25", "2.0", "1e2", "2.5E-3", "1e-400", "0.1",
		strconv.Itoa(g.r.IntN(200)-100)+"."+strconv.Itoa(g.r.IntN(1000)))
	if lo != nil {
		add(lo)
		add(new(big.Rat).Add(lo, tiny))
	}
	if hi != nil {
		add(hi)
		add(new(big.Rat).Sub(hi, tiny))
	}
	if xlo != nil {
		add(new(big.Rat).Add(xlo, tiny))
		add(new(big.Rat).Add(xlo, big.NewRat(1, 1000)))
	}
	if xhi != nil {
		add(new(big.Rat).Sub(xhi, tiny))
		add(new(big.Rat).Sub(xhi, big.NewRat(1, 1000)))
	}
	return cands[g.pick(len(cands))]
}

// ratText writes a rational with a finite decimal expansion exactly.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := r.FloatString(40)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Characters for strings: ASCII, two-, three- and four-byte UTF-8, and a
// combining mark (its own code point).
var runePool = []rune{'a', 'b', 'Z', '0', ' ', '-', '"', '\\', '/', 'é', 'ß', '日', '本', '😀', '𝄞', '\u0301', '\n', '\t', '\x00', '\u2028', '\u00a0'}

func (g *gen) randomString(n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(runePool[g.pick(len(runePool))])
	}
	return b.String()
}

var formatValues = map[string][]string{
	"email":     {"a@example.com", "first.last@sub.example.org", "x+tag@example.io"},
	"uri":       {"https://example.com", "http://example.com/a?b=c", "https://例え.jp/パス"},
	"uuid":      {"0190b3d2-4b7e-7c3a-9f00-1234567890ab", "00000000-0000-0000-0000-000000000000", "F47AC10B-58CC-4372-A567-0E02B2C3D479"},
	"date-time": {"2024-01-02T03:04:05Z", "2024-02-29T23:59:59.999999999+14:00", "1970-01-01T00:00:00-00:30", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000-00:00", "0001-01-01T01:00:00+01:00"},
}

var badFormatValues = map[string][]string{
	"email":     {"not an email", "a@", "@example.com"},
	"uri":       {"not a url", "example", "://x"},
	"uuid":      {"0190b3d2-4b7e-7c3a-9f00", "not-a-uuid", "0190b3d24b7e7c3a9f001234567890ab0"},
	"date-time": {"2024-01-02", "2024-01-02 03:04:05Z", "yesterday", "2024-13-02T03:04:05Z"},
}

var patternValues = []string{"ABC-123", "XYZ-999", "abc-123", "ABC-12", "ABCD-123", "", "AB-1234"}

// durationValues are durations in Go's syntax, at the edges of what
// time.ParseDuration reads; badDurationValues are not.
var (
	durationValues    = []string{"0", "0s", "1h30m", "250ms", "-1.5h", "+2m", ".5s", "1.s", "1us", "1µs", "1μs", "3ns", "1h1m1s1ms1us1ns", "2562047h47m16.854775807s", "-2562047h47m16.854775808s"}
	badDurationValues = []string{"", "1", "1d", "h", "1 h", "1.h5", "--1s", "1hh", "."}
)

// str writes a string for s.
func (g *gen) str(s map[string]any, bad bool) {
	if s["contentEncoding"] == "base64" {
		if bad {
			g.quote([]string{"not base64!", "YQ", "YQ=", "====", "a b"}[g.pick(5)])
			return
		}
		data := make([]byte, g.pick(8))
		for i := range data {
			data[i] = byte(g.r.UintN(256))
		}
		g.quote(base64.StdEncoding.EncodeToString(data))
		return
	}
	if f, ok := s["format"].(string); ok && formatValues[f] != nil {
		if bad {
			g.quote(badFormatValues[f][g.pick(len(badFormatValues[f]))])
		} else {
			g.quote(formatValues[f][g.pick(len(formatValues[f]))])
		}
		return
	}
	if p, ok := s["pattern"].(string); ok && strings.Contains(p, "|ms|s|m|h") {
		if bad {
			g.quote(badDurationValues[g.pick(len(badDurationValues))])
		} else {
			g.quote(durationValues[g.pick(len(durationValues))])
		}
		return
	}
	if ex, ok := s["examples"].([]any); ok && !bad && g.chance(0.8) {
		g.literal(ex[g.pick(len(ex))])
		return
	}
	if _, ok := s["pattern"]; ok {
		g.quote(patternValues[g.pick(len(patternValues))])
		return
	}
	minLen, maxLen := count(s, "minLength", 0), count(s, "maxLength", -1)
	var n int
	switch {
	case bad && minLen > 0 && (maxLen < 0 || g.chance(0.5)):
		n = minLen - 1
	case bad && maxLen >= 0:
		n = maxLen + 1
	case bad:
		g.w(`12`)
		return
	default:
		hi := maxLen
		if hi < 0 {
			hi = minLen + 6
		}
		switch g.pick(3) {
		case 0:
			n = minLen
		case 1:
			n = hi
		default:
			n = minLen + g.pick(hi-minLen+1)
		}
	}
	g.quote(g.randomString(n))
}

func count(s map[string]any, key string, def int) int {
	if v, ok := s[key]; ok {
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil {
			panic(err)
		}
		return n
	}
	return def
}

// quote writes a JSON string, escaping some characters that need no
// escape, with \u escapes and surrogate pairs.
func (g *gen) quote(s string) {
	g.w(`"`)
	for _, c := range s {
		switch {
		case c == '"':
			g.w(`\"`)
		case c == '\\':
			g.w(`\\`)
		case c < 0x20:
			g.w(fmt.Sprintf(`\u%04x`, c))
		case g.chance(0.1) && c > 0xffff:
			r1, r2 := utf16Pair(c)
			g.w(fmt.Sprintf(`\u%04x\u%04X`, r1, r2))
		case g.chance(0.1):
			g.w(fmt.Sprintf(`\u%04x`, c))
		default:
			g.w(string(c))
		}
	}
	g.w(`"`)
}

func utf16Pair(c rune) (rune, rune) {
	c -= 0x10000
	return 0xd800 + (c>>10)&0x3ff, 0xdc00 + c&0x3ff
}

// array writes an array for s.
func (g *gen) array(s map[string]any, bad bool) {
	minN, maxN := count(s, "minItems", 0), count(s, "maxItems", -1)
	var n int
	switch {
	case bad && minN > 0 && (maxN < 0 || g.chance(0.5)):
		n = minN - 1
	case bad && maxN >= 0:
		n = maxN + 1
	case bad:
		g.w(`{}`)
		return
	default:
		hi := maxN
		if hi < 0 {
			hi = minN + 3
		}
		if g.depth > 3 {
			hi = minN
		}
		n = minN + g.pick(hi-minN+1)
	}
	items, _ := s["items"].(map[string]any)
	g.depth++
	g.w("[")
	for i := range n {
		if i > 0 {
			g.w(",")
		}
		g.value(items)
	}
	g.w("]")
	g.depth--
}

var mapKeys = []string{"a", "b", "k1", "a.b", "with space", "日本", "", "x-y", "ключ", "😀", "A", "0"}

// object writes an object for s: a struct (properties) or a map.
func (g *gen) object(s map[string]any, bad bool) {
	props, isStruct := s["properties"].(map[string]any)
	if !isStruct {
		if _, ok := s["additionalProperties"].(map[string]any); !ok {
			isStruct = true // no properties and additionalProperties false
		}
	}
	type member struct {
		key    string
		schema map[string]any
		raw    string
	}
	var members []member
	if isStruct {
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				required[k.(string)] = true
			}
		}
		for _, k := range slices.Sorted(mapsKeys(props)) {
			if required[k] || (g.depth <= 3 && g.chance(0.5)) {
				members = append(members, member{key: k, schema: props[k].(map[string]any)})
			}
		}
		if bad || (g.rate > 0 && g.chance(g.rate)) {
			// An unknown name: a known one in the wrong case, or another.
			// Names stay unique: a repeated name is not JSON the oracle
			// can judge.
			extra := []string{"extra", "unknown", "_", ""}[g.pick(4)]
			if len(props) > 0 && g.chance(0.5) {
				extra = strings.ToUpper(slices.Sorted(mapsKeys(props))[g.pick(len(props))])
			}
			for props[extra] != nil {
				extra += "_"
			}
			switch {
			case g.chance(0.4) && len(members) > 0:
				i := g.pick(len(members))
				members = slices.Delete(members, i, i+1)
			default:
				members = append(members, member{key: extra, raw: []string{"1", "null", `"x"`}[g.pick(3)]})
			}
		}
	} else {
		minN, maxN := count(s, "minProperties", 0), count(s, "maxProperties", -1)
		hi := maxN
		if hi < 0 {
			hi = minN + 3
		}
		if g.depth > 3 {
			hi = minN
		}
		n := minN + g.pick(hi-minN+1)
		if bad {
			switch {
			case minN > 0 && (maxN < 0 || g.chance(0.5)):
				n = minN - 1
			case maxN >= 0:
				n = maxN + 1
			default:
				g.w(`[]`)
				return
			}
		}
		elem := s["additionalProperties"].(map[string]any)
		keys := slices.Clone(mapKeys)
		g.r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i := range n {
			k := keys[i%len(keys)]
			if i >= len(keys) {
				k += strconv.Itoa(i)
			}
			members = append(members, member{key: k, schema: elem})
		}
	}
	g.r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	g.depth++
	g.w("{")
	for i, m := range members {
		if i > 0 {
			g.w(",")
		}
		g.quote(m.key)
		g.w(":")
		if m.schema == nil {
			g.w(m.raw)
		} else {
			g.value(m.schema)
		}
	}
	g.w("}")
	g.depth--
}

// anyValue writes any JSON value.
func (g *gen) anyValue(depth int) {
	x := g.pick(10)
	if depth <= 0 && x >= 8 {
		x = 0
	}
	switch x {
	case 0:
		g.w([]string{"0", "-1.5e3", "12345678901234567890123", "1e400", "-1e-400", "2.0"}[g.pick(6)])
	case 1, 2:
		g.quote(g.randomString(g.pick(4)))
	case 3:
		g.w("true")
	case 4:
		g.w("false")
	case 5, 6:
		g.w("null")
	case 7:
		g.w(`""`)
	case 8:
		g.w("[")
		for i := range g.pick(3) {
			if i > 0 {
				g.w(",")
			}
			g.anyValue(depth - 1)
		}
		g.w("]")
	case 9:
		g.w("{")
		for i := range g.pick(3) {
			if i > 0 {
				g.w(",")
			}
			g.quote(mapKeys[i])
			g.w(":")
			g.anyValue(depth - 1)
		}
		g.w("}")
	}
}

// TestPromiseGenerator checks the generator's own helpers.
func TestPromiseGenerator(t *testing.T) {
	t.Parallel()
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	for range 200 {
		v := big.NewInt(g.r.Int64N(2000) - 1000)
		text := g.integerText(v)
		r, ok := new(big.Rat).SetString(text)
		if !ok || !r.IsInt() || r.Num().Cmp(v) != 0 {
			t.Fatalf("integerText(%v) = %s", v, text)
		}
	}
	g.quote("a😀é\"\\\n")
	var s string
	if err := json.Unmarshal([]byte(g.b.String()), &s); err != nil || s != "a😀é\"\\\n" || utf8.RuneCountInString(s) != 6 {
		t.Fatalf("quote wrote %s (%q, %v)", g.b.String(), s, err)
	}
}
