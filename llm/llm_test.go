package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
	"github.com/carmy-dev/carmy/llm"
)

var update = flag.Bool("update", false, "rewrite the golden exports in testdata/export")

// The export fixture: tools whose inputs hold what each provider must
// rewrite or refuse. Their exports are kept as golden files in
// testdata/export (rewrite them with -update).

// ExportOrder is the input of place_order.
type ExportOrder struct {
	Customer ExportCustomer `json:"customer"`
	// An optional, nullable object.
	Ship *ExportAddress `json:"ship"`
	// An array of objects with optional fields.
	Lines []ExportLine `json:"lines" validate:"min=1,max=20"`
	// A required enum, an optional pointer enum and an optional enum.
	Status string     `json:"status" validate:"oneof=new paid"`
	Rush   *string    `json:"rush" validate:"oneof=same_day next_day"`
	Gift   ExportGift `json:"gift,omitempty"`
	// A number enum, for Gemini's sake.
	Priority uint8 `json:"priority" validate:"oneof=1 2 3"`
	// Optional without a pointer.
	Tags []string `json:"tags,omitempty" validate:"max=5"`
	Note string   `json:"note,omitempty" validate:"max=200"`
	// Maps: of scalars, of objects, and optional.
	Labels map[string]string      `json:"labels"`
	ByDate map[string]ExportLine  `json:"by_date"`
	Extra  map[string]*int        `json:"extra,omitempty"`
	Window *ExportWindow          `json:"window" jsonschema:"description=When to deliver"`
	Meta   map[string]ExportLabel `json:"meta,omitempty"`
}

// ExportCustomer is a nested, required object.
type ExportCustomer struct {
	Name  string  `json:"name" validate:"required"`
	Email string  `json:"email" validate:"email"`
	Phone *string `json:"phone"`
}

type ExportAddress struct {
	Street string `json:"street" validate:"required,max=40"`
	City   string `json:"city"`
	Zip    string `json:"zip" validate:"len=5"`
}

type ExportLine struct {
	SKU      string  `json:"sku" validate:"required" jsonschema:"description=Product SKU"`
	Quantity uint32  `json:"quantity" validate:"min=1,max=100"`
	Comment  *string `json:"comment"`
	Size     string  `json:"size,omitempty"`
}

type ExportWindow struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

type ExportLabel struct {
	Value string  `json:"value"`
	Color *string `json:"color" validate:"oneof=red blue"`
}

// ExportGift is an enum whose zero value is allowed, so that a field of
// the type may be left out.
type ExportGift string

func (ExportGift) JSONSchemaExtend(s *invopop.Schema) {
	s.Enum = []any{"", "wrap", "card"}
}

// ExportTree is recursive: Gemini cannot declare it.
type ExportTree struct {
	Name     string       `json:"name" validate:"required"`
	Children []ExportTree `json:"children,omitempty"`
	Parent   *ExportTree  `json:"parent"`
	Weight   *float64     `json:"weight"`
}

// ExportAny takes any JSON value: neither OpenAI nor Gemini can declare it.
type ExportAny struct {
	Value any `json:"value"`
}

func exportPlaceOrder(_ context.Context, in ExportOrder) (ExportOrder, error) { return in, nil }
func exportBuildTree(_ context.Context, in ExportTree) (ExportTree, error)    { return in, nil }
func exportEchoAny(_ context.Context, in ExportAny) (ExportAny, error)        { return in, nil }
func exportPing(context.Context) (string, error)                              { return "pong", nil }

