package shape

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

type decLine struct {
	SKU      string            `json:"sku"`
	Quantity uint8             `json:"quantity"`
	Note     *string           `json:"note"`
	Tags     map[string]string `json:"tags,omitempty"`
}

type decOrder struct {
	ID    int64     `json:"id"`
	Items []decLine `json:"items"`
	Ratio float64   `json:"ratio,omitempty"`
}

// problemsAt returns the problems as "path: message" lines.
func problemsAt(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Path + ": " + p.Message + "\n")
	}
	return b.String()
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, input string
		want        []string // the path of each problem, in order, and a word of its message
	}{
		{"valid", `{"id":1,"items":[{"sku":"a","quantity":2,"note":null}]}`, nil},
		{"empty input is {}", ``, []string{"id", "items"}},
		{"null is {}", `null`, []string{"id", "items"}},
		{"unknown member", `{"id":1,"items":[],"extra":1}`, []string{"extra"}},
		{"names match exactly", `{"ID":1,"items":[]}`, []string{"ID", "id"}},
		{"wrong type deep", `{"id":1,"items":[{"sku":"a","quantity":2,"note":null},{"sku":5,"quantity":2,"note":null}]}`, []string{"items[1].sku"}},
		{"missing member deep", `{"id":1,"items":[{"sku":"a","note":null}]}`, []string{"items[0].quantity"}},
		{"null for a non-pointer", `{"id":null,"items":[]}`, []string{"id"}},
		{"uint8 overflow", `{"id":1,"items":[{"sku":"a","quantity":256,"note":null}]}`, []string{"items[0].quantity"}},
		{"a key that is not an identifier is quoted", `{"id":1,"items":[{"sku":"a","quantity":1,"note":null,"tags":{"a.b":7}}]}`, []string{`items[0].tags["a.b"]`}},
		{"every problem at once", `{"items":[{"sku":1,"quantity":-1,"note":null}],"x":0}`, []string{"items[0].sku", "items[0].quantity", "x", "id"}},
	}
	n := mustOf[decOrder](t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v decOrder
			problems, fatal := Decode(n, []byte(tt.input), valueOf(&v))
			if fatal {
				t.Fatalf("fatal; problems:\n%s", problemsAt(problems))
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.Path)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("problems at %q, want %q:\n%s", got, tt.want, problemsAt(problems))
			}
		})
	}
}

func TestDecodeMalformedIsFatal(t *testing.T) {
	n := mustOf[decOrder](t)
	for _, input := range []string{`{"id":1,`, `[1]`, `"x"`, `{"id":1} {}`, `{"id":1,"id":2,"items":[]}`, "{\"id\":1,\"items\":[{\"sku\":\"\xff\"}]}"} {
		var v decOrder
		problems, fatal := Decode(n, []byte(input), valueOf(&v))
		if len(problems) != 1 || !fatal {
			t.Errorf("Decode(%q) = %v, fatal %v; want the first syntax error, fatal", input, problems, fatal)
		}
	}
}

func TestDecodeNumbers(t *testing.T) {
	type nums struct {
		I int64   `json:"i"`
		U uint64  `json:"u"`
		F float64 `json:"f"`
	}
	n := mustOf[nums](t)
	tests := []struct {
		input string
		want  nums
		ok    bool
	}{
		{`{"i":2,"u":2,"f":2}`, nums{2, 2, 2}, true},
		{`{"i":2.0,"u":2e0,"f":0.5}`, nums{2, 2, 0.5}, true}, // integers in any notation
		{`{"i":9223372036854775807,"u":18446744073709551615,"f":1}`, nums{math.MaxInt64, math.MaxUint64, 1}, true},
		{`{"i":9223372036854775808,"u":0,"f":0}`, nums{}, false},
		{`{"i":1.5,"u":0,"f":0}`, nums{}, false},
		{`{"i":0,"u":-1,"f":0}`, nums{}, false},
	}
	for _, tt := range tests {
		var v nums
		problems, _ := Decode(n, []byte(tt.input), valueOf(&v))
		if ok := len(problems) == 0; ok != tt.ok || (ok && v != tt.want) {
			t.Errorf("Decode(%s) = %+v, %v; want %+v, ok %v", tt.input, v, problems, tt.want, tt.ok)
		}
	}
}

// mustOf returns the model of T.
func mustOf[T any](t *testing.T) *Node {
	t.Helper()
	n, err := Of(reflect.TypeFor[T]())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// valueOf returns the addressable value p points to.
func valueOf(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
