package mcpform_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/mcpform"
)

func TestForm(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{
			"omitempty with choices is a plain optional enum",
			`{"type":"object","properties":{"color":{"type":"string","anyOf":[{"type":"string","maxLength":0},{"type":"string","enum":["red","green","blue"]}]}},"additionalProperties":false}`,
			`{"properties":{"color":{"enum":["red","green","blue"],"type":"string"}},"type":"object"}`,
		},
		{
			"a nullable pointer with choices",
			`{"type":"object","properties":{"c":{"type":["string","null"],"anyOf":[{"type":["string","null"],"maxLength":0},{"type":"string","enum":["a","b"]}]}}}`,
			`{"properties":{"c":{"enum":["a","b"],"type":"string"}},"type":"object"}`,
		},
		{
			"a required enum stays required",
			`{"type":"object","properties":{"c":{"type":"string","enum":["a","b"]}},"required":["c"]}`,
			`{"properties":{"c":{"enum":["a","b"],"type":"string"}},"required":["c"],"type":"object"}`,
		},
		{
			"bounds, formats and descriptions a form takes; the others dropped",
			`{"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":150},"f":{"type":"number","exclusiveMinimum":0},"mail":{"type":"string","format":"email","minLength":3},"d":{"type":"string","description":"a duration","pattern":"^x$","format":"duration"},"ok":{"type":"boolean","default":true}},"required":["ok","age"]}`,
			`{"properties":{"age":{"maximum":150,"minimum":0,"type":"integer"},"d":{"description":"a duration","type":"string"},"f":{"type":"number"},"mail":{"format":"email","minLength":3,"type":"string"},"ok":{"default":true,"type":"boolean"}},"required":["ok","age"],"type":"object"}`,
		},
		{
			"a number's choices are checked on the answer, not shown",
			`{"type":"object","properties":{"n":{"type":"integer","enum":[1,2,3],"minimum":-9223372036854775808,"maximum":9223372036854775807}},"required":["n"]}`,
			`{"properties":{"n":{"type":"integer"}},"required":["n"],"type":"object"}`,
		},
		{
			"a list of choices",
			`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":2}}}`,
			`{"properties":{"tags":{"items":{"enum":["a","b"],"type":"string"},"maxItems":2,"type":"array"}},"type":"object"}`,
		},
		{"no fields", `{"type":"object"}`, `{"properties":{},"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form, err := mcpform.Form(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(form)
			if string(got) != tt.want {
				t.Fatalf("form\n%s\nwant\n%s", got, tt.want)
			}
			for _, kw := range []string{"anyOf", "oneOf", "allOf", `"not"`, "$ref", "pattern", "null", "exclusive"} {
				if strings.Contains(string(got), kw) {
					t.Errorf("the form has %s", kw)
				}
			}
		})
	}
}

func TestFormRefuses(t *testing.T) {
	for name, schema := range map[string]string{
		"a nested object":      `{"type":"object","properties":{"o":{"type":"object","properties":{}}}}`,
		"a list of free text":  `{"type":"array"}`,
		"a list without items": `{"type":"object","properties":{"l":{"type":"array"}}}`,
		"a list of numbers":    `{"type":"object","properties":{"l":{"type":"array","items":{"type":"integer"}}}}`,
		"a list of free texts": `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"}}}}`,
		"any type":             `{"type":"object","properties":{"x":{}}}`,
		"not JSON":             `{`,
	} {
		t.Run(name, func(t *testing.T) {
			if form, err := mcpform.Form(json.RawMessage(schema)); err == nil {
				t.Fatalf("form %v; want an error", form)
			}
		})
	}
}