func exportRegistry(t *testing.T) *carmy.Registry {
	t.Helper()
	reg, err := carmy.New().Tool(
		carmy.Tool(exportPlaceOrder, carmy.Write, carmy.Register(false), carmy.ParallelSafe(),
			carmy.Name("place_order"), carmy.Description("Place an order")),
		carmy.Tool(exportBuildTree, carmy.None, carmy.Register(false), carmy.ParallelSafe(),
			carmy.Name("build_tree"), carmy.Description("Echo a tree")),
		carmy.Tool(exportEchoAny, carmy.None, carmy.Register(false), carmy.ParallelSafe(),
			carmy.Name("echo_any")),
		carmy.Tool(exportPing, carmy.Read, carmy.Register(false), carmy.ParallelSafe(), carmy.Deferred(),
			carmy.Name("ping"), carmy.Description("Check that the service is up")),
		carmy.Tool(exportPing, carmy.Read, carmy.Register(false), carmy.Name("svc.ping")),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// exportErrors returns the ExportErrors an export returned, as
// "tool|path|message".
func exportErrors(t *testing.T, err error) []*llm.ExportError {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []*llm.ExportError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var x *llm.ExportError
		if !errors.As(e, &x) {
			t.Fatalf("export error %v is not an *ExportError", e)
		}
		out = append(out, x)
	}
	return out
}

func TestExportGolden(t *testing.T) {
	reg := exportRegistry(t)
	openai, oerr := llm.OpenAITools(reg)
	responses, rerr := llm.OpenAIResponsesTools(reg)
	anthropic, aerr := llm.AnthropicTools(reg)
	gemini, gerr := llm.GeminiFunctions(reg)
	for _, c := range []struct {
		file  string
		tools any
		err   error
	}{
		{"openai.json", openai, oerr},
		{"openai_responses.json", responses, rerr},
		{"anthropic.json", anthropic, aerr},
		{"gemini.json", gemini, gerr},
	} {
		t.Run(c.file, func(t *testing.T) {
			var errs []string
			for _, e := range exportErrors(t, c.err) {
				errs = append(errs, e.Error())
			}
			b, err := json.MarshalIndent(map[string]any{"tools": c.tools, "errors": errs}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			file := filepath.Join("testdata", "export", c.file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -run TestExportGolden -update to write it)", err)
			}
			if !bytes.Equal(b, want) {
				t.Errorf("%s changed (run with -update if that is intended); got:\n%s", file, b)
			}
		})
	}
}

// TestExportRefusals: each provider leaves out exactly the tools it cannot
// express, says why with the tool and the place, and returns the others.
func TestExportRefusals(t *testing.T) {
	reg := exportRegistry(t)
	type refusal struct{ tool, path, says string }
	names := func(tools any) []string {
		var out []string
		v := reflect.ValueOf(tools)
		for i := range v.Len() {
			e := v.Index(i)
			if f := e.FieldByName("Function"); f.IsValid() {
				e = f
			}
			name := e.FieldByName("Name").String()
			if name == "" { // a provider's own tool
				name = e.FieldByName("Type").String()
			}
			out = append(out, name)
		}
		return out
	}
	openai, oerr := llm.OpenAITools(reg)
	responses, rerr := llm.OpenAIResponsesTools(reg)
	anthropic, aerr := llm.AnthropicTools(reg)
	gemini, gerr := llm.GeminiFunctions(reg)
	for _, c := range []struct {
		provider string
		tools    any
		err      error
		want     []string
		refused  []refusal
	}{
		{"OpenAI", openai, oerr, []string{"build_tree", "ping", "place_order"}, []refusal{
			{"echo_any", "value", "accepts any JSON value"},
			{"svc.ping", "", `the name "svc.ping" is not an OpenAI function name`},
		}},
		// ping is deferred: the Responses API and Anthropic get their
		// provider's tool search too.
		{"OpenAI", responses, rerr, []string{"build_tree", "ping", "place_order", "tool_search"}, []refusal{
			{"echo_any", "value", "accepts any JSON value"},
			{"svc.ping", "", `the name "svc.ping" is not an OpenAI function name`},
		}},
		{"Anthropic", anthropic, aerr, []string{"build_tree", "echo_any", "ping", "place_order", "tool_search_tool_bm25"}, []refusal{
			{"svc.ping", "", `the name "svc.ping" is not an Anthropic tool name`},
		}},
		{"Gemini", gemini, gerr, []string{"ping", "place_order"}, []refusal{
			{"build_tree", "children[]", "is of the recursive type ExportTree"},
			{"build_tree", "parent", "is of the recursive type ExportTree"},
			{"echo_any", "value", "accepts any JSON value"},
			{"svc.ping", "", `the name "svc.ping" is not a Gemini function name`},
		}},
	} {
		t.Run(fmt.Sprintf("%s %T", c.provider, c.tools), func(t *testing.T) {
			if got := names(c.tools); !slices.Equal(got, c.want) {
				t.Errorf("exported %v, want %v", got, c.want)
			}
			errs := exportErrors(t, c.err)
			if len(errs) != len(c.refused) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(c.refused), c.err)
			}
			for i, e := range errs {
				r := c.refused[i]
				if e.Provider != c.provider || e.Tool != r.tool || e.Path != r.path || !strings.Contains(e.Err.Error(), r.says) {
					t.Errorf("error %d = {%s %s %q %q}, want {%s %s %q ...%q...}", i, e.Provider, e.Tool, e.Path, e.Err, c.provider, r.tool, r.path, r.says)
				}
				if !strings.Contains(e.Error(), r.tool) || !strings.Contains(e.Error(), c.provider) {
					t.Errorf("message %q does not name the tool and the provider", e.Error())
				}
			}
		})
	}
}

// --- The providers' rules, as documented, checked on every corpus type ---

