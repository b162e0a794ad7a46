package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestForm(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{` null `, `{}`},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{ "n" : 2.0 }`, `{"n":2}`},
		{`{"n":2e0}`, `{"n":2}`},
		{`{"n":20e-1}`, `{"n":2}`},
		{`{"n":0.2e1}`, `{"n":2}`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":-0.0}`, `{"n":0}`},
		{`{"n":0e-999999999999999999999}`, `{"n":0}`},
		{`{"n":1.5}`, `{"n":1.5}`},
		{`{"n":-1.50}`, `{"n":-1.5}`},
		{`{"n":1e21}`, `{"n":1e+21}`},
		{`{"n":100000000000000000000}`, `{"n":100000000000000000000}`},
		{`{"n":1000000000000000000000}`, `{"n":1e+21}`},
		{`{"n":123456789012345678901234}`, `{"n":1.23456789012345678901234e+23}`},
		{`{"n":18446744073709551615}`, `{"n":18446744073709551615}`},
		{`{"n":1.8446744073709551615e19}`, `{"n":18446744073709551615}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740993}`},
		{`{"n":1e400}`, `{"n":1e+400}`},
		{`{"n":10e399}`, `{"n":1e+400}`},
		{`{"n":-1.25E-400}`, `{"n":-1.25e-400}`},
		{`{"n":0.000001}`, `{"n":0.000001}`},
		{`{"n":1e-7}`, `{"n":1e-7}`},
		{`{"n":0.1}`, `{"n":0.1}`},
		{`{"n":0.30000000000000004}`, `{"n":0.30000000000000004}`},
		{`{"n":1.5e300}`, `{"n":1.5e+300}`},
		// Exact where float64 would round: these are not 1000000.
		{`{"n":1000000.000000000001}`, `{"n":1000000.000000000001}`},
		{`{"n":1000000000000000001e-12}`, `{"n":1000000.000000000001}`},
		{`{"n":0.1000000000000000000000000001}`, `{"n":0.1000000000000000000000000001}`},
		// Exponents beyond int64.
		{`{"n":1e99999999999999999999}`, `{"n":1e+99999999999999999999}`},
		{`{"n":12.5e-99999999999999999999}`, `{"n":1.25e-99999999999999999998}`},
		{`{"s":"\u0041\u00e9\n\u001f\"\\/"}`, `{"s":"Aé\n\u001f\"\\/"}`},
		{`{"\u20ac":1,"\ud83d\ude00":2,"z":3}`, `{"z":3,"€":1,"😀":2}`},
		{`[1,{"b":[true,false,null],"a":{}}]`, `[1,{"a":{},"b":[true,false,null]}]`},
		{`{"a":null}`, `{"a":null}`}, // without a model, null is a value
	}
	for _, tt := range tests {
		got, err := Form([]byte(tt.in), nil)
		if err != nil || string(got) != tt.want {
			t.Errorf("Form(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// model is a Model for tests: members listed in optional drop a null,
// everything below has the same model.
type model struct{ optional map[string]bool }

func (m model) Member(name string) (Model, bool) { return m, m.optional[name] }
func (m model) Items() Model                     { return m }

func TestFormWithModel(t *testing.T) {
	m := model{optional: map[string]bool{"tag": true, "inner": true}}
	tests := []struct{ in, want string }{
		{`{"text":"x","tag":null}`, `{"text":"x"}`},
		{`{"text":"x"}`, `{"text":"x"}`},
		{`{"text":null}`, `{"text":null}`}, // not optional: null is a value
		{`{"tag":"t","text":"x"}`, `{"tag":"t","text":"x"}`},
		{`{"items":[{"tag":null,"n":1.0}]}`, `{"items":[{"n":1}]}`},
		{`{"inner":{"tag":null,"x":[null]}}`, `{"inner":{"x":[null]}}`},
	}
	for _, tt := range tests {
		got, err := Form([]byte(tt.in), m)
		if err != nil || string(got) != tt.want {
			t.Errorf("Form(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestFormRejects(t *testing.T) {
	for _, doc := range []string{`{} {}`, `{"a":}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `[1,]`} {
		if got, err := Form([]byte(doc), nil); err == nil {
			t.Errorf("Form(%q) = %s; want an error", doc, got)
		}
	}
}

func digest(doc string) (string, error) {
	f, err := Form([]byte(doc), nil)
	return Sum(f), err
}

func TestSum(t *testing.T) {
	same := []string{`{"a":1,"b":[2.0]}`, `{"b":[2],"a":1e0}`, `{ "b" : [ 20E-1 ] , "a" : 0.1e1 }`}
	want, _ := digest(same[0])
	if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
		t.Fatalf("digest %q is not lowercase hex SHA-256", want)
	}
	for _, doc := range same[1:] {
		if got, err := digest(doc); err != nil || got != want {
			t.Errorf("digest(%s) = %s, %v; want %s", doc, got, err, want)
		}
	}
	for _, doc := range []string{`{"b":[3],"a":1}`, `{"a":1.0000000000000000001,"b":[2]}`, `{"a":1,"b":[2],"c":null}`} {
		if got, _ := digest(doc); got == want {
			t.Errorf("digest(%s) = the digest of %s", doc, same[0])
		}
	}
}

// TestFormKeepsEveryDigitOfIntegers: integers are never rounded through
// float64, so integers that differ beyond its precision have different
// forms.
func TestFormKeepsEveryDigitOfIntegers(t *testing.T) {
	tests := []struct{ a, b string }{
		{`{"n":9007199254740992}`, `{"n":9007199254740993}`},
		{`{"n":-9223372036854775808}`, `{"n":-9223372036854775807}`},
		{`{"n":[18446744073709551614]}`, `{"n":[18446744073709551615]}`},
	}
	for _, tt := range tests {
		a, errA := Form([]byte(tt.a), nil)
		b, errB := Form([]byte(tt.b), nil)
		if errA != nil || errB != nil || string(a) == string(b) {
			t.Errorf("Form(%s) = %s, Form(%s) = %s (%v, %v); want two forms", tt.a, a, tt.b, b, errA, errB)
		}
	}
}

func TestDigestIsTheSHA256OfTheForm(t *testing.T) {
	doc := []byte(`{"b":[2.0],"a":"x"}`)
	form, err := Form(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(form)
	if d := Sum(form); d != hex.EncodeToString(sum[:]) {
		t.Fatalf("Sum = %s; want the hex SHA-256 of %s", d, form)
	}
}
