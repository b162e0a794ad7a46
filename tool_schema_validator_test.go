package carmy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-playground/validator/v10"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
	"github.com/carmy-dev/carmy/internal/shape"
)

var validatorCount = flag.Int("validator.n", 250, "inputs TestValidatorPromise checks per corpus type")

// The validator promise: a validate tag means what go-playground/validator
// means by it. TestValidatorPromise runs every type of the validator corpus
// through carmy and through validator.Struct on the decoded value:
//
//   - whatever a tool receives passes validator.Struct (and conforms to the
//     published schema);
//   - an input with every member present (null only for pointers) that
//     encoding/json decodes and validator.Struct accepts, carmy accepts.
//
// Inputs are generated from the published schema, as TestPromise does (half
// of them with every member present), and half of them then have one member, anywhere in the document, made empty
// in a way the validator's omitempty tells apart: "", 0, -0.0, [], {}, null,
// or left out.
//
// Integers written as 2.0 or 2e0 are given to encoding/json as 2, since JSON
// says they are the same number.
//
// The one allowed disagreement: a number that is not 0 as written but
// rounds to 0 (1e-400) is refused by carmy under rules after omitempty,
// since the schema reads it as not 0 while the validator sees the 0 that
// encoding/json decodes.
func TestValidatorPromise(t *testing.T) {
	t.Parallel()
	var got any
	b := carmy.New()
	for _, c := range corpus.ValidatorTypes {
		b.Tool(c.Tool("v_"+c.Name, func(v any) { got = v }))
	}
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	validate := validator.New()

	byName := map[string]corpus.Validated{}
	for _, c := range corpus.ValidatorTypes {
		byName[c.Name] = c
	}
	rng := rand.New(rand.NewPCG(*promiseSeed, 0x7a1))
	var total, accepted, complete, failures int // complete: every member present and validator.Struct accepting
	fail := func(format string, args ...any) {
		failures++
		if failures <= 25 {
			t.Errorf(format, args...)
		}
	}
	for _, c := range corpus.ValidatorTypes {
		tool := "v_" + c.Name
		meta, _ := reg.Lookup(tool)
		schema, err := compileSchema(tool, meta.InputSchema)
		if err != nil {
			t.Fatalf("%s: input schema does not compile: %v", c.Name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(meta.InputSchema))
		if err != nil {
			t.Fatal(err)
		}
		node, err := shape.Of(c.Go)
		if err != nil {
			t.Fatal(err)
		}
		full := requireAll(doc).(map[string]any)
		var regressions []string
		for _, r := range validatorRegressions {
			if _, ok := byName[r.corpus]; !ok {
				t.Fatalf("regression for unknown corpus type %s", r.corpus)
			}
			if r.corpus == c.Name {
				regressions = append(regressions, r.input)
			}
		}
		typeAccepted := 0
		for i := range *validatorCount + len(regressions) {
			var input string
			if i < len(regressions) {
				input = regressions[i]
			} else {
				g := &gen{r: rng, root: doc.(map[string]any)}
				if i%4 >= 2 {
					g.root = full
				}
				input = g.document()
				if i%2 == 1 {
					input = emptyVariant(rng, input)
				}
			}
			total++
			got = nil
			ok, fields := execute(t, reg, tool, input)
			if ok {
				accepted++
				typeAccepted++
				if got == nil {
					t.Fatalf("%s: the tool did not run for %s", c.Name, input)
				}
				if err := validate.Struct(got); err != nil {
					fail("%s: the tool received a value validator.Struct refuses\ninput:     %s\nvalidator: %v", c.Name, input, err)
				}
				if valid, verr := oracle(schema, input); !valid {
					fail("%s: carmy accepted an input its schema refuses\ninput:  %s\nschema: %v", c.Name, input, verr)
				}
			}
			if !presentEverywhere(node, input) {
				continue
			}
			v := reflect.New(c.Go)
			dec := json.NewDecoder(strings.NewReader(integersPlain(input)))
			dec.DisallowUnknownFields()
			if dec.Decode(v.Interface()) != nil || validate.Struct(v.Interface()) != nil {
				continue
			}
			complete++
			if ok || slices.ContainsFunc(fields, func(f carmy.FieldError) bool {
				return strings.HasPrefix(f.Message, "is too close to 0")
			}) {
				continue
			}
			fail("%s: carmy refused an input with every member present that validator.Struct accepts\ninput: %s\ncarmy: %v", c.Name, input, fields)
		}
		if *validatorCount >= 100 && (typeAccepted == 0 || typeAccepted == *validatorCount+len(regressions)) {
			t.Errorf("%s: %d of %d inputs accepted; the generator must produce both valid and invalid ones", c.Name, typeAccepted, *validatorCount)
		}
	}
	if failures > 25 {
		t.Errorf("... and %d more disagreements", failures-25)
	}
	if *validatorCount >= 250 && total < 5000 {
		t.Errorf("only %d inputs checked; the promise needs at least 5000", total)
	}
	if *validatorCount >= 250 && complete < total/10 {
		t.Errorf("only %d of %d inputs had every member present and passed validator.Struct; the generator must make more", complete, total)
	}
	t.Logf("%d inputs of %d types: %d accepted by carmy, each passing validator.Struct; %d with every member present and passing validator.Struct, each accepted by carmy",
		total, len(corpus.ValidatorTypes), accepted, complete)
}

// validatorRegressions are inputs that once reached a tool with a value
// validator.Struct refuses; they are checked before the generated ones.
var validatorRegressions = []struct{ corpus, input string }{
	// After omitempty, a non-nil pointer's value is checked, "" and 0
	// included, and a decoded [] is a non-nil slice.
	{"issue", `{"category":"","tags":["x","y"]}`},
	{"issue", `{"note":"","tags":["x","y"]}`},
	{"issue", `{"count":0,"tags":["x","y"]}`},
	{"issue", `{"tags":[]}`},
	{"issue", `{"category":null,"note":null,"count":null,"tags":["x","z"]}`},
	{"maps", `{"opt":{},"always":{},"len":{"a":true},"req":{}}`},
	{"ptr_collections", `{"list":[],"req":[]}`},
	// -0 is empty to the schema and to the validator's omitempty alike.
	{"omitempty_values", `{"code":"","score":0,"ratio":-0.0}`},
	{"floats", `{"gt":1,"range":0,"opt":-0.0,"elems":[]}`},
}

// requireAll returns a copy of a schema document in which every object
// requires all its properties, so that documents generated from it have
// every member present.
func requireAll(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = requireAll(x)
		}
		if props, ok := v["properties"].(map[string]any); ok {
			var all []any
			for _, k := range slices.Sorted(maps.Keys(props)) {
				all = append(all, k)
			}
			out["required"] = all
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = requireAll(x)
		}
		return out
	}
	return v
}

