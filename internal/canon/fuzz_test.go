package canon

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzForm checks the canonical form: it exists exactly for valid JSON, it
// is a fixed point, and white space and indentation do not change it.
//
//	go test -run '^$' -fuzz FuzzForm -fuzztime 5m ./internal/canon
func FuzzForm(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[2.0,2e0,-0,1.5e300,"\u00e9"]}`, `{"n":18446744073709551615}`, `[]`, `"x"`, `{"\ud83d\ude00":1,"z":2}`,
		`{"a":{"b":{"c":[true,false,null]}}}`, `{"n":1e400}`, `{"n":0.000001}`, `{"n":1e-7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		form, err := Form(doc, nil)
		valid := jsontext.Value(doc).IsValid() || isBlankOrNull(doc)
		if err != nil {
			if valid {
				t.Fatalf("Form(%q) failed on valid JSON: %v", doc, err)
			}
			return
		}
		if !valid {
			t.Fatalf("Form(%q) = %s for invalid JSON", doc, form)
		}
		if !json.Valid(form) {
			t.Fatalf("Form(%q) = %s, which is not JSON", doc, form)
		}
		again, err := Form(form, nil)
		if err != nil || string(again) != string(form) {
			t.Fatalf("Form is not a fixed point: %s → %s (%v)", form, again, err)
		}
		indented := jsontext.Value(append([]byte(nil), doc...))
		if indented.Indent() == nil {
			if other, err := Form(indented, nil); err != nil || string(other) != string(form) {
				t.Fatalf("indentation changed the form: %s vs %s (%v)", other, form, err)
			}
		}
	})
}

func isBlankOrNull(doc []byte) bool {
	t := trimJSONSpace(doc)
	return len(t) == 0 || string(t) == "null"
}

// FuzzNumber checks that two numbers have the same form exactly when they
// have the same value, computed exactly with math/big.
//
//	go test -run '^$' -fuzz FuzzNumber -fuzztime 5m ./internal/canon
func FuzzNumber(f *testing.F) {
	for _, p := range [][2]string{
		{"1", "1.0"}, {"1", "1e0"}, {"1000000", "1000000.000000000001"}, {"-0", "0e5"},
		{"18446744073709551615", "18446744073709551614"}, {"1e21", "1000000000000000000000"}, {"0.1e-6", "1e-7"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, ok := exact(a)
		if !ok {
			return
		}
		rb, ok := exact(b)
		if !ok {
			return
		}
		fa, err := Form([]byte(a), nil)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := Form([]byte(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		if same := ra.Cmp(rb) == 0; same != (string(fa) == string(fb)) {
			t.Fatalf("%s → %s and %s → %s; equal values: %v", a, fa, b, fb, same)
		}
		if back, ok := exact(string(fa)); !ok || back.Cmp(ra) != 0 {
			t.Fatalf("%s → %s, another value", a, fa)
		}
	})
}

// exact returns the value of a JSON number with a modest exponent.
func exact(lit string) (*big.Rat, bool) {
	if len(lit) > 64 || jsontext.Value(lit).Kind() != '0' || !jsontext.Value(lit).IsValid() {
		return nil, false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		if e, err := strconv.Atoi(lit[i+1:]); err != nil || e > 400 || e < -400 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(lit)
}
