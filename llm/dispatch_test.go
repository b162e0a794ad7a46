package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

// TestDispatch runs each call through Dispatch and through a Dispatcher,
// which must agree.
func TestDispatch(t *testing.T) {
	reg := exportRegistry(t)
	dispatcher := llm.NewDispatcher(reg)
	ctx := context.Background()
	for _, c := range []struct {
		name, tool, args string
		want             string // the tool's output: the input as decoded
		code             carmy.Code
		fields           []string // "path: message fragment"
	}{
		{
			name: "strict nulls for optional fields are dropped, at every depth",
			tool: "place_order",
			args: `{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":null,
				"lines":[{"sku":"A","quantity":1,"comment":null,"size":null},{"sku":"B","quantity":2,"comment":"gift","size":"L"}],
				"status":"new","rush":null,"gift":null,"priority":1,"tags":null,"note":null,
				"labels":[{"key":"a.b","value":"x"}],"by_date":[{"key":"2024-01-02","value":{"sku":"C","quantity":3,"comment":null,"size":null}}],
				"extra":null,"window":null,"meta":[{"key":"m","value":{"value":"v","color":null}}]}`,
			want: `{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":null,` +
				`"lines":[{"sku":"A","quantity":1,"comment":null},{"sku":"B","quantity":2,"comment":"gift","size":"L"}],` +
				`"status":"new","rush":null,"priority":1,"labels":{"a.b":"x"},"by_date":{"2024-01-02":{"sku":"C","quantity":3,"comment":null}},` +
				`"window":null,"meta":{"m":{"value":"v","color":null}}}`,
		},
		{
			name: "Anthropic and Gemini arguments: maps as objects, fields left out",
			tool: "place_order",
			args: `{"customer":{"name":"Ann","email":"ann@example.com"},"lines":[{"sku":"A","quantity":1}],"status":"paid","priority":2,
				"labels":{"k":"v"},"by_date":{},"extra":{"n":null,"m":7}}`,
			want: `{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":null,"lines":[{"sku":"A","quantity":1,"comment":null}],` +
				`"status":"paid","rush":null,"priority":2,"labels":{"k":"v"},"by_date":{},"extra":{"m":7,"n":null},"window":null}`,
		},
		{
			name: "a null for a required field stays, and validation reports it",
			tool: "place_order",
			args: `{"customer":{"name":null,"email":"ann@example.com","phone":null},"lines":[{"sku":"A","quantity":null,"comment":null,"size":null}],
				"status":null,"priority":1,"labels":[],"by_date":[]}`,
			code:   carmy.CodeInvalidInput,
			fields: []string{"customer.name: must be a string, not null", "lines[0].quantity: must be an integer, not null", "status: must be a string, not null"},
		},
		{
			name:   "entries that repeat a key or are not entries",
			tool:   "place_order",
			args:   `{"customer":{"name":"Ann","email":"ann@example.com"},"lines":[],"status":"new","priority":1,"labels":[{"key":"a","value":"1"},{"key":"a","value":"2"},{"value":"3"}],"by_date":[{"key":1,"value":{}}]}`,
			code:   carmy.CodeInvalidInput,
			fields: []string{"labels[1].key: repeats the key \"a\"", "labels[2]: must be an entry", "by_date[0].key: must be a string"},
		},
		{
			name: "recursive types, through $ref",
			tool: "build_tree",
			args: `{"name":"root","children":[{"name":"a","children":null,"parent":null,"weight":null},{"name":"b","children":[{"name":"c","children":[],"parent":null,"weight":1.5}],"parent":null,"weight":null}],"parent":null,"weight":null}`,
			want: `{"name":"root","children":[{"name":"a","parent":null,"weight":null},{"name":"b","children":[{"name":"c","parent":null,"weight":1.5}],"parent":null,"weight":null}],"parent":null,"weight":null}`,
		},
		{
			name: "a tool without input, and empty arguments",
			tool: "ping",
			args: ``,
			want: `"pong"`,
		},
		{
			name:   "arguments that are not JSON go to Execute, which reports them",
			tool:   "ping",
			args:   `{"x":`,
			code:   carmy.CodeInvalidInput,
			fields: []string{"x: malformed JSON"},
		},
		{
			name:   "unknown fields are still unknown",
			tool:   "ping",
			args:   `{"x":null}`,
			code:   carmy.CodeInvalidInput,
			fields: []string{`x: unknown field "x"`},
		},
		{
			name: "an unknown tool",
			tool: "plase_order",
			args: `{}`,
			code: carmy.CodeUnknownTool,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := llm.Dispatch(ctx, reg, c.tool, c.args)
			res2, err2 := dispatcher.Dispatch(ctx, c.tool, c.args)
			if carmy.CodeOf(err2) != carmy.CodeOf(err) || !bytes.Equal(res2.Output, res.Output) {
				t.Errorf("a Dispatcher returned %s, %v; Dispatch returned %s, %v", res2.Output, err2, res.Output, err)
			}
			if c.code != "" {
				var e *carmy.Error
				if !errors.As(err, &e) || e.Code != c.code {
					t.Fatalf("got %v, want code %s", err, c.code)
				}
				if len(e.Fields) != len(c.fields) {
					t.Fatalf("got fields %v, want %v", e.Fields, c.fields)
				}
				for i, f := range e.Fields {
					path, msg, _ := strings.Cut(c.fields[i], ": ")
					if f.Path != path || !strings.Contains(f.Message, msg) {
						t.Errorf("field %d = %q %q, want %q ...%q...", i, f.Path, f.Message, path, msg)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := compact(t, res.Output); got != compact(t, []byte(c.want)) {
				t.Errorf("output\n got %s\nwant %s", got, compact(t, []byte(c.want)))
			}
		})
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return buf.String()
}

// TestDispatchStrictArguments: arguments that conform to the exported
// strict schema (checked with an independent validator) run once Dispatch
// has undone the rewriting, and the same arguments sent to Execute as they
// are fail: the rewriting is needed both ways.
func TestDispatchStrictArguments(t *testing.T) {
	reg := exportRegistry(t)
	tools, _ := llm.OpenAITools(reg)
	schemas := map[string]*jsonschema.Schema{}
	for _, tool := range tools {
		schemas[tool.Function.Name] = compile(t, tool.Function.Parameters)
	}
	for _, c := range []struct{ tool, args string }{
		{"place_order", `{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":{"street":"1 Main St","city":"Oslo","zip":"01234"},
			"lines":[{"sku":"A","quantity":1,"comment":null,"size":null}],"status":"new","rush":"same_day","gift":null,"priority":3,
			"tags":null,"note":null,"labels":[],"by_date":[{"key":"d","value":{"sku":"B","quantity":2,"comment":null,"size":"M"}}],
			"extra":[{"key":"x","value":null}],"window":{"from":"2024-01-01T10:00:00Z","to":"2024-01-01T12:00:00Z"},"meta":null}`},
		{"build_tree", `{"name":"r","children":[{"name":"k","children":null,"parent":null,"weight":null}],"parent":null,"weight":2}`},
		{"ping", `{}`},
	} {
		t.Run(c.tool, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(c.args))
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas[c.tool].Validate(doc); err != nil {
				t.Fatalf("the arguments do not conform to the exported schema: %v", err)
			}
			if _, err := llm.Dispatch(context.Background(), reg, c.tool, c.args); err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
			if c.tool != "ping" {
				if _, err := reg.Execute(context.Background(), carmy.Call{Tool: c.tool, Input: json.RawMessage(c.args)}); carmy.CodeOf(err) != carmy.CodeInvalidInput {
					t.Errorf("Execute took strict-mode arguments as they are: %v", err)
				}
			}
		})
	}
}

// TestDispatchOptions: the call options reach Execute.
func TestDispatchOptions(t *testing.T) {
	var got carmy.Context
	whoami := carmy.Tool(func(ctx carmy.Context) (string, error) {
		got = ctx
		return ctx.Principal, nil
	}, carmy.Read, carmy.Name("whoami"), carmy.Register(false))
	reg, err := carmy.New().Tool(whoami).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res, err := llm.Dispatch(context.Background(), reg, "whoami", `{}`,
		carmy.WithPrincipal("ann"), carmy.WithRequestID("call_1"), carmy.WithSession("s"), carmy.WithMetadata("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"ann"` || got.RequestID != "call_1" || got.Session != "s" || got.Metadata["k"] != "v" {
		t.Errorf("output %s, context %+v", res.Output, got)
	}
	again, err := llm.Dispatch(context.Background(), reg, "whoami", `{}`, carmy.WithPrincipal("ann"), carmy.WithRequestID("call_1"))
	if err != nil || !again.Replayed || again.ExecutionID != res.ExecutionID {
		t.Errorf("a repeated request id was not replayed: %+v, %v", again, err)
	}
}

// BenchmarkDispatch measures what Dispatch adds to Execute for strict-mode
// arguments of place_order: reading the schema (at every call, or once for
// a Dispatcher) and the arguments, and rewriting them.
func BenchmarkDispatch(b *testing.B) {
	reg, err := carmy.New().Tool(carmy.Tool(exportPlaceOrder, carmy.Write, carmy.Register(false), carmy.ParallelSafe(),
		carmy.Name("place_order"))).Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	args := `{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":null,
		"lines":[{"sku":"A","quantity":1,"comment":null,"size":null}],"status":"new","rush":null,"gift":null,"priority":1,
		"tags":null,"note":null,"labels":[{"key":"a","value":"x"}],"by_date":[],"extra":null,"window":null,"meta":null}`
	// The same call as Execute takes it: what Dispatch adds is the
	// difference.
	undone := json.RawMessage(`{"customer":{"name":"Ann","email":"ann@example.com","phone":null},"ship":null,
		"lines":[{"sku":"A","quantity":1,"comment":null}],"status":"new","rush":null,"priority":1,
		"labels":{"a":"x"},"by_date":{},"window":null}`)
	ctx := context.Background()
	dispatcher := llm.NewDispatcher(reg)
	for _, c := range []struct {
		name     string
		dispatch func() (carmy.Result, error)
	}{
		{"Execute", func() (carmy.Result, error) { return reg.Execute(ctx, carmy.Call{Tool: "place_order", Input: undone}) }},
		{"Dispatcher", func() (carmy.Result, error) { return dispatcher.Dispatch(ctx, "place_order", args) }},
		{"Func", func() (carmy.Result, error) { return llm.Dispatch(ctx, reg, "place_order", args) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.dispatch(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nestedMaps has maps inside arrays, inside maps, and under a name that
// paths quote.
type nestedMaps struct {
	Groups []struct {
		Tags map[string]string `json:"tags"`
	} `json:"groups"`
	ByName map[string]struct {
		Tags map[string]int `json:"tags"`
	} `json:"by name"`
}

// TestDispatchNestedEntries: the problems of entries deep in the
// arguments carry their whole path.
func TestDispatchNestedEntries(t *testing.T) {
	reg, err := carmy.New().Tool(carmy.Tool(func(_ context.Context, in nestedMaps) (nestedMaps, error) { return in, nil },
		carmy.Read, carmy.Name("nested"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	args := `{"groups":[{"tags":[]},{"tags":[{"key":"a","value":"1"},{"key":"a","value":"2"}]}],
		"by name":[{"key":"x y","value":{"tags":[{"key":1,"value":2}]}},{"key":"z","value":{"tags":[{"value":3,"key":"n"}]}}]}`
	want := []carmy.FieldError{
		{Path: `groups[1].tags[1].key`, Message: `repeats the key "a"; give each key once`},
		{Path: `["by name"]["x y"].tags[0].key`, Message: "must be a string: it is a key of the map"},
	}
	for name, dispatch := range map[string]func() (carmy.Result, error){
		"Dispatch": func() (carmy.Result, error) { return llm.Dispatch(context.Background(), reg, "nested", args) },
		"Dispatcher": func() (carmy.Result, error) {
			return llm.NewDispatcher(reg).Dispatch(context.Background(), "nested", args)
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := dispatch()
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput || !slices.Equal(e.Fields, want) {
				t.Fatalf("got %v, fields %q; want %q", err, e.Fields, want)
			}
		})
	}
}

// TestDispatcherConcurrent: calls through one Dispatcher at once each get
// their own arguments undone and their own problems.
func TestDispatcherConcurrent(t *testing.T) {
	reg := exportRegistry(t)
	d := llm.NewDispatcher(reg)
	good := `{"name":"r","children":[{"name":"k","children":null,"parent":null,"weight":null}],"parent":null,"weight":2}`
	bad := `{"customer":{"name":"Ann","email":"ann@example.com"},"lines":[],"status":"new","priority":1,"labels":[{"key":"a","value":"1"},{"key":"a","value":"2"}],"by_date":[]}`
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				if g%2 == 0 {
					res, err := d.Dispatch(context.Background(), "build_tree", good)
					if err != nil || string(res.Output) != `{"name":"r","children":[{"name":"k","parent":null,"weight":null}],"parent":null,"weight":2}` {
						t.Errorf("build_tree: %s, %v", res.Output, err)
						return
					}
					continue
				}
				_, err := d.Dispatch(context.Background(), "place_order", bad)
				var e *carmy.Error
				if !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Path != "labels[1].key" {
					t.Errorf("place_order: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDispatchTaskRequired: a tool that runs only as a task, which the
// exports offer, runs as one through Dispatch and a Dispatcher, which wait
// for its output; its request id makes it one call, and an invalid input
// is refused as any call's.
func TestDispatchTaskRequired(t *testing.T) {
	type Export struct {
		Format string `json:"format" validate:"oneof=csv json"`
	}
	var runs atomic.Int32
	export := carmy.Tool(func(in Export) (string, error) {
		runs.Add(1)
		return "exported as " + in.Format, nil
	}, carmy.Read, carmy.Name("export_notes"), carmy.Description("Export the notes"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false))
	reg, err := carmy.New().Tool(export).Logger(slog.New(slog.DiscardHandler)).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	tools, err := llm.OpenAITools(reg)
	if err != nil || len(tools) != 1 {
		t.Fatalf("OpenAITools = %d tools, %v; want export_notes offered", len(tools), err)
	}
	ctx := context.Background()
	dispatcher := llm.NewDispatcher(reg)
	for _, d := range []struct {
		name     string
		dispatch func(ctx context.Context, name, args string, opts ...carmy.CallOption) (carmy.Result, error)
	}{
		{"Dispatch", func(ctx context.Context, name, args string, opts ...carmy.CallOption) (carmy.Result, error) {
			return llm.Dispatch(ctx, reg, name, args, opts...)
		}},
		{"Dispatcher", dispatcher.Dispatch},
	} {
		t.Run(d.name, func(t *testing.T) {
			before := runs.Load()
			for range 2 {
				res, err := d.dispatch(ctx, "export_notes", `{"format":"csv"}`, carmy.WithPrincipal("alice"), carmy.WithRequestID("call-"+d.name))
				if err != nil || string(res.Output) != `"exported as csv"` || res.ExecutionID == "" {
					t.Fatalf("Dispatch(export_notes) = %s, %v; want its output", res.Output, err)
				}
			}
			if n := runs.Load() - before; n != 1 {
				t.Fatalf("the tool ran %d times for one request id; want once", n)
			}
			_, err := d.dispatch(ctx, "export_notes", `{"format":"pdf"}`, carmy.WithPrincipal("alice"))
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput || len(e.Fields) != 1 || e.Fields[0].Path != "format" {
				t.Fatalf("Dispatch with an invalid input = %v; want invalid_input naming format", err)
			}
		})
	}
}