// TestExportRulesCorpus exports a tool for every input type of the schema
// corpus and checks each provider's documented rules on the result; the
// types a provider cannot express must be refused, for the reason given.
func TestExportRulesCorpus(t *testing.T) {
	refusedBy := map[string]map[string]string{
		"OpenAI": {
			"free_form": "accepts any JSON value",
		},
		"Gemini": {
			"free_form":              "accepts any JSON value",
			"recursive":              "is of the recursive type Tree",
			"mutual_recursion":       "is of the recursive type Expr",
			"same_name":              "is of the recursive type",
			"root_generic_recursive": "is of the recursive type Tree2_string",
		},
	}
	for _, c := range corpus.Types {
		if c.Tool == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			reg, err := carmy.New().Tool(c.Tool(c.Name)).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			meta, _ := reg.Lookup(c.Name)

			openai, err := llm.OpenAITools(reg)
			checkRefusal(t, "OpenAI", refusedBy["OpenAI"][c.Name], len(openai), err)
			if len(openai) == 1 {
				checkOpenAITool(t, openai[0], meta.InputSchema)
			}

			anthropic, err := llm.AnthropicTools(reg)
			checkRefusal(t, "Anthropic", "", len(anthropic), err)
			if len(anthropic) == 1 {
				checkAnthropicTool(t, anthropic[0], meta.InputSchema)
			}

			gemini, err := llm.GeminiFunctions(reg)
			checkRefusal(t, "Gemini", refusedBy["Gemini"][c.Name], len(gemini), err)
			if len(gemini) == 1 {
				checkGeminiFunction(t, gemini[0], meta.InputSchema)
			}
		})
	}
}

func checkRefusal(t *testing.T, provider, want string, n int, err error) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s refused: %v", provider, err)
	case want == "" && n != 1:
		t.Errorf("%s exported %d tools, want 1", provider, n)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: got error %v, want one saying %q", provider, err, want)
	case want != "" && n != 0:
		t.Errorf("%s exported a tool it refused", provider)
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return v
}

// compile checks that a schema is valid JSON Schema 2020-12 with an
// independent implementation, and returns it compiled.
func compile(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("export.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("export.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v\n%s", err, schema)
	}
	return s
}

