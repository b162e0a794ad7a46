package shape

import (
	"strings"
	"testing"
)

type ruleLine struct {
	SKU      string `json:"sku" validate:"required"`
	Quantity int    `json:"quantity" validate:"min=1,max=100"`
}

type ruleOrder struct {
	Status string            `json:"status" validate:"oneof=new paid"`
	Email  string            `json:"email,omitempty" validate:"omitempty,email"`
	Lines  []ruleLine        `json:"lines" validate:"min=1,max=3"`
	Labels map[string]string `json:"labels,omitempty" validate:"dive,max=3"`
	Note   *string           `json:"note" validate:"omitempty,max=5"`
}

// TestRules: the rules of validate tags hold at every depth, inside slices
// and maps, with or without dive, and every violation is reported.
func TestRules(t *testing.T) {
	tests := []struct {
		name, input string
		want        []string // the paths of the problems, in any order
	}{
		{"valid", `{"status":"new","lines":[{"sku":"a","quantity":1}],"note":""}`, nil},
		{"oneof", `{"status":"old","lines":[{"sku":"a","quantity":1}],"note":""}`, []string{"status"}},
		{"omitempty skips the zero value", `{"status":"new","email":"","lines":[{"sku":"a","quantity":1}],"note":""}`, nil},
		{"a format", `{"status":"new","email":"nobody","lines":[{"sku":"a","quantity":1}],"note":""}`, []string{"email"}},
		{"slice length", `{"status":"new","lines":[],"note":""}`, []string{"lines"}},
		{"nested, without dive", `{"status":"new","lines":[{"sku":"","quantity":0},{"sku":"b","quantity":101}],"note":""}`, []string{"lines[0].sku", "lines[0].quantity", "lines[1].quantity"}},
		{"map values with dive", `{"status":"new","lines":[{"sku":"a","quantity":1}],"labels":{"a.b":"long"},"note":""}`, []string{`labels["a.b"]`}},
		{"a rule on a pointer holds for its value", `{"status":"new","lines":[{"sku":"a","quantity":1}],"note":"too long"}`, []string{"note"}},
		{"a nil pointer keeps its rules", `{"status":"new","lines":[{"sku":"a","quantity":1}],"note":null}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := run[ruleOrder](t, tt.input)
			var got []string
			for _, p := range problems {
				got = append(got, p.Path)
			}
			if strings.Join(sorted(got), " ") != strings.Join(sorted(tt.want), " ") {
				t.Errorf("problems at %q, want %q:\n%s", got, tt.want, problemsAt(problems))
			}
		})
	}
}

func TestParseBound(t *testing.T) {
	tests := []struct {
		lit         string
		wantLit     string
		i           int64
		iok, uok    bool
		wantFloat   float64
		wantFailure bool
	}{
		{lit: "10", wantLit: "10", i: 10, iok: true, uok: true, wantFloat: 10},
		{lit: "-3", wantLit: "-3", i: -3, iok: true, wantFloat: -3},
		{lit: "1e2", wantLit: "100", i: 100, iok: true, uok: true, wantFloat: 100}, // an integer in another notation
		{lit: "0.5", wantLit: "0.5", wantFloat: 0.5},
		{lit: "18446744073709551615", wantLit: "18446744073709551615", uok: true, wantFloat: 18446744073709551615},
		{lit: "abc", wantFailure: true},
		{lit: "01", wantFailure: true}, // not a JSON number
	}
	for _, tt := range tests {
		b, err := ParseBound(tt.lit)
		if tt.wantFailure {
			if err == nil {
				t.Errorf("ParseBound(%q) = %+v; want an error", tt.lit, b)
			}
			continue
		}
		if err != nil || b.Lit != tt.wantLit || b.IOK != tt.iok || b.UOK != tt.uok || (b.IOK && b.I != tt.i) || b.F != tt.wantFloat {
			t.Errorf("ParseBound(%q) = %+v, %v", tt.lit, b, err)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
