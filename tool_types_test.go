package carmy_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
)

type corpusDecimal = corpus.Decimal

// ownInput has what a JSON library may write differently from the schema:
// an inline member, a byte array and durations.
type ownInput struct {
	Page    ownPage       `json:",inline"`
	IP      [4]byte       `json:"ip"`
	Wait    time.Duration `json:"wait"`
	Backoff []time.Duration
}

type ownPage struct {
	Offset int `json:"offset"`
}

func echoOwn(_ context.Context, in ownInput) (ownInput, error) { return in, nil }

func TestInvokeOwnTypes(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(echoOwn, carmy.Read, carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	in := ownInput{Page: ownPage{Offset: 3}, IP: [4]byte{10, 0, 0, 1}, Wait: 1500 * time.Millisecond, Backoff: []time.Duration{time.Second, time.Hour}}
	for _, input := range []any{in, &in} {
		out, err := carmy.Invoke[ownInput](context.Background(), reg, "echo_own", input)
		if err != nil {
			t.Fatalf("Invoke with %T: %v", input, err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Errorf("Invoke with %T = %+v, want %+v", input, out, in)
		}
	}
	res, err := reg.Execute(context.Background(), carmy.Call{Tool: "echo_own", Input: json.RawMessage(`{"offset":1,"ip":[1,2,3,4],"wait":"1h30m","Backoff":["250ms"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"offset":1,"ip":[1,2,3,4],"wait":"1h30m0s","Backoff":["250ms"]}`; string(res.Output) != want {
		t.Errorf("output %s, want %s", res.Output, want)
	}
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "echo_own", Input: json.RawMessage(`{"offset":1,"ip":[1,2,3,4],"wait":5,"Backoff":["1d"]}`)})
	e, _ := err.(*carmy.Error)
	if e == nil || len(e.Fields) != 2 || e.Fields[0].Path != "wait" || e.Fields[1].Path != "Backoff[0]" || !strings.Contains(e.Fields[1].Message, `"1h30m"`) {
		t.Errorf("bad durations: %v", err)
	}
}

func TestToolMetadataJSON(t *testing.T) {
	t.Parallel()
	m := carmy.ToolMetadata{Name: "x", Effect: carmy.Read, Timeout: 90 * time.Second, InputSchema: json.RawMessage(`{"type":"object"}`)}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if fields["timeout_ms"] != float64(90000) || fields["timeout"] != nil || fields["Timeout"] != nil {
		t.Errorf("json.Marshal(ToolMetadata) = %s; want timeout_ms 90000 and no other timeout", b)
	}
	var back carmy.ToolMetadata
	if err := json.Unmarshal(b, &back); err != nil || back.Timeout != m.Timeout || back.Name != "x" || back.Effect != carmy.Read {
		t.Errorf("json.Unmarshal(%s) = %+v, %v", b, back, err)
	}
}

func greet(_ context.Context, in struct {
	Name string `json:"name"`
}) (string, error) {
	return "Hello, \"" + in.Name + "\"\n", nil
}

// A string output over MCP is the text block itself; its structured
// content keeps the JSON.
func TestMCPStringOutput(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(greet, carmy.Read, carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() }) // after the session's own cleanup
	srv := serve(t, reg)
	s, err := mcpSession(t, srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ann"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := r.Content[0].(*mcp.TextContent).Text; text != "Hello, \"Ann\"\n" {
		t.Errorf("text block %q, want the string itself", text)
	}
	if m := structured(t, r); m["result"] != "Hello, \"Ann\"\n" {
		t.Errorf("structured content %v", r.StructuredContent)
	}
}

// legacyAmount has its own JSON and no schema: only a tool whose schemas
// are written out can use it.
type legacyAmount struct{ cents int64 }

func (a legacyAmount) MarshalJSON() ([]byte, error) { return json.Marshal(a.cents) }

func (a *legacyAmount) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &a.cents) }

type declaredIn struct {
	Items []struct {
		SKU    string       `json:"sku"`
		Amount legacyAmount `json:"amount"`
	} `json:"items"`
}

type declaredOut struct {
	Total legacyAmount `json:"total"`
}

type declaredTool struct{ meta carmy.ToolMetadata }

func (d declaredTool) Metadata() carmy.ToolMetadata { return d.meta }

func (declaredTool) Execute(_ carmy.Context, in declaredIn) (declaredOut, error) {
	var out declaredOut
	for _, it := range in.Items {
		out.Total.cents += it.Amount.cents
	}
	return out, nil
}

func TestImplDeclaredSchemas(t *testing.T) {
	t.Parallel()
	in := json.RawMessage(`{"type":"object","additionalProperties":false,"required":["items"],"properties":{"items":{"type":"array","items":{"type":"object","required":["sku","amount"],"properties":{"sku":{"type":"string","minLength":1},"amount":{"type":"integer"}}}}}}`)
	out := json.RawMessage(`{"type":"object","required":["total"],"properties":{"total":{"type":"integer","maximum":1000}}}`)
	if _, err := carmy.New().Tool(carmy.Impl(declaredTool{carmy.ToolMetadata{Name: "sum", Effect: carmy.Read}})).Build(); err == nil || !strings.Contains(err.Error(), "own JSON encoding") {
		t.Errorf("Build without declared schemas: %v; want the own-JSON error", err)
	}
	reg, err := carmy.New().Tool(carmy.Impl(declaredTool{carmy.ToolMetadata{Name: "sum", Effect: carmy.Read, InputSchema: in, OutputSchema: out}})).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	res, err := reg.Execute(ctx, carmy.Call{Tool: "sum", Input: json.RawMessage(`{"items":[{"sku":"a","amount":5},{"sku":"b","amount":7}]}`)})
	if err != nil || string(res.Output) != `{"total":12}` {
		t.Errorf("sum = %s, %v", res.Output, err)
	}
	_, err = reg.Execute(ctx, carmy.Call{Tool: "sum", Input: json.RawMessage(`{"items":[{"sku":"a","amount":5},{"sku":"b","amount":7},{"sku":"","amount":"x"}],"extra":1}`)})
	e, _ := err.(*carmy.Error)
	if e == nil || e.Code != carmy.CodeInvalidInput {
		t.Fatalf("invalid input: %v", err)
	}
	paths := map[string]bool{}
	for _, f := range e.Fields {
		paths[f.Path] = true
	}
	if !paths["items[2].sku"] || !paths["items[2].amount"] || !paths[""] && !paths["extra"] {
		t.Errorf("field paths %+v; want items[2].sku, items[2].amount and the extra member", e.Fields)
	}
	_, err = reg.Execute(ctx, carmy.Call{Tool: "sum", Input: json.RawMessage(`{"items":[{"sku":"a","amount":5000}]}`)})
	if carmy.CodeOf(err) != carmy.CodeInternal {
		t.Errorf("an output beyond its declared schema: %v; want internal", err)
	}
}

type countIn struct {
	Items []struct {
		N int `json:"n"`
	} `json:"items"`
}

type countTool struct{}

func (countTool) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "count", Effect: carmy.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"n":{"type":"number"}}}}}}`)}
}

func (countTool) Execute(_ carmy.Context, in countIn) (int, error) { return len(in.Items), nil }

// A value a written-out schema allows but the Go type cannot hold is
// refused at its path, without naming Go types.
func TestImplDeclaredSchemaLooserThanType(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Impl[countIn, int](countTool{})).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "count", Input: json.RawMessage(`{"items":[{"n":1},{"n":1.5}]}`)})
	e, _ := err.(*carmy.Error)
	if e == nil || len(e.Fields) != 1 || e.Fields[0].Path != "items[1].n" || strings.Contains(e.Fields[0].Message, "int") {
		t.Errorf("1.5 for an int: %v %+v", err, e)
	}
}

type priced struct {
	Lines []corpusDecimal `json:"lines"`
}

func TestOpaqueTypes(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(func(_ context.Context, in priced) (priced, error) { return in, nil }, carmy.Read, carmy.Name("price"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	res, err := reg.Execute(ctx, carmy.Call{Tool: "price", Input: json.RawMessage(`{"lines":["1.50","-0.05"]}`)})
	if err != nil || string(res.Output) != `{"lines":["1.50","-0.05"]}` {
		t.Errorf("price = %s, %v", res.Output, err)
	}
	_, err = reg.Execute(ctx, carmy.Call{Tool: "price", Input: json.RawMessage(`{"lines":["1.50","1.5"]}`)})
	if e, _ := err.(*carmy.Error); e == nil || len(e.Fields) != 1 || e.Fields[0].Path != "lines[1]" || !strings.Contains(e.Fields[0].Message, "pattern") {
		t.Errorf("bad amount: %v", err)
	}
}

type crossBase struct {
	Password string `json:"password"`
	Confirm  string `json:"confirm" validate:"eqfield=Password"`
}

type crossInput struct {
	crossBase
	Window struct {
		From int `json:"from"`
		To   int `json:"to" validate:"gtfield=From"`
	} `json:"window"`
	Ranges []struct {
		Lo int `json:"lo"`
		Hi int `json:"hi" validate:"gtefield=Lo"`
	} `json:"ranges"`
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty" validate:"required_if=Kind refund"`
}

