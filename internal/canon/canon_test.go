package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestForm(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{` null `, `{}`},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{ "n" : 2.0 }`, `{"n":2}`},
		{`{"n":2e0}`, `{"n":2}`},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":-0.0}`, `{"n":0}`},
		{`{"n":1.5}`, `{"n":1.5}`},
		{`{"n":1e21}`, `{"n":1e+21}`},
		{`{"n":18446744073709551615}`, `{"n":18446744073709551615}`},
		{`{"n":1.8446744073709551615e19}`, `{"n":18446744073709551615}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740993}`},
		{`{"n":1e400}`, `{"n":1e400}`},
		{`{"s":"\u0041\u00e9\n\u001f\"\\/"}`, `{"s":"Aé\n\u001f\"\\/"}`},
		{`{"\u20ac":1,"\ud83d\ude00":2,"z":3}`, `{"z":3,"€":1,"😀":2}`},
		{`[1,{"b":[true,false,null],"a":{}}]`, `[1,{"a":{},"b":[true,false,null]}]`},
	}
	for _, tt := range tests {
		got, err := Form([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Form(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestFormRejectsTrailingData(t *testing.T) {
	if _, err := Form([]byte(`{} {}`)); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func TestDigest(t *testing.T) {
	a, _ := Digest([]byte(`{"a":1,"b":[2.0]}`))
	b, _ := Digest([]byte(`{"b":[2],"a":1e0}`))
	c, _ := Digest([]byte(`{"b":[3],"a":1}`))
	if a != b || a == c || len(a) != 64 {
		t.Fatalf("digests %s %s %s", a, b, c)
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
		a, errA := Form([]byte(tt.a))
		b, errB := Form([]byte(tt.b))
		if errA != nil || errB != nil || string(a) == string(b) {
			t.Errorf("Form(%s) = %s, Form(%s) = %s (%v, %v); want two forms", tt.a, a, tt.b, b, errA, errB)
		}
	}
}

func TestDigestIsTheSHA256OfTheForm(t *testing.T) {
	doc := []byte(`{"b":[2.0],"a":"x"}`)
	form, err := Form(doc)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(form)
	if d, err := Digest(doc); err != nil || d != hex.EncodeToString(sum[:]) {
		t.Fatalf("Digest = %s, %v; want the hex SHA-256 of %s", d, err, form)
	}
}
