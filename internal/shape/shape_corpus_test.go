package shape

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
)

// Regression tests for the bugs that the schema corpus and the promise
// test (internal/corpus, and promise_test.go in the root package) found in this
// package. Each decodes and checks as the runtime does.

// run decodes data into a new T and checks it, returning the value and
// every problem.
func run[T any](t *testing.T, data string) (T, []Problem) {
	t.Helper()
	n, err := Of(reflect.TypeFor[T]())
	if err != nil {
		t.Fatal(err)
	}
	var v T
	rv := reflect.ValueOf(&v).Elem()
	problems, fatal := Decode(n, []byte(data), rv)
	if !fatal {
		problems = append(problems, Check(n, rv, problems)...)
	}
	return v, problems
}

func schemaOf[T any](t *testing.T) map[string]any {
	t.Helper()
	n, err := Of(reflect.TypeFor[T]())
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(Schema(n), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func prop(s map[string]any, path ...string) map[string]any {
	for _, p := range path {
		if p == "items" || p == "additionalProperties" {
			s = s[p].(map[string]any)
			continue
		}
		s = s["properties"].(map[string]any)[p].(map[string]any)
	}
	return s
}

type corpusExpr struct {
	Op   string       `json:"op" validate:"oneof=a b"`
	Args []corpusExpr `json:"args,omitempty"`
}

// Rules of a recursive type held at the first level only: the slice of the
// type inside itself was marked as carrying no rules.
func TestCorpusRecursiveRulesAtDepth(t *testing.T) {
	_, problems := run[corpusExpr](t, `{"op":"a","args":[{"op":"b","args":[{"op":"zz"}]}]}`)
	if len(problems) != 1 || problems[0].Path != "args[0].args[0].op" {
		t.Fatalf("problems = %v, want one at args[0].args[0].op", problems)
	}
}

type corpusFloats struct {
	Gt    float64 `json:"gt" validate:"gt=0"`
	Max32 float32 `json:"max32" validate:"max=0.1"`
	Lte   float64 `json:"lte" validate:"lte=2.5"`
	Lt32  float32 `json:"lt32" validate:"lt=1.5"`
	F32   float32 `json:"f32"`
	F64   float64 `json:"f64"`
}

// Float bounds were compared on the rounded float: a number beyond a bound
// that rounds onto it was accepted, one inside an exclusive bound that
// rounds onto it was refused, and a float32 bound that float32 cannot hold
// exactly (0.1) refused the bound itself.
func TestCorpusFloatBoundsAreExact(t *testing.T) {
	const ok = `"gt":1,"max32":0,"lte":0,"lt32":0,"f32":0,"f64":0`
	for _, c := range []struct {
		in   string
		path string // "" when valid
	}{
		{`{` + ok + `}`, ""},
		{`{` + ok + `,"gt":1e-400}`, ""},
		{`{` + ok + `,"gt":1e-99999999999999999999}`, ""},
		{`{` + ok + `,"gt":0.0}`, "gt"},
		{`{` + ok + `,"gt":-1e-400}`, "gt"},
		{`{` + ok + `,"max32":0.1}`, ""},
		{`{` + ok + `,"max32":0.100000001}`, "max32"},
		{`{` + ok + `,"lte":2.5}`, ""},
		{`{` + ok + `,"lte":2.50000000000000000001}`, "lte"},
		{`{` + ok + `,"lt32":1.49999999999999999999}`, ""},
		{`{` + ok + `,"lt32":1.5}`, "lt32"},
		{`{` + ok + `,"f32":3.4028234663852886e38}`, ""},
		{`{` + ok + `,"f32":3.40282347e38}`, "f32"},
		{`{` + ok + `,"f32":-3.40282347e38}`, "f32"},
		{`{` + ok + `,"f64":1.7976931348623157e308}`, ""},
		{`{` + ok + `,"f64":1.7976931348623158e308}`, "f64"},
	} {
		// Later duplicates are not JSON: build the object from the last
		// value of each key.
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.in), &m); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for k, v := range m {
			parts = append(parts, `"`+k+`":`+string(v))
		}
		in := "{" + strings.Join(parts, ",") + "}"
		v, problems := run[corpusFloats](t, in)
		switch {
		case c.path == "" && len(problems) > 0:
			t.Errorf("%s: unexpected problems %v", c.in, problems)
		case c.path != "" && (len(problems) != 1 || problems[0].Path != c.path):
			t.Errorf("%s: problems %v, want one at %s", c.in, problems, c.path)
		case c.path == "" && v.Gt <= 0:
			t.Errorf("%s: gt=0 holds for the number but not for the value %v the tool gets", c.in, v.Gt)
		case c.path == "" && v.Lt32 >= 1.5:
			t.Errorf("%s: lt=1.5 holds for the number but not for the value %v the tool gets", c.in, v.Lt32)
		}
	}
}

