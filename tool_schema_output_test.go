package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
	"github.com/carmy-dev/carmy/internal/shape"
)

var outputCount = flag.Int("output.n", 100, "values TestOutputPromise encodes per corpus type")

// The output promise: every output carmy sends conforms to the published
// output schema, and decodes back to the value the tool returned.
// TestOutputPromise checks it for every corpus type, against the same
// independent validator as TestPromise. The values are built from
// documents generated from the schema (so that they keep the rules, the
// formats and the patterns), decoded into the Go type, then changed on the
// Go side where JSON has no say: nil slices, maps and pointers, zero
// members. A changed value may break a rule; the runtime must then refuse
// it as internal rather than send it.
func TestOutputPromise(t *testing.T) {
	t.Parallel()
	b := carmy.New().Logger(slog.New(slog.DiscardHandler))
	var cur any
	next := func() any { return cur }
	for _, c := range corpus.Types {
		b.Tool(c.Output("out_"+c.Name, next))
	}
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	rng := rand.New(rand.NewPCG(*promiseSeed, 0x0a7))
	var sent, refused, failures int
	for _, c := range corpus.Types {
		meta, _ := reg.Lookup("out_" + c.Name)
		schema, err := compileSchema("out_"+c.Name, meta.OutputSchema)
		if err != nil {
			t.Fatalf("%s: output schema does not compile: %v", c.Name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(meta.OutputSchema))
		if err != nil {
			t.Fatal(err)
		}
		node, err := shape.Of(c.Go)
		if err != nil {
			t.Fatal(err)
		}
		typeSent := 0
		for range *outputCount {
			v, ok := randomValue(rng, node, doc.(map[string]any))
			if !ok {
				continue
			}
			cur = v.Interface()
			res, err := reg.Execute(context.Background(), carmy.Call{Tool: "out_" + c.Name})
			if err != nil {
				var e *carmy.Error
				if !errors.As(err, &e) || e.Code != carmy.CodeInternal {
					t.Fatalf("%s: unexpected error %v", c.Name, err)
				}
				refused++
				continue
			}
			sent++
			typeSent++
			fail := func(format string, args ...any) {
				failures++
				if failures <= 20 {
					t.Errorf("%s: output %s: "+format, append([]any{c.Name, res.Output}, args...)...)
				}
			}
			x, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.Output))
			if err != nil {
				fail("is not JSON: %v", err)
				continue
			}
			if err := schema.Validate(x); err != nil {
				fail("does not conform to the output schema: %v", err)
				continue
			}
			back := reflect.New(c.Go).Elem()
			if problems := shape.DecodeValue(node, res.Output, back); len(problems) > 0 {
				fail("does not decode: %v", problems)
				continue
			}
			if !sameValue(v, back) {
				fail("decodes to %#v, not %#v", back.Interface(), v.Interface())
			}
		}
		if *outputCount >= 50 && typeSent < *outputCount/4 {
			t.Errorf("%s: only %d of %d values were sent; the generator must produce valid values", c.Name, typeSent, *outputCount)
		}
	}
	if *outputCount >= 100 && sent < 3000 {
		t.Errorf("only %d outputs checked; the promise needs at least 3000", sent)
	}
	t.Logf("%d outputs sent and checked, %d refused for breaking their rules, %d non-conforming", sent, refused, failures)
}

// randomValue makes a value of the type n models: a document generated
// from the schema, decoded, then changed where JSON has no say.
func randomValue(rng *rand.Rand, n *shape.Node, doc map[string]any) (reflect.Value, bool) {
	for range 500 {
		g := &gen{r: rng, root: doc}
		g.value(doc)
		v := reflect.New(n.Type).Elem()
		if problems := shape.DecodeValue(n, []byte(g.b.String()), v); len(problems) > 0 {
			continue // a pattern or format the generator cannot meet
		}
		if problems := shape.Check(n, v, nil); len(problems) > 0 {
			continue // a float the generator put beyond a bound, on purpose
		}
		if rng.IntN(3) == 0 {
			mutate(rng, v, 0)
		}
		return v, true
	}
	return reflect.Value{}, false
}

// mutate sets some slices, maps and pointers inside v to nil and some
// members to their zero value.
func mutate(rng *rand.Rand, v reflect.Value, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer:
		if !v.IsNil() && rng.IntN(6) == 0 {
			v.SetZero()
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(rng, v.Elem(), depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			mutate(rng, v.Index(i), depth+1)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				if rng.IntN(12) == 0 {
					f.SetZero()
				} else {
					mutate(rng, f, depth+1)
				}
			}
		}
	}
}

// sameValue compares what JSON carries of two values: nil and empty
// slices and maps are the same, so are a nil pointer and a pointer to one,
// times are compared as instants, raw JSON by its meaning.
func sameValue(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case reflect.TypeFor[time.Time]():
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	case reflect.TypeFor[[]byte]():
		return bytes.Equal(a.Bytes(), b.Bytes())
	}
	if a.Type().Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Uint8 && strings.Contains(a.Type().String(), "RawMessage") {
		return compactJSON(a.Bytes()) == compactJSON(b.Bytes())
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return isNull(a) && isNull(b)
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() && !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// isNull reports whether v encodes as null: a nil pointer, or a pointer to
// one (JSON has one null for both).
func isNull(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return false
}

func compactJSON(b []byte) string {
	var v any
	if len(b) > 0 && json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	return fmt.Sprintf("%#v", v)
}
