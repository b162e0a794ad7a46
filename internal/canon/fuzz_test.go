package canon

import (
	"encoding/json"
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
		form, err := Form(doc)
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
		again, err := Form(form)
		if err != nil || string(again) != string(form) {
			t.Fatalf("Form is not a fixed point: %s → %s (%v)", form, again, err)
		}
		indented := jsontext.Value(append([]byte(nil), doc...))
		if indented.Indent() == nil {
			if other, err := Form(indented); err != nil || string(other) != string(form) {
				t.Fatalf("indentation changed the form: %s vs %s (%v)", other, form, err)
			}
		}
	})
}

func isBlankOrNull(doc []byte) bool {
	t := trimJSONSpace(doc)
	return len(t) == 0 || string(t) == "null"
}