type corpusFree struct {
	Any  any            `json:"any"`
	Meta map[string]any `json:"meta"`
}

// A free-form value allows every number, as its schema {} does; one
// beyond float64 was refused.
func TestCorpusFreeFormNumbers(t *testing.T) {
	v, problems := run[corpusFree](t, `{"any":[1e400,-1e400,1,"x",null,{"a":true}],"meta":{"n":1e-400}}`)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	list, _ := v.Any.([]any)
	if len(list) != 6 || list[0] != math.Inf(1) || list[1] != math.Inf(-1) || list[2] != 1.0 || list[3] != "x" || list[4] != nil {
		t.Fatalf("any = %#v", v.Any)
	}
	if v.Meta["n"] != 0.0 {
		t.Fatalf("meta = %#v", v.Meta)
	}
}

type corpusDash struct {
	//lint:ignore SA5008 "-," names the member "-", as encoding/json documents
	Dash string `json:"-,"`
	Skip string `json:"-"`
}

// json:"-," names a member "-", as encoding/json says; it was dropped.
func TestCorpusDashComma(t *testing.T) {
	n, err := Of(reflect.TypeFor[corpusDash]())
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Names(); len(got) != 1 || got[0] != "-" {
		t.Fatalf("names = %q, want [\"-\"]", got)
	}
}

type corpusLine struct {
	SKU string `json:"sku" validate:"required"`
}

type corpusPointers struct {
	Count *int              `json:"count" validate:"required"`
	Lines []*corpusLine     `json:"lines" validate:"dive,required"`
	Nums  map[string]*uint8 `json:"nums" validate:"dive,required"`
	Line  *corpusLine       `json:"line" validate:"required"`
}

// required on a pointer means non-nil: it was refused on pointers to
// numbers, and ignored on pointers to structs.
func TestCorpusRequiredPointers(t *testing.T) {
	s := schemaOf[corpusPointers](t)
	for _, p := range [][]string{{"count"}, {"lines", "items"}, {"nums", "additionalProperties"}, {"line"}} {
		if typ, ok := prop(s, p...)["type"].(string); !ok {
			t.Errorf("%v: type %v, want one non-null type", p, prop(s, p...)["type"])
		} else if typ == "null" {
			t.Errorf("%v: null", p)
		}
	}
	if req := s["required"].([]any); len(req) != 4 {
		t.Errorf("required = %v, want every field", req)
	}
	for in, want := range map[string]string{
		`{"count":0,"lines":[{"sku":"a"}],"nums":{"a":0},"line":{"sku":"a"}}`: "",
		`{"count":null,"lines":[],"nums":{},"line":{"sku":"a"}}`:              "count",
		`{"count":0,"lines":[null],"nums":{},"line":{"sku":"a"}}`:             "lines[0]",
		`{"count":0,"lines":[],"nums":{"a":null},"line":{"sku":"a"}}`:         "nums.a",
		`{"count":0,"lines":[],"nums":{},"line":null}`:                        "line",
	} {
		_, problems := run[corpusPointers](t, in)
		if want == "" && len(problems) > 0 || want != "" && (len(problems) != 1 || problems[0].Path != want) {
			t.Errorf("%s: problems %v, want at %q", in, problems, want)
		}
	}
}

type corpusStatus string

func (corpusStatus) JSONSchemaExtend(s *jsonschema.Schema) { s.Enum = []any{"open", "closed"} }

type corpusEnumPtr struct {
	Maybe *corpusStatus `json:"maybe"`
}