var (
	providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiFnName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`)
)

// OpenAI strict mode, as documented for function calling with
// "strict": true (the Structured Outputs subset):
//   - the root is an object, not anyOf;
//   - every object has "additionalProperties": false and lists every
//     property in "required";
//   - an optional field is a union with null: a null type, or anyOf with
//     {"type": "null"};
//   - the supported keywords only; carmy keeps to the subset documented
//     since launch: type, description, properties, required,
//     additionalProperties, items, enum, anyOf, $ref and $defs. (Later
//     documents add format, pattern and number and array bounds, for some
//     models; they are restated in descriptions instead.)
//   - $ref has no sibling keywords, and resolves into $defs;
//   - every schema has a type, or is $ref or anyOf;
//   - at most 5000 properties and 10 levels of nesting (checked on the
//     fixture's sizes elsewhere).
var openAIKeywords = []string{"type", "description", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "$ref"}

func checkOpenAITool(t *testing.T, tool llm.OpenAITool, original json.RawMessage) {
	t.Helper()
	if tool.Type != "function" || !tool.Function.Strict {
		t.Errorf("tool = {type %q, strict %v}, want function, strict", tool.Type, tool.Function.Strict)
	}
	if !providerName.MatchString(tool.Function.Name) {
		t.Errorf("name %q breaks OpenAI's rule", tool.Function.Name)
	}
	compile(t, tool.Function.Parameters)
	root := decode(t, tool.Function.Parameters)
	if root["type"] != "object" {
		t.Errorf("root type = %v, want \"object\"", root["type"])
	}
	defs, _ := root["$defs"].(map[string]any)
	var walk func(path string, s any)
	walk = func(path string, s any) {
		n, ok := s.(map[string]any)
		if !ok {
			t.Errorf("%s: schema %v is not an object", path, s)
			return
		}
		for k := range n {
			if !slices.Contains(openAIKeywords, k) && !(k == "$defs" && path == "") {
				t.Errorf("%s: keyword %q is outside the strict subset", path, k)
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			if len(n) != 1 {
				t.Errorf("%s: $ref has siblings: %v", path, n)
			}
			if defs[strings.TrimPrefix(ref, "#/$defs/")] == nil {
				t.Errorf("%s: $ref %s does not resolve", path, ref)
			}
			return
		}
		if anyOf, ok := n["anyOf"].([]any); ok {
			if path == "" {
				t.Error("the root is anyOf")
			}
			for _, b := range anyOf {
				walk(path, b)
			}
			return
		}
		typ := typeNames(n)
		if len(typ) == 0 {
			t.Errorf("%s: no type", path)
		}
		if enum, ok := n["enum"].([]any); ok {
			if slices.Contains(enum, nil) || slices.Contains(typ, "null") {
				t.Errorf("%s: an enum mixed with null; strict mode wants anyOf [enum, null]", path)
			}
		}
		if slices.Contains(typ, "object") {
			if n["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties = %v, want false", path, n["additionalProperties"])
			}
			props, _ := n["properties"].(map[string]any)
			req := stringsOf(n["required"])
			if len(req) != len(props) {
				t.Errorf("%s: required %v does not list every property", path, req)
			}
			for _, name := range req {
				p, ok := props[name]
				if !ok {
					t.Errorf("%s: required %q is not a property", path, name)
					continue
				}
				walk(path+"."+name, p)
			}
		}
		if slices.Contains(typ, "array") {
			walk(path+"[]", n["items"])
		}
	}
	walk("", root)
	for name, d := range defs {
		walk("$defs."+name, d)
	}
	checkOptionalNullable(t, "", decode(t, original), root, decode(t, original), root, 0)
}

// checkOptionalNullable walks carmy's schema and the export side by side:
// every property that carmy's schema leaves optional must accept null in
// the export.
func checkOptionalNullable(t *testing.T, path string, orig, exp, origRoot, expRoot map[string]any, depth int) {
	t.Helper()
	if depth > 8 { // deep enough to go round every recursive type of the corpus
		return
	}
	orig, exp = deref(orig, origRoot), nonNull(deref(nonNull(exp), expRoot))
	if orig == nil || exp == nil {
		return
	}
	if props, ok := orig["properties"].(map[string]any); ok {
		req := stringsOf(orig["required"])
		eprops, _ := exp["properties"].(map[string]any)
		for name, p := range props {
			e, _ := eprops[name].(map[string]any)
			if e == nil {
				t.Errorf("%s.%s: missing from the export", path, name)
				continue
			}
			if !slices.Contains(req, name) && !acceptsNull(e) {
				t.Errorf("%s.%s: optional in carmy's schema but not nullable in the export: %v", path, name, e)
			}
			if pm, ok := p.(map[string]any); ok {
				checkOptionalNullable(t, path+"."+name, pm, e, origRoot, expRoot, depth+1)
			}
		}
	}
	if items, ok := orig["items"].(map[string]any); ok {
		ei, _ := exp["items"].(map[string]any)
		checkOptionalNullable(t, path+"[]", items, ei, origRoot, expRoot, depth+1)
	}
	if value, ok := orig["additionalProperties"].(map[string]any); ok {
		// A map: the export is a list of entries.
		ei, _ := exp["items"].(map[string]any)
		ep, _ := ei["properties"].(map[string]any)
		ev, _ := ep["value"].(map[string]any)
		if ev == nil {
			t.Errorf("%s: a map exported as %v, not a list of entries", path, exp)
			return
		}
		checkOptionalNullable(t, path+"[*]", value, ev, origRoot, expRoot, depth+1)
	}
}

func deref(s, root map[string]any) map[string]any {
	for s != nil {
		ref, ok := s["$ref"].(string)
		if !ok {
			break
		}
		defs, _ := root["$defs"].(map[string]any)
		s, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
	}
	return s
}

// nonNull returns the one branch of a union with null that is not null.
func nonNull(s map[string]any) map[string]any {
	anyOf, ok := s["anyOf"].([]any)
	if !ok {
		return s
	}
	for _, b := range anyOf {
		if m, ok := b.(map[string]any); ok && !(len(m) == 1 && m["type"] == "null") {
			return m
		}
	}
	return nil
}

func acceptsNull(s map[string]any) bool {
	if slices.Contains(typeNames(s), "null") {
		return true
	}
	anyOf, _ := s["anyOf"].([]any)
	for _, b := range anyOf {
		if m, ok := b.(map[string]any); ok && m["type"] == "null" {
			return true
		}
	}
	return false
}

func typeNames(s map[string]any) []string {
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		return stringsOf(v)
	}
	return nil
}

func stringsOf(v any) []string {
	var out []string
	a, _ := v.([]any)
	for _, e := range a {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Anthropic tool use: "name" matches ^[a-zA-Z0-9_-]{1,64}$ and
// "input_schema" is a JSON Schema whose root is {"type": "object"}; the
// rest of JSON Schema is Anthropic's to read, so carmy's schema goes as it
// is.
func checkAnthropicTool(t *testing.T, tool llm.AnthropicTool, original json.RawMessage) {
	t.Helper()
	if !providerName.MatchString(tool.Name) {
		t.Errorf("name %q breaks Anthropic's rule", tool.Name)
	}
	compile(t, tool.InputSchema)
	got, want := decode(t, tool.InputSchema), decode(t, original)
	if got["type"] != "object" {
		t.Errorf("input_schema type = %v, want \"object\"", got["type"])
	}
	want["type"] = "object"
	// The descriptions may say in words what a keyword says as a regular
	// expression (TestExportWords): the rest is carmy's schema.
	if !reflect.DeepEqual(withoutDescriptions(got), withoutDescriptions(want)) {
		t.Errorf("input_schema differs from carmy's schema beyond the root type and descriptions:\n%s", tool.InputSchema)
	}
}

// withoutDescriptions removes every "description" member from a decoded
// schema, in place, and returns it.
func withoutDescriptions(v any) any {
	eachObject(v, func(m map[string]any) {
		if _, ok := m["description"].(string); ok {
			delete(m, "description")
		}
	})
	return v
}

// eachObject calls f with every object of a decoded JSON document.
func eachObject(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, sub := range v {
			eachObject(sub, f)
		}
	case []any:
		for _, sub := range v {
			eachObject(sub, f)
		}
	}
}

// TestExportWords: a rule carmy writes as a regular expression (a required
// time or UUID is not the zero one; a duration's syntax) reaches the model
// in words from every provider, and OpenAI's and Gemini's descriptions
// show no regular expression.
func TestExportWords(t *testing.T) {
	type Input struct {
		At   time.Time     `json:"at" validate:"required"`
		ID   uuid.UUID     `json:"id" validate:"required"`
		Wait time.Duration `json:"wait" jsonschema:"description=How long to wait"`
	}
	reg, err := carmy.New().Tool(carmy.Tool(func(in Input) error { return nil }, carmy.Read, carmy.Name("words"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	openai, err := llm.OpenAITools(reg)
	if err != nil {
		t.Fatal(err)
	}
	anthropic, err := llm.AnthropicTools(reg)
	if err != nil {
		t.Fatal(err)
	}
	gemini, err := llm.GeminiFunctions(reg)
	if err != nil {
		t.Fatal(err)
	}
	descriptions := func(schema []byte) string {
		var all []string
		eachObject(decode(t, schema), func(m map[string]any) {
			if d, ok := m["description"].(string); ok {
				all = append(all, d)
			}
		})
		return strings.Join(all, "\n")
	}
	for _, c := range []struct {
		provider string
		schema   []byte
		regex    bool // the keywords stay, beside the words
	}{
		{"OpenAI", openai[0].Function.Parameters, false},
		{"Anthropic", anthropic[0].InputSchema, true},
		{"Gemini", gemini[0].Parameters, false},
	} {
		t.Run(c.provider, func(t *testing.T) {
			d := descriptions(c.schema)
			for _, w := range []string{"must not be the zero time (0001-01-01T00:00:00Z)", "must not be the nil UUID", "How long to wait (A duration in Go's syntax"} {
				if !strings.Contains(d, w) {
					t.Errorf("the descriptions do not say %q:\n%s", w, d)
				}
			}
			if strings.Contains(d, "^") || strings.Contains(d, "not: ") || strings.Contains(d, "pattern: ") {
				t.Errorf("the descriptions show a regular expression:\n%s", d)
			}
			if has := strings.Contains(string(c.schema), `"pattern"`); has != c.regex {
				t.Errorf("pattern keywords kept: %v, want %v:\n%s", has, c.regex, c.schema)
			}
		})
	}
}

// Gemini function declarations take an OpenAPI 3.0 subset of schemas;
// carmy keeps to the documented fields a function's parameters may use:
//   - type: one of STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT, never a
//     list; null is "nullable": true;
//   - format: date-time (and enum) for STRING, int32/int64 for INTEGER,
//     float/double for NUMBER;
//   - enum: for STRING only, strings;
//   - properties (non-empty) and required (names of properties) on OBJECT;
//   - items, minItems, maxItems on ARRAY; minimum, maximum on numbers;
//   - description;
//   - no $ref, $defs, anyOf or additionalProperties: references are
//     inlined, so recursive types cannot be declared.
//
// A function with no parameters has none.
var geminiKeywords = []string{"type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems", "maxItems", "minimum", "maximum"}

func checkGeminiFunction(t *testing.T, fn llm.GeminiFunction, original json.RawMessage) {
	t.Helper()
	if !geminiFnName.MatchString(fn.Name) {
		t.Errorf("name %q breaks Gemini's rule", fn.Name)
	}
	props, _ := decode(t, original)["properties"].(map[string]any)
	if len(props) == 0 {
		if fn.Parameters != nil {
			t.Errorf("a function with no parameters declares %s", fn.Parameters)
		}
		return
	}
	root := decode(t, fn.Parameters)
	if root["type"] != "OBJECT" || root["nullable"] != nil {
		t.Errorf("parameters root = %v, want a non-nullable OBJECT", root)
	}
	formats := map[string][]string{"STRING": {"date-time", "enum"}, "INTEGER": {"int32", "int64"}, "NUMBER": {"float", "double"}}
	var walk func(path string, s any)
	walk = func(path string, s any) {
		n, ok := s.(map[string]any)
		if !ok {
			t.Errorf("%s: schema %v is not an object", path, s)
			return
		}
		for k := range n {
			if !slices.Contains(geminiKeywords, k) {
				t.Errorf("%s: keyword %q is outside Gemini's subset", path, k)
			}
		}
		typ, _ := n["type"].(string)
		if !slices.Contains([]string{"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}, typ) {
			t.Errorf("%s: type %v", path, n["type"])
		}
		if v, ok := n["nullable"]; ok && v != true {
			t.Errorf("%s: nullable = %v", path, v)
		}
		if f, ok := n["format"]; ok && !slices.Contains(formats[typ], f.(string)) {
			t.Errorf("%s: format %v on %s", path, f, typ)
		}
		if enum, ok := n["enum"]; ok {
			if typ != "STRING" || n["format"] != "enum" || len(stringsOf(enum)) != len(enum.([]any)) {
				t.Errorf("%s: enum %v on %s, format %v", path, enum, typ, n["format"])
			}
		}
		only := func(keys []string, on ...string) {
			for _, k := range keys {
				if _, ok := n[k]; ok && !slices.Contains(on, typ) {
					t.Errorf("%s: %s on %s", path, k, typ)
				}
			}
		}
		only([]string{"properties", "required"}, "OBJECT")
		only([]string{"items", "minItems", "maxItems"}, "ARRAY")
		only([]string{"minimum", "maximum"}, "INTEGER", "NUMBER")
		switch typ {
		case "OBJECT":
			props, _ := n["properties"].(map[string]any)
			if len(props) == 0 {
				t.Errorf("%s: an OBJECT with no properties", path)
			}
			for _, r := range stringsOf(n["required"]) {
				if props[r] == nil {
					t.Errorf("%s: required %q is not a property", path, r)
				}
			}
			for name, p := range props {
				walk(path+"."+name, p)
			}
		case "ARRAY":
			walk(path+"[]", n["items"])
		}
	}
	walk("", root)
}

// --- What each rewriting does, field by field ---

// exportedInput returns the schema each provider got for place_order.
func exportedInputs(t *testing.T, reg *carmy.Registry) (openai, gemini map[string]any) {
	t.Helper()
	o, _ := llm.OpenAITools(reg)
	g, _ := llm.GeminiFunctions(reg)
	for _, tool := range o {
		if tool.Function.Name == "place_order" {
			openai = decode(t, tool.Function.Parameters)
		}
	}
	for _, fn := range g {
		if fn.Name == "place_order" {
			gemini = decode(t, fn.Parameters)
		}
	}
	return openai, gemini
}

func prop(s map[string]any, path ...string) map[string]any {
	for _, p := range path {
		switch p {
		case "[]":
			s, _ = s["items"].(map[string]any)
		case "|":
			s = nonNull(s)
		default:
			props, _ := s["properties"].(map[string]any)
			s, _ = props[p].(map[string]any)
		}
	}
	return s
}

func TestExportFields(t *testing.T) {
	reg := exportRegistry(t)
	openai, gemini := exportedInputs(t, reg)
	js := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, c := range []struct {
		name   string
		schema map[string]any
		path   []string
		want   string
	}{
		// OpenAI: required and non-null stays so.
		{"openai required", openai, []string{"status"}, `{"enum":["new","paid"],"type":"string"}`},
		{"openai nested object", openai, []string{"customer", "name"}, `{"description":"minLength: 1","type":"string"}`},
		// Optional pointer: already nullable.
		{"openai optional pointer", openai, []string{"customer", "phone"}, `{"type":["string","null"]}`},
		// Optional without a pointer: made nullable.
		{"openai optional non-pointer", openai, []string{"note"}, `{"description":"maxLength: 200","type":["string","null"]}`},
		{"openai optional array", openai, []string{"tags"}, `{"description":"maxItems: 5","items":{"type":"string"},"type":["array","null"]}`},
		// Optional enums: a union of the enum and null.
		{"openai pointer enum", openai, []string{"rush"}, `{"anyOf":[{"enum":["same_day","next_day"],"type":"string"},{"type":"null"}]}`},
		{"openai optional enum", openai, []string{"gift"}, `{"anyOf":[{"enum":["","wrap","card"],"type":"string"},{"type":"null"}]}`},
		// Constraints and formats go to the description; a Go type's own
		// 64-bit range does not.
		{"openai format", openai, []string{"customer", "email"}, `{"description":"format: email","type":"string"}`},
		{"openai bounds", openai, []string{"lines", "[]", "quantity"}, `{"description":"minimum: 1; maximum: 100","type":"integer"}`},
		{"openai uint8", openai, []string{"priority"}, `{"description":"minimum: 0; maximum: 255","enum":[1,2,3],"type":"integer"}`},
		{"openai nullable object", openai, []string{"window", "from"}, `{"description":"format: date-time","type":"string"}`},
		// Maps: a list of entries.
		{"openai map", openai, []string{"labels"}, `{"description":"a map, sent as a list of {\"key\", \"value\"} entries with each key at most once","items":{"additionalProperties":false,"properties":{"key":{"type":"string"},"value":{"type":"string"}},"required":["key","value"],"type":"object"},"type":"array"}`},
		{"openai optional map of pointers", openai, []string{"extra", "|", "[]", "value"}, `{"type":["integer","null"]}`},
		{"openai map of objects", openai, []string{"meta", "|", "[]", "value", "color"}, `{"anyOf":[{"enum":["red","blue"],"type":"string"},{"type":"null"}]}`},

		// Gemini: required stays as carmy says; nullable instead of null.
		{"gemini enum", gemini, []string{"status"}, `{"enum":["new","paid"],"format":"enum","type":"STRING"}`},
		{"gemini pointer enum", gemini, []string{"rush"}, `{"enum":["same_day","next_day"],"format":"enum","nullable":true,"type":"STRING"}`},
		{"gemini number enum", gemini, []string{"priority"}, `{"description":"one of [1,2,3]","maximum":255,"minimum":0,"type":"INTEGER"}`},
		{"gemini pointer", gemini, []string{"customer", "phone"}, `{"nullable":true,"type":"STRING"}`},
		{"gemini bounds", gemini, []string{"lines", "[]", "quantity"}, `{"maximum":100,"minimum":1,"type":"INTEGER"}`},
		{"gemini strings", gemini, []string{"ship", "zip"}, `{"description":"minLength: 5; maxLength: 5","type":"STRING"}`},
		{"gemini date-time", gemini, []string{"window", "to"}, `{"format":"date-time","type":"STRING"}`},
		{"gemini format", gemini, []string{"customer", "email"}, `{"description":"format: email","type":"STRING"}`},
		{"gemini array", gemini, []string{"lines"}, `{"items":{"properties":{"comment":{"nullable":true,"type":"STRING"},"quantity":{"maximum":100,"minimum":1,"type":"INTEGER"},"size":{"type":"STRING"},"sku":{"description":"Product SKU (minLength: 1)","type":"STRING"}},"required":["sku","quantity"],"type":"OBJECT"},"maxItems":20,"minItems":1,"type":"ARRAY"}`},
		{"gemini map", gemini, []string{"extra"}, `{"description":"a map, sent as a list of {\"key\", \"value\"} entries with each key at most once","items":{"properties":{"key":{"type":"STRING"},"value":{"nullable":true,"type":"INTEGER"}},"required":["key","value"],"type":"OBJECT"},"type":"ARRAY"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := js(prop(c.schema, c.path...)); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	if req := stringsOf(gemini["required"]); slices.Contains(req, "note") || !slices.Contains(req, "status") {
		t.Errorf("gemini required = %v: optional fields must stay optional", req)
	}
	if req := stringsOf(openai["required"]); !slices.Contains(req, "note") {
		t.Errorf("openai required = %v: strict mode lists every field", req)
	}
}

// TestExportRecursiveOpenAI: strict mode takes $defs and $ref, so a
// recursive type stays recursive; an optional reference is a union with
// null, and a description next to $ref moves into anyOf.
func TestExportRecursiveOpenAI(t *testing.T) {
	reg := exportRegistry(t)
	tools, _ := llm.OpenAITools(reg)
	var params map[string]any
	for _, tool := range tools {
		if tool.Function.Name == "build_tree" {
			params = decode(t, tool.Function.Parameters)
		}
	}
	b, _ := json.Marshal(prop(params, "children"))
	if want := `{"items":{"$ref":"#/$defs/ExportTree"},"type":["array","null"]}`; string(b) != want {
		t.Errorf("children = %s, want %s", b, want)
	}
	b, _ = json.Marshal(prop(params, "parent"))
	if want := `{"anyOf":[{"$ref":"#/$defs/ExportTree"},{"type":"null"}]}`; string(b) != want {
		t.Errorf("parent = %s, want %s", b, want)
	}
}

// TestExportOpenAILimits: a schema over strict mode's documented limits is
// refused with the limit named.
func TestExportOpenAILimits(t *testing.T) {
	type deep struct {
		A struct {
			B struct {
				C struct {
					D struct {
						E struct {
							F struct {
								G struct {
									H struct {
										I struct {
											J struct {
												K string `json:"k"`
											} `json:"j"`
										} `json:"i"`
									} `json:"h"`
								} `json:"g"`
							} `json:"f"`
						} `json:"e"`
					} `json:"d"`
				} `json:"c"`
			} `json:"b"`
		} `json:"a"`
	}
	reg, err := carmy.New().Tool(carmy.Tool(func(context.Context, deep) error { return nil }, carmy.None,
		carmy.Name("deep"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	_, err = llm.OpenAITools(reg)
	if err == nil || !strings.Contains(err.Error(), "nests objects 11 levels deep; OpenAI strict mode takes at most 10") {
		t.Errorf("got %v, want the nesting limit", err)
	}
	if _, err := llm.GeminiFunctions(reg); err != nil {
		t.Errorf("Gemini: %v", err)
	}
}

// handTool is a hand-written tool whose metadata carries its own input
// schema, which the exports must read as any JSON Schema.
type handTool struct{ schema string }

type handInput struct {
	Where *struct {
		City string `json:"city"`
	} `json:"where"`
}

func (h handTool) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "hand", Effect: carmy.Read, InputSchema: json.RawMessage(h.schema)}
}

func (handTool) Execute(carmy.Context, handInput) (string, error) { return "", nil }

// TestExportHandWritten: schemas written by hand may use what carmy never
// writes: shared $defs, keywords outside every subset, unions of types,
// open objects. Each provider rewrites what it can and refuses the rest,
// naming the keyword.
func TestExportHandWritten(t *testing.T) {
	for _, c := range []struct {
		name, schema       string
		openai, gemini     string // the exported parameters, or "error: ..."
		anthropicUnchanged bool
	}{
		{
			name: "a shared, non-recursive definition",
			schema: `{"type":"object","title":"In","properties":{"where":{"$ref":"#/$defs/Place","description":"Where"}},"required":["where"],
				"$defs":{"Place":{"type":"object","properties":{"city":{"type":"string","default":"Oslo"}},"required":["city"]}}}`,
			openai: `{"type":"object","properties":{"where":{"description":"Where","anyOf":[{"$ref":"#/$defs/Place"}]}},"required":["where"],"additionalProperties":false,` +
				`"$defs":{"Place":{"type":"object","properties":{"city":{"type":"string","description":"default: Oslo"}},"required":["city"],"additionalProperties":false}}}`,
			gemini: `{"type":"OBJECT","properties":{"where":{"type":"OBJECT","description":"Where","properties":{"city":{"type":"STRING","description":"default: Oslo"}},"required":["city"]}},"required":["where"]}`,
		},
		{
			name:   "a keyword outside the subsets",
			schema: `{"type":"object","properties":{"kind":{"type":"string","const":"x"}}}`,
			openai: `error: kind: uses the keyword "const", which OpenAI strict mode does not take`,
			gemini: `error: kind: uses the keyword "const", which Gemini does not take`,
		},
		{
			name:   "a union of types",
			schema: `{"type":"object","properties":{"n":{"type":["string","integer"]}}}`,
			openai: `{"type":"object","properties":{"n":{"type":["string","integer","null"]}},"required":["n"],"additionalProperties":false}`,
			gemini: `error: n: may be a string or integer, which Gemini cannot express`,
		},
		{
			name:   "an open object",
			schema: `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`,
			openai: `error: accepts members beyond its properties`,
			gemini: `error: accepts members beyond its properties`,
		},
		{
			name:   "oneOf",
			schema: `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			openai: `error: a: uses the keyword "oneOf"`,
			gemini: `error: a: uses the keyword "oneOf"`,
		},
		{
			name:   "a map with a keyword the entries cannot keep",
			schema: `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"},"propertyNames":{"pattern":"^[a-z]+$"}}}}`,
			openai: `error: m: uses the keyword "propertyNames" on a map`,
			gemini: `error: m: uses the keyword "propertyNames"`,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg, err := carmy.New().Tool(carmy.Impl(handTool{c.schema})).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			check := func(provider string, got json.RawMessage, err error, want string) {
				t.Helper()
				if e, ok := strings.CutPrefix(want, "error: "); ok {
					if err == nil || !strings.Contains(err.Error(), e) {
						t.Errorf("%s: got %v, want an error with %q", provider, err, e)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s: %v", provider, err)
				}
				if string(got) != want {
					t.Errorf("%s:\n got %s\nwant %s", provider, got, want)
				}
			}
			o, err := llm.OpenAITools(reg)
			var params json.RawMessage
			if len(o) == 1 {
				params = o[0].Function.Parameters
			}
			check("OpenAI", params, err, c.openai)
			g, err := llm.GeminiFunctions(reg)
			params = nil
			if len(g) == 1 {
				params = g[0].Parameters
			}
			check("Gemini", params, err, c.gemini)
			a, err := llm.AnthropicTools(reg)
			if err != nil || len(a) != 1 || string(a[0].InputSchema) != c.schema {
				t.Errorf("Anthropic: %v, %+v: want the schema as written", err, a)
			}
		})
	}
}

// TestExportDeferred: a deferred tool is marked defer_loading in the
// Anthropic and Responses exports, which then end with their provider's
// tool search; only when a tool the caller may call is deferred. Chat
// Completions and Gemini, which defer nothing, define it like any other.
func TestExportDeferred(t *testing.T) {
	reg, err := carmy.New().Tool(
		carmy.Tool(exportPing, carmy.Read, carmy.Register(false), carmy.Name("ping")),
		carmy.Tool(exportPing, carmy.Read, carmy.Register(false), carmy.Name("audit_log"), carmy.Deferred(), carmy.Requires("admin")),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, c := range []struct {
		caller []carmy.CallOption
		want   []string // the Anthropic export; the Responses one ends in tool_search instead
	}{
		{[]carmy.CallOption{carmy.WithPermissions("admin")}, []string{"audit_log (deferred)", "ping", "tool_search_tool_bm25"}},
		{[]carmy.CallOption{carmy.WithPrincipal("guest")}, []string{"ping"}},
	} {
		a, err := llm.AnthropicTools(reg, c.caller...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range a {
			switch {
			case d.Type == llm.AnthropicToolSearchType && d.InputSchema == nil:
				got = append(got, d.Name)
			case d.DeferLoading:
				got = append(got, d.Name+" (deferred)")
			default:
				got = append(got, d.Name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Anthropic: %v; want %v", got, c.want)
		}
		r, err := llm.OpenAIResponsesTools(reg, c.caller...)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, d := range r {
			switch {
			case d.Type == "tool_search" && d.Name == "" && d.Parameters == nil:
				got = append(got, "tool_search_tool_bm25")
			case d.Type == "function" && d.DeferLoading:
				got = append(got, d.Name+" (deferred)")
			default:
				got = append(got, d.Name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Responses: %v; want %v", got, c.want)
		}
		o, _ := llm.OpenAITools(reg, c.caller...)
		g, _ := llm.GeminiFunctions(reg, c.caller...)
		if n := len(slices.DeleteFunc(slices.Clone(c.want), func(s string) bool { return s == "tool_search_tool_bm25" })); len(o) != n || len(g) != n {
			t.Errorf("Chat Completions %d tools, Gemini %d; want %d", len(o), len(g), n)
		}
	}
}