// Cross-field rules hold in embedded structs, unnamed structs and structs
// inside slices, not only at the top.
func TestCrossFieldRules(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(func(context.Context, crossInput) error { return nil }, carmy.Write, carmy.Name("cross"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ok := `{"password":"a","confirm":"a","window":{"from":1,"to":2},"ranges":[{"lo":1,"hi":1}],"kind":"sale"}`
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "cross", Input: json.RawMessage(ok)}); err != nil {
		t.Fatalf("valid input refused: %v", err)
	}
	bad := `{"password":"a","confirm":"b","window":{"from":3,"to":2},"ranges":[{"lo":1,"hi":1},{"lo":5,"hi":4}],"kind":"refund"}`
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "cross", Input: json.RawMessage(bad)})
	e, _ := err.(*carmy.Error)
	var paths []string
	if e != nil {
		for _, f := range e.Fields {
			paths = append(paths, f.Path)
		}
	}
	if want := []string{"confirm", "reason", "window.to", "ranges[1].hi"}; !sameSet(paths, want) {
		t.Errorf("field paths %v, want %v (%v)", paths, want, err)
	}
	_, err = carmy.New().Tool(carmy.Tool(func(context.Context, struct {
		A int `json:"a" validate:"eqcsfield=B.C"`
	}) error {
		return nil
	}, carmy.Write, carmy.Name("cs"), carmy.Register(false))).Build()
	if err == nil || !strings.Contains(err.Error(), "eqcsfield") {
		t.Errorf("a cross-struct rule: %v; want a Build error", err)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

type requiredIn struct {
	ID   uuid.UUID `json:"id" validate:"required"`
	At   time.Time `json:"at" validate:"required"`
	Key  [2]byte   `json:"key" validate:"required"`
	Name *string   `json:"name" validate:"required"`
}

// required means what the validator means: non-zero for values, non-nil
// for pointers.
func TestRequiredMeaning(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(func(context.Context, requiredIn) error { return nil }, carmy.Write, carmy.Name("req"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tests := []struct {
		input string
		paths []string
	}{
		{`{"id":"0190b3d2-4b7e-7c3a-9f00-1234567890ab","at":"2024-01-02T03:04:05Z","key":[0,1],"name":""}`, nil},
		{`{"id":"00000000-0000-0000-0000-000000000000","at":"0001-01-01T00:00:00Z","key":[0,0],"name":null}`, []string{"id", "at", "key", "name"}},
		{`{"id":"0190b3d2-4b7e-7c3a-9f00-1234567890ab","at":"0001-01-01T00:00:00.000+00:00","key":[1,0],"name":"x"}`, []string{"at"}},
	}
	for _, tt := range tests {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "req", Input: json.RawMessage(tt.input)})
		var paths []string
		if e, ok := err.(*carmy.Error); ok {
			for _, f := range e.Fields {
				paths = append(paths, f.Path)
			}
		}
		if !sameSet(paths, tt.paths) {
			t.Errorf("%s: problems at %v, want %v (%v)", tt.input, paths, tt.paths, err)
		}
	}
}

// TestToolMetadataWireBytes pins the bytes of ToolMetadata's one JSON form
// (GET /tools, the command), member by member and in order, and what
// reading it accepts.
func TestToolMetadataWireBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    carmy.ToolMetadata
		want string
	}{
		{"defaults left out", carmy.ToolMetadata{Name: "x", Effect: carmy.Read, Timeout: 90 * time.Second, InputSchema: json.RawMessage(`{"type":"object"}`)},
			"{\"name\":\"x\",\"description\":\"\",\"input_schema\":{\"type\":\"object\"},\"output_schema\":null,\"effect\":\"read\",\"idempotent\":false,\"parallel_safe\":false,\"confirmation\":\"none\",\"timeout_ms\":90000}"},
		{"every member", carmy.ToolMetadata{Name: "burn", Description: "Burns <b>a</b> & é\u2028", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"string"}`),
			Effect: carmy.Destructive, Idempotent: true, ParallelSafe: true, Confirmation: carmy.ConfirmationRequired, Timeout: 1500 * time.Millisecond,
			Requires: []string{"a", "b"}, Tasks: carmy.TaskRequired, Deferred: true},
			"{\"name\":\"burn\",\"description\":\"Burns <b>a</b> & é\u2028\",\"input_schema\":{\"type\":\"object\"},\"output_schema\":{\"type\":\"string\"},\"effect\":\"destructive\",\"idempotent\":true,\"parallel_safe\":true,\"confirmation\":\"required\",\"timeout_ms\":1500,\"requires\":[\"a\",\"b\"],\"task_support\":\"required\",\"defer_loading\":true}"},
		{"empty requires, forbidden tasks, a timeout in whole milliseconds", carmy.ToolMetadata{Name: "y", Effect: carmy.None, Timeout: time.Millisecond + 999*time.Microsecond,
			Requires: []string{}, Tasks: carmy.TaskForbidden, Confirmation: carmy.ConfirmationPossible},
			"{\"name\":\"y\",\"description\":\"\",\"input_schema\":null,\"output_schema\":null,\"effect\":\"none\",\"idempotent\":false,\"parallel_safe\":false,\"confirmation\":\"possible\",\"timeout_ms\":1,\"task_support\":\"forbidden\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.m.MarshalJSON()
			if err != nil || string(b) != tt.want {
				t.Fatalf("MarshalJSON() = %s, %v\nwant %s", b, err, tt.want)
			}
		})
	}
	t.Run("read as encoding/json reads", func(t *testing.T) {
		var m carmy.ToolMetadata
		err := json.Unmarshal([]byte(`{"NAME":"x","Timeout_MS":1500,"task_support":"forbidden","defer_loading":true,"extra":1}`), &m)
		want := carmy.ToolMetadata{Name: "x", Timeout: 1500 * time.Millisecond, Tasks: carmy.TaskForbidden, Deferred: true}
		if err != nil || !reflect.DeepEqual(m, want) {
			t.Errorf("Unmarshal = %+v, %v; want %+v", m, err, want)
		}
	})
}