// A pointer to a type with JSONSchemaExtend has the method too; it was
// taken for an extension of the pointer and refused.
func TestCorpusExtendThroughPointer(t *testing.T) {
	s := schemaOf[corpusEnumPtr](t)
	enum, _ := prop(s, "maybe")["enum"].([]any)
	if len(enum) != 3 || enum[2] != nil {
		t.Fatalf("enum = %v, want open, closed, null", enum)
	}
}

type corpusAddress struct {
	Street string `json:"street" validate:"required"`
	City   string `json:"city"`
}

type corpusOmitZero struct {
	Addr  corpusAddress `json:"addr,omitzero"`
	Plain corpusLine    `json:"plain,omitempty"`
	Free  struct {
		City string `json:"city"`
	} `json:"free,omitzero"`
}

// An omitzero struct whose zero value breaks rules inside it was optional
// in the schema, yet refused when left out.
func TestCorpusOmitZeroStructWithRules(t *testing.T) {
	s := schemaOf[corpusOmitZero](t)
	req := s["required"].([]any)
	if len(req) != 2 || req[0] != "addr" || req[1] != "plain" {
		t.Fatalf("required = %v, want addr and plain (free has no rules)", req)
	}
	if _, problems := run[corpusOmitZero](t, `{"addr":{"street":"s","city":""},"plain":{"sku":"a"}}`); len(problems) > 0 {
		t.Fatal(problems)
	}
}

type corpusDefault struct {
	N int     `json:"n,omitempty" jsonschema:"default=3,example=4"`
	F float64 `json:"f,omitempty" jsonschema:"default=0.5"`
}

// Number defaults and examples were published as strings.
func TestCorpusNumberDefaults(t *testing.T) {
	s := schemaOf[corpusDefault](t)
	if d := prop(s, "n")["default"]; d != 3.0 {
		t.Errorf("default = %#v, want 3", d)
	}
	if e := prop(s, "n")["examples"].([]any); e[0] != 4.0 {
		t.Errorf("examples = %#v, want [4]", e)
	}
	if d := prop(s, "f")["default"]; d != 0.5 {
		t.Errorf("default = %#v, want 0.5", d)
	}
}

// A repeated member name was reported at the member before it.
func TestCorpusDuplicatePath(t *testing.T) {
	for in, want := range map[string]string{
		`{"-":1,"shown":"","-":""}`:     `["-"]`,
		`{"a":{"b":1,"c":2,"b":3}}`:     `a.b`,
		`{"a":[{"b":1},{"b":1,"b":2}]}`: `a[1].b`,
	} {
		n, err := Of(reflect.TypeFor[struct{}]())
		if err != nil {
			t.Fatal(err)
		}
		var v struct{}
		problems, fatal := Decode(n, []byte(in), reflect.ValueOf(&v).Elem())
		if !fatal || len(problems) != 1 || problems[0].Path != want {
			t.Errorf("%s: problems %v, want one at %s", in, problems, want)
		}
	}
}

type corpusHolder struct {
	Addr  corpusAddress    `json:"addr"`
	Lines []corpusLine     `json:"lines"`
	Pair  [2]corpusAddress `json:"pair"`
}

// A member that is missing or of the wrong type decodes to a zero value;
// its rules were reported too, repeating the problem misleadingly.
func TestCorpusNoProblemsUnderADecodeProblem(t *testing.T) {
	for in, want := range map[string][]string{
		`{"lines":[],"pair":[{"street":"s","city":""},{"street":"s","city":""}]}`:                                             {"addr"},
		`{"addr":5,"lines":[],"pair":[{"street":"s","city":""},{"street":"s","city":""}]}`:                                    {"addr"},
		`{"addr":{"street":"s","city":""},"lines":[7,{"sku":""}],"pair":[{"street":"s","city":""},{"street":"s","city":""}]}`: {"lines[0]", "lines[1].sku"},
		`{"addr":{"street":"s","city":""},"lines":[],"pair":[{"street":"s","city":""}]}`:                                      {"pair"},
	} {
		_, problems := run[corpusHolder](t, in)
		var got []string
		for _, p := range problems {
			got = append(got, p.Path)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: problems %v, want at %v", in, problems, want)
		}
	}
}