// emptyVariant makes one member or element of a JSON document, chosen at
// random, empty in one of the ways validator's omitempty tells apart, or
// leaves the member out. A document that is not an object comes back as
// it was.
func emptyVariant(r *rand.Rand, input string) string {
	dec := json.NewDecoder(strings.NewReader(input))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return input
	}
	type slot struct {
		set  func(any)
		drop func()
	}
	var slots []slot
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				slots = append(slots, slot{set: func(x any) { v[k] = x }, drop: func() { delete(v, k) }})
				walk(v[k])
			}
		case []any:
			for i := range v {
				slots = append(slots, slot{set: func(x any) { v[i] = x }})
				walk(v[i])
			}
		}
	}
	walk(root)
	if len(slots) == 0 {
		return input
	}
	s := slots[r.IntN(len(slots))]
	empties := []any{"", json.Number("0"), json.Number("-0.0"), []any{}, map[string]any{}, nil}
	if x := r.IntN(len(empties) + 1); x < len(empties) || s.drop == nil {
		s.set(empties[x%len(empties)])
	} else {
		s.drop()
	}
	out, err := json.Marshal(root)
	if err != nil {
		return input
	}
	return string(out)
}

// integersPlain rewrites the integers of a JSON document written as 2.0 or
// 2e0 as 2: the same number, which encoding/json refuses to decode into a
// Go integer.
func integersPlain(input string) string {
	dec := json.NewDecoder(strings.NewReader(input))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return input
	}
	var plain func(v any) any
	plain = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			if r, ok := new(big.Rat).SetString(string(v)); ok && r.IsInt() {
				return json.Number(r.Num().String())
			}
		case map[string]any:
			for k, x := range v {
				v[k] = plain(x)
			}
		case []any:
			for i, x := range v {
				v[i] = plain(x)
			}
		}
		return v
	}
	out, err := json.Marshal(plain(root))
	if err != nil {
		return input
	}
	return string(out)
}

// presentEverywhere reports whether an input has every member of every
// object of the type n models, and null only where a pointer may be nil.
func presentEverywhere(n *shape.Node, input string) bool {
	dec := json.NewDecoder(strings.NewReader(input))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	return present(n, v)
}

func present(n *shape.Node, v any) bool {
	if n.Kind == shape.KindPtr {
		return v == nil || present(n.Elem, v)
	}
	if v == nil {
		return false
	}
	switch n.Kind {
	case shape.KindStruct:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if len(m) != len(n.Fields) {
			return false // an unknown member, which encoding/json may match case-insensitively
		}
		for _, f := range n.Fields {
			x, ok := m[f.Name]
			if !ok || !present(f.Node, x) {
				return false
			}
		}
	case shape.KindSlice, shape.KindArray:
		items, ok := v.([]any)
		if !ok || n.Kind == shape.KindArray && len(items) != n.Len {
			return false // encoding/json fills a short array with zeros
		}
		for _, x := range items {
			if !present(n.Elem, x) {
				return false
			}
		}
	case shape.KindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, x := range m {
			if !present(n.Elem, x) {
				return false
			}
		}
	}
	return true
}
