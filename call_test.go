package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/carmy-dev/carmy"
)

// rtQuiet is a logger for registries whose tools fail on purpose.
var rtQuiet = slog.New(slog.DiscardHandler)

// rtRegistry builds a registry of defs and closes it when the test ends.
func rtRegistry(t *testing.T, b *carmy.Builder) *carmy.Registry {
	t.Helper()
	r, err := b.Logger(rtQuiet).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// rtError returns the *carmy.Error of err, failing the test without one.
func rtError(t *testing.T, err error, want carmy.Code) *carmy.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s", want)
	}
	var e *carmy.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *carmy.Error", err, err)
	}
	if e.Code != want {
		t.Fatalf("code = %q, want %q: %v", e.Code, want, err)
	}
	return e
}

// rtWait waits for ch to close or receive, for at most 2s.
func rtWait[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type rtLine struct {
	SKU string `json:"sku" validate:"required"`
	Qty uint32 `json:"qty,omitempty" validate:"max=100"`
}

type rtOrderIn struct {
	SKU   string            `json:"sku"`
	Qty   int64             `json:"qty,omitempty"`
	Small int8              `json:"small,omitempty"`
	Count uint16            `json:"count,omitempty"`
	Ratio float64           `json:"ratio,omitempty"`
	Note  *string           `json:"note"`
	Flag  bool              `json:"flag,omitempty"`
	Lines []rtLine          `json:"lines,omitempty"`
	Tags  map[string]int8   `json:"tags,omitempty"`
	ByKey map[string]rtLine `json:"by_key,omitempty"`
}

func rtEchoOrder(in rtOrderIn) (rtOrderIn, error) { return in, nil }

func TestExecuteStrictDecoding(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(rtEchoOrder, carmy.None, carmy.Name("echo"), carmy.Register(false))))
	type want map[string]string // path → substring of its message
	tests := []struct {
		name  string
		input string
		want  want                 // nil: accepted
		check func(rtOrderIn) bool // for accepted inputs
	}{
		{"valid", `{"sku":"A-1"}`, nil, func(o rtOrderIn) bool { return o.SKU == "A-1" }},
		{"names are case-sensitive", `{"SKU":"A-1"}`, want{"SKU": `did you mean "sku"`, "sku": "required"}, nil},
		{"unknown field", `{"sku":"A-1","colour":"red"}`, want{"colour": `unknown field "colour"`}, nil},
		{"unknown field near a known one", `{"sku":"A-1","qtty":2}`, want{"qtty": `did you mean "qty"`}, nil},
		{"duplicate key", `{"sku":"A-1","sku":"B-2"}`, want{"sku": "duplicate"}, nil},
		{"duplicate key differing in escapes", `{"sku":"A-1","\u0073ku":"B-2"}`, want{"sku": "duplicate"}, nil},
		{"invalid UTF-8 in a value", "{\"sku\":\"A\xff\"}", want{"sku": "UTF-8"}, nil},
		{"invalid UTF-8 in a name", "{\"sku\":\"A-1\",\"\xff\":1}", want{"*": "UTF-8"}, nil},
		{"trailing object", `{"sku":"A-1"} {}`, want{"": "after the top-level"}, nil},
		{"trailing garbage", `{"sku":"A-1"}x`, want{"*": "malformed"}, nil},
		{"trailing whitespace is fine", "{\"sku\":\"A-1\"} \n", nil, func(o rtOrderIn) bool { return o.SKU == "A-1" }},
		{"malformed", `{"sku":`, want{"*": "malformed"}, nil},
		{"malformed deep", `{"sku":"A-1","lines":[{"sku":"x",}]}`, want{"*": "malformed"}, nil},
		{"number for a string", `{"sku":1}`, want{"sku": "must be a string, not a number"}, nil},
		{"string for an integer", `{"sku":"A-1","qty":"2"}`, want{"qty": "must be an integer, not a string"}, nil},
		{"string for a boolean", `{"sku":"A-1","flag":"true"}`, want{"flag": "must be a boolean"}, nil},
		{"object for an array", `{"sku":"A-1","lines":{}}`, want{"lines": "must be an array"}, nil},
		{"missing required key", `{}`, want{"sku": "is required: add a string"}, nil},
		{"null for a string", `{"sku":null}`, want{"sku": "null"}, nil},
		{"null for an optional integer", `{"sku":"A-1","qty":null}`, want{"qty": "null"}, nil},
		{"null for an optional slice", `{"sku":"A-1","lines":null}`, want{"lines": "null"}, nil},
		{"null into a pointer", `{"sku":"A-1","note":null}`, nil, func(o rtOrderIn) bool { return o.Note == nil }},
		{"pointer set", `{"sku":"A-1","note":"gift"}`, nil, func(o rtOrderIn) bool { return o.Note != nil && *o.Note == "gift" }},
		{"integer 2.0", `{"sku":"A-1","qty":2.0}`, nil, func(o rtOrderIn) bool { return o.Qty == 2 }},
		{"integer 2e0", `{"sku":"A-1","qty":2e0}`, nil, func(o rtOrderIn) bool { return o.Qty == 2 }},
		{"integer 20e-1", `{"sku":"A-1","qty":20e-1}`, nil, func(o rtOrderIn) bool { return o.Qty == 2 }},
		{"integer 1.5 refused", `{"sku":"A-1","qty":1.5}`, want{"qty": "must be an integer"}, nil},
		{"integer 1e-1 refused", `{"sku":"A-1","qty":1e-1}`, want{"qty": "must be an integer"}, nil},
		{"int64 max", `{"sku":"A-1","qty":9223372036854775807}`, nil, func(o rtOrderIn) bool { return o.Qty == 1<<63-1 }},
		{"int64 min", `{"sku":"A-1","qty":-9223372036854775808}`, nil, func(o rtOrderIn) bool { return o.Qty == -1<<63 }},
		{"int64 overflow", `{"sku":"A-1","qty":9223372036854775808}`, want{"qty": "between"}, nil},
		{"int64 overflow in exponent form", `{"sku":"A-1","qty":1e19}`, want{"qty": "between"}, nil},
		{"int8 max", `{"sku":"A-1","small":127}`, nil, func(o rtOrderIn) bool { return o.Small == 127 }},
		{"int8 min", `{"sku":"A-1","small":-128}`, nil, func(o rtOrderIn) bool { return o.Small == -128 }},
		{"int8 overflow", `{"sku":"A-1","small":128}`, want{"small": "between -128 and 127"}, nil},
		{"int8 underflow", `{"sku":"A-1","small":-129}`, want{"small": "between -128 and 127"}, nil},
		{"uint16 max", `{"sku":"A-1","count":65535}`, nil, func(o rtOrderIn) bool { return o.Count == 65535 }},
		{"uint16 overflow", `{"sku":"A-1","count":65536}`, want{"count": "between 0 and 65535"}, nil},
		{"-1 into uint", `{"sku":"A-1","count":-1}`, want{"count": "between 0 and 65535"}, nil},
		{"-0 into uint", `{"sku":"A-1","count":-0}`, nil, func(o rtOrderIn) bool { return o.Count == 0 }},
		{"float out of range", `{"sku":"A-1","ratio":1e400}`, want{"ratio": "between"}, nil},
		{"nested path", `{"sku":"A-1","lines":[{"sku":"x"},{"sku":"y"},{}]}`, want{"lines[2].sku": "is required"}, nil},
		{"nested rule", `{"sku":"A-1","lines":[{"sku":"x"},{"sku":"y","qty":101}]}`, want{"lines[1].qty": "100"}, nil},
		{"nested required string is non-empty", `{"sku":"A-1","lines":[{"sku":""}]}`, want{"lines[0].sku": ""}, nil},
		{"nested unknown field", `{"sku":"A-1","lines":[{"sku":"x","SKU":"y"}]}`, want{"lines[0].SKU": `did you mean "sku"`}, nil},
		{"map value, quoted key", `{"sku":"A-1","tags":{"a.b":300}}`, want{`tags["a.b"]`: "between -128 and 127"}, nil},
		{"map value, identifier key", `{"sku":"A-1","tags":{"ok":300}}`, want{"tags.ok": "between -128 and 127"}, nil},
		{"map value, empty key", `{"sku":"A-1","tags":{"":300}}`, want{`tags[""]`: "between"}, nil},
		{"map value, key with a quote", `{"sku":"A-1","tags":{"a\"b":300}}`, want{`tags["a\"b"]`: "between"}, nil},
		{"map of structs", `{"sku":"A-1","by_key":{"x y":{}}}`, want{`by_key["x y"].sku`: "is required"}, nil},
		{"map accepted", `{"sku":"A-1","tags":{"a.b":1}}`, nil, func(o rtOrderIn) bool { return o.Tags["a.b"] == 1 }},
		{"several problems at once",
			`{"SKU":"x","small":999,"lines":[{"qty":1},{"sku":"y","qty":500}],"tags":{"a.b":"s"}}`,
			want{"SKU": "did you mean", "sku": "required", "small": "between", "lines[0].sku": "required", "lines[1].qty": "100", `tags["a.b"]`: "integer"}, nil},
		{"array at the root", `[]`, want{"": "must be a JSON object, not an array"}, nil},
		{"string at the root", `"A-1"`, want{"": "must be a JSON object, not a string"}, nil},
		{"number at the root", `1`, want{"": "must be a JSON object, not a number"}, nil},
		{"boolean at the root", `true`, want{"": "must be a JSON object, not a boolean"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "echo", Input: json.RawMessage(tt.input)})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Execute(%s): %v", tt.input, err)
				}
				var out rtOrderIn
				if err := json.Unmarshal(res.Output, &out); err != nil {
					t.Fatalf("output %s: %v", res.Output, err)
				}
				if !tt.check(out) {
					t.Errorf("output %s does not hold what %s said", res.Output, tt.input)
				}
				return
			}
			e := rtError(t, err, carmy.CodeInvalidInput)
			if msg, ok := tt.want["*"]; ok {
				// A malformed document reports its first syntax error,
				// located wherever the decoder stood.
				if len(e.Fields) != 1 || !strings.Contains(e.Fields[0].Message, msg) {
					t.Fatalf("fields = %+v, want one saying %q", e.Fields, msg)
				}
				return
			}
			var paths, wantPaths []string
			for _, f := range e.Fields {
				paths = append(paths, f.Path)
			}
			for p := range tt.want {
				wantPaths = append(wantPaths, p)
			}
			slices.Sort(paths)
			slices.Sort(wantPaths)
			if !slices.Equal(paths, wantPaths) {
				t.Fatalf("paths = %q, want %q\n%v", paths, wantPaths, err)
			}
			for _, f := range e.Fields {
				if !strings.Contains(f.Message, tt.want[f.Path]) {
					t.Errorf("%s: message %q, want it to contain %q", f.Path, f.Message, tt.want[f.Path])
				}
				if f.Message == "" {
					t.Errorf("%s: empty message", f.Path)
				}
			}
			if e.Message == "" || !strings.Contains(e.Message, "echo") {
				t.Errorf("Message = %q, want it to name the tool", e.Message)
			}
			if e.Retryable {
				t.Errorf("invalid_input is Retryable; the same call cannot succeed")
			}
		})
	}
}

type rtOptIn struct {
	Note *string `json:"note"`
	N    int     `json:"n,omitempty"`
}

type rtReqPtrIn struct {
	N *int `json:"n" validate:"required"`
}

type rtImplIn struct {
	Text string `json:"text,omitempty"`
}

type rtImplOut struct {
	Upper  string `json:"upper"`
	ExecID string `json:"exec_id"`
}

type rtImplHandler struct{ meta carmy.ToolMetadata }

func (h rtImplHandler) Metadata() carmy.ToolMetadata { return h.meta }
func (h rtImplHandler) Execute(ctx carmy.Context, in rtImplIn) (rtImplOut, error) {
	c, ok := carmy.ContextFrom(ctx)
	if !ok || c.ExecutionID != ctx.ExecutionID {
		return rtImplOut{}, errors.New("ContextFrom failed inside a hand-written tool")
	}
	switch in.Text {
	case "fail":
		return rtImplOut{}, errors.New("impl-secret-cause")
	case "panic":
		panic("impl-secret-panic")
	}
	return rtImplOut{Upper: strings.ToUpper(in.Text), ExecID: ctx.ExecutionID}, nil
}

type rtImplPtrHandler struct{}

func (rtImplPtrHandler) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "impl_ptr", Effect: carmy.None}
}
func (rtImplPtrHandler) Execute(ctx carmy.Context, in *rtImplIn) (*string, error) {
	if in == nil {
		return nil, errors.New("nil input")
	}
	if in.Text == "" {
		return nil, nil
	}
	return &in.Text, nil
}

func TestExecuteAbsentInputIsEmptyObject(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(
		carmy.Tool(func(in rtOptIn) (rtOptIn, error) { return in, nil }, carmy.None, carmy.Name("optional"), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) (string, error) { return "ran", nil }, carmy.None, carmy.Name("no_input"), carmy.Register(false)),
		carmy.Tool(func(in *rtOptIn) (bool, error) { return in != nil, nil }, carmy.None, carmy.Name("pointer_input"), carmy.Register(false)),
		carmy.Tool(rtEchoOrder, carmy.None, carmy.Name("required"), carmy.Register(false)),
		carmy.Impl(rtImplHandler{carmy.ToolMetadata{Name: "impl", Effect: carmy.None}}),
	))
	inputs := []struct {
		name  string
		input json.RawMessage
	}{
		{"nil", nil},
		{"empty", json.RawMessage{}},
		{"whitespace", json.RawMessage(" \n\t\r ")},
		{"null", json.RawMessage("null")},
		{"null with spaces", json.RawMessage(" null\n")},
		{"empty object", json.RawMessage("{}")},
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			for tool, want := range map[string]string{"optional": `"note":null`, "no_input": `"ran"`, "pointer_input": "true", "impl": `"upper":""`} {
				res, err := r.Execute(context.Background(), carmy.Call{Tool: tool, Input: in.input})
				if err != nil {
					t.Errorf("%s: %v", tool, err)
					continue
				}
				if !strings.Contains(string(res.Output), want) {
					t.Errorf("%s: output %s, want %s", tool, res.Output, want)
				}
			}
			_, err := r.Execute(context.Background(), carmy.Call{Tool: "required", Input: in.input})
			e := rtError(t, err, carmy.CodeInvalidInput)
			if len(e.Fields) != 1 || e.Fields[0].Path != "sku" {
				t.Errorf("fields = %+v, want sku missing, as for {}", e.Fields)
			}
		})
	}
	t.Run("non-object for a tool without input", func(t *testing.T) {
		for _, in := range []string{`[]`, `"x"`, `0`, `false`} {
			_, err := r.Execute(context.Background(), carmy.Call{Tool: "no_input", Input: json.RawMessage(in)})
			e := rtError(t, err, carmy.CodeInvalidInput)
			if len(e.Fields) != 1 || e.Fields[0].Path != "" || !strings.Contains(e.Fields[0].Message, "object") {
				t.Errorf("%s: fields = %+v", in, e.Fields)
			}
		}
	})
	t.Run("a tool without input takes no fields", func(t *testing.T) {
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "no_input", Input: json.RawMessage(`{"x":1}`)})
		e := rtError(t, err, carmy.CodeInvalidInput)
		if len(e.Fields) != 1 || e.Fields[0].Path != "x" || !strings.Contains(e.Fields[0].Message, "no input fields") {
			t.Errorf("fields = %+v", e.Fields)
		}
	})
}

func TestExecuteRequiredPointer(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(in rtReqPtrIn) (int, error) { return *in.N, nil }, carmy.None, carmy.Name("req_ptr"), carmy.Register(false))))
	tests := []struct {
		input string
		code  carmy.Code // "" for success
		out   string
	}{
		{`{"n":0}`, "", "0"},
		{`{"n":7}`, "", "7"},
		{`{"n":null}`, carmy.CodeInvalidInput, ""},
		{`{}`, carmy.CodeInvalidInput, ""},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "req_ptr", Input: json.RawMessage(tt.input)})
			if tt.code != "" {
				e := rtError(t, err, tt.code)
				if len(e.Fields) != 1 || e.Fields[0].Path != "n" {
					t.Errorf("fields = %+v, want one for n", e.Fields)
				}
				return
			}
			if err != nil || string(res.Output) != tt.out {
				t.Errorf("Execute = %s, %v; want %s", res.Output, err, tt.out)
			}
		})
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(rtEchoOrder, carmy.None, carmy.Name("create_order"), carmy.Register(false))))
	tests := []struct {
		name, tool, want string
	}{
		{"typo", "create_ordr", `did you mean "create_order"`},
		{"case", "Create_Order", `did you mean "create_order"`},
		{"far", "zzzzzzzzzzzzzzzzzzzz", "create_order"},
		{"empty", "", "create_order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Execute(context.Background(), carmy.Call{Tool: tt.tool})
			e := rtError(t, err, carmy.CodeUnknownTool)
			if !strings.Contains(e.Message, tt.want) {
				t.Errorf("Message = %q, want it to contain %q", e.Message, tt.want)
			}
		})
	}
}

func TestExecuteExecutionIDs(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx carmy.Context) (string, error) { return ctx.ExecutionID, nil },
		carmy.None, carmy.Name("id"), carmy.ParallelSafe(), carmy.Register(false))))
	const n = 64
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "id"})
			if err != nil {
				errs <- err
				return
			}
			var inside string
			if err := json.Unmarshal(res.Output, &inside); err != nil || inside != res.ExecutionID {
				errs <- fmt.Errorf("the tool saw execution id %q, the result says %q", inside, res.ExecutionID)
			}
			ids[i] = res.ExecutionID
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("execution id %q: %v", id, err)
		}
		if u.Version() != 7 {
			t.Errorf("execution id %s is version %d, want 7", id, u.Version())
		}
		if u.Variant() != uuid.RFC4122 {
			t.Errorf("execution id %s has variant %v", id, u.Variant())
		}
		if u.String() != id {
			t.Errorf("execution id %q is not in canonical form %q", id, u.String())
		}
		if seen[id] {
			t.Errorf("execution id %s repeats", id)
		}
		seen[id] = true
	}
}

func TestExecutePanic(t *testing.T) {
	t.Parallel()
	logs := &logSink{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	r, err := carmy.New().Logger(logger).Tool(
		carmy.Tool(func(ctx context.Context) (string, error) { panic("secret-panic-text-42") }, carmy.Write, carmy.Name("boom"), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) (string, error) { return "fine", nil }, carmy.Read, carmy.Name("ok"), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 3 { // the tool's turn is released after a panic
		res, err := r.Execute(context.Background(), carmy.Call{Tool: "boom"})
		e := rtError(t, err, carmy.CodeInternal)
		if !e.Retryable {
			t.Errorf("call %d: Retryable = false, want true for internal", i)
		}
		if strings.Contains(e.Message, "secret-panic-text-42") || strings.Contains(e.Error(), "secret-panic-text-42") {
			t.Errorf("call %d: the panic text reached the caller: %q", i, e.Message)
		}
		for k, v := range e.Details {
			if strings.Contains(fmt.Sprint(v), "secret-panic") || strings.Contains(fmt.Sprint(v), "goroutine") {
				t.Errorf("Details[%q] = %v carries the panic", k, v)
			}
		}
		if res.Output != nil {
			t.Errorf("output %s alongside an error", res.Output)
		}
	}
	res, err := r.Execute(context.Background(), carmy.Call{Tool: "ok"})
	if err != nil || string(res.Output) != `"fine"` {
		t.Fatalf("after a panic: Execute = %s, %v", res.Output, err)
	}
	if !strings.Contains(logs.String(), "secret-panic-text-42") {
		t.Errorf("the panic is not logged: %s", logs.String())
	}
}

func TestExecutePanicValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   func(ctx context.Context) (int, error)
	}{
		{"string", func(context.Context) (int, error) { panic("secret-panic-text") }},
		{"error", func(context.Context) (int, error) { panic(errors.New("secret-panic-text")) }},
		{"nil", func(context.Context) (int, error) { panic(nil) }},
		{"nil map write", func(context.Context) (int, error) {
			var m map[string]int
			//lint:ignore SA5000 the panic is the point
			m["secret-panic-text"] = 1
			return 0, nil
		}},
		{"index out of range", func(context.Context) (int, error) {
			s := []int{}
			i := 3
			return s[i], nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rtRegistry(t, carmy.New().Tool(carmy.Tool(tt.fn, carmy.Write, carmy.Name("p"), carmy.Register(false))))
			_, err := r.Execute(context.Background(), carmy.Call{Tool: "p"})
			e := rtError(t, err, carmy.CodeInternal)
			if !e.Retryable || strings.Contains(e.Message, "secret-panic-text") || strings.Contains(e.Message, "goroutine") {
				t.Errorf("error = %+v", e)
			}
		})
	}
}

func TestExecuteGoexit(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (int, error) {
		runtime.Goexit()
		return 0, nil
	}, carmy.Write, carmy.Name("goexit"), carmy.Timeout(30*time.Second), carmy.Register(false))))
	for i := range 2 { // the second call shows that the turn was released
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_, err := r.Execute(ctx, carmy.Call{Tool: "goexit"})
			done <- err
		}()
		select {
		case err := <-done:
			cancel()
			rtError(t, err, carmy.CodeInternal)
		case <-time.After(time.Second):
			cancel()
			<-done
			t.Fatalf("call %d: no answer within 1s of a tool that exited its goroutine", i+1)
		}
	}
}

type rtRuledOut struct {
	N int `json:"n" validate:"max=5"`
}

func TestExecuteOutputThatCannotBeEncoded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		def  *carmy.ToolDef
	}{
		{"rule violated", carmy.Tool(func() (rtRuledOut, error) { return rtRuledOut{N: 10}, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false))},
		{"NaN", carmy.Tool(func() (float64, error) { return math.NaN(), nil }, carmy.Read, carmy.Name("o"), carmy.Register(false))},
		{"infinity", carmy.Tool(func() (float64, error) { return math.Inf(1), nil }, carmy.Read, carmy.Name("o"), carmy.Register(false))},
		{"invalid UTF-8", carmy.Tool(func() (string, error) { return "secret\xff", nil }, carmy.Read, carmy.Name("o"), carmy.Register(false))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rtRegistry(t, carmy.New().Tool(tt.def))
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "o"})
			e := rtError(t, err, carmy.CodeInternal)
			if e.Err == nil {
				t.Errorf("Err is nil; the cause must be kept for the logs")
			}
			if res.Output != nil {
				t.Errorf("output %s alongside an error", res.Output)
			}
		})
	}
}

type rtSecretError struct{ secret string }

func (e *rtSecretError) Error() string { return "db password " + e.secret + " rejected" }

func TestExecuteToolErrors(t *testing.T) {
	t.Parallel()
	plain := errors.New("disk on fire at /var/lib/orders")
	typed := &rtSecretError{secret: "hunter2"}
	notFound := carmy.Errorf(carmy.CodeNotFound, "order %d does not exist", 7)
	withDetails := &carmy.Error{Code: carmy.CodeConflict, Message: "order 7 is cancelled", Details: map[string]any{"order_id": 7}}
	unavailable := carmy.Errorf(carmy.CodeUnavailable, "payments are down")
	notRetryable := &carmy.Error{Code: carmy.CodeInternal, Message: "broken for good", Retryable: false}
	tests := []struct {
		name      string
		err       error
		code      carmy.Code
		message   string // exact, when not ""
		hidden    string // must not be in the message
		retryable bool
		is        error // errors.Is target
	}{
		{"plain error", plain, carmy.CodeInternal, "", "disk on fire", true, plain},
		{"typed error", typed, carmy.CodeInternal, "", "hunter2", true, typed},
		{"wrapped plain error", fmt.Errorf("saving: %w", plain), carmy.CodeInternal, "", "disk on fire", true, plain},
		{"carmy error", notFound, carmy.CodeNotFound, "order 7 does not exist", "", false, nil},
		{"carmy error with details", withDetails, carmy.CodeConflict, "order 7 is cancelled", "", false, nil},
		{"retryable carmy error", unavailable, carmy.CodeUnavailable, "payments are down", "", true, nil},
		{"carmy internal kept as is", notRetryable, carmy.CodeInternal, "broken for good", "", false, nil},
		{"wrapped carmy error", fmt.Errorf("outer: %w", notFound), carmy.CodeNotFound, "order 7 does not exist", "", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) { return "ignored", tt.err }, carmy.Write, carmy.Name("failing"), carmy.Register(false))))
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "failing"})
			e := rtError(t, err, tt.code)
			if tt.message != "" && e.Message != tt.message {
				t.Errorf("Message = %q, want %q", e.Message, tt.message)
			}
			if tt.hidden != "" && (strings.Contains(e.Message, tt.hidden) || strings.Contains(e.Error(), tt.hidden)) {
				t.Errorf("the cause reached the caller: %q", e.Message)
			}
			if tt.hidden != "" && !strings.Contains(e.Message, "failing") {
				t.Errorf("generic Message %q does not name the tool", e.Message)
			}
			if e.Retryable != tt.retryable {
				t.Errorf("Retryable = %v, want %v", e.Retryable, tt.retryable)
			}
			if tt.is != nil && !errors.Is(e.Err, tt.is) {
				t.Errorf("Err = %v, want the cause kept for the logs", e.Err)
			}
			if tt.err == withDetails && e.Details["order_id"] != 7 {
				t.Errorf("Details = %v, want the tool's", e.Details)
			}
			if res.Output != nil {
				t.Errorf("output %s alongside an error", res.Output)
			}
		})
	}
}

type rtListOut struct {
	Items []string       `json:"items"`
	Tags  map[string]int `json:"tags"`
	Ptr   *int           `json:"ptr"`
}

func TestExecuteOutputs(t *testing.T) {
	t.Parallel()
	hello := "hello"
	tests := []struct {
		name string
		def  *carmy.ToolDef
		want string
	}{
		{"nil slice is []", carmy.Tool(func() ([]string, error) { return nil, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `[]`},
		{"empty slice is []", carmy.Tool(func() ([]int, error) { return []int{}, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `[]`},
		{"nil slice and map in a struct", carmy.Tool(func() (rtListOut, error) { return rtListOut{}, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `{"items":[],"tags":{},"ptr":null}`},
		{"nil map is {}", carmy.Tool(func() (map[string]bool, error) { return nil, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `{}`},
		{"nil pointer is null", carmy.Tool(func() (*string, error) { return nil, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `null`},
		{"pointer", carmy.Tool(func() (*string, error) { return &hello, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `"hello"`},
		{"error only", carmy.Tool(func(context.Context) error { return nil }, carmy.Write, carmy.Name("o"), carmy.Register(false)), `null`},
		{"nil slice of structs in a pointer", carmy.Tool(func() (*rtListOut, error) { return &rtListOut{}, nil }, carmy.Read, carmy.Name("o"), carmy.Register(false)), `{"items":[],"tags":{},"ptr":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rtRegistry(t, carmy.New().Tool(tt.def))
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "o"})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if string(res.Output) != tt.want {
				t.Errorf("output = %s, want %s", res.Output, tt.want)
			}
		})
	}
}

func TestExecuteTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout func(*carmy.Builder, *[]carmy.Option) // sets a 50ms deadline somewhere
	}{
		{"tool option", func(b *carmy.Builder, opts *[]carmy.Option) {
			*opts = append(*opts, carmy.Timeout(50*time.Millisecond))
		}},
		{"builder default", func(b *carmy.Builder, opts *[]carmy.Option) { b.Timeout(50 * time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release, returned := make(chan struct{}), make(chan struct{})
			ignoresContext := func(ctx context.Context) (string, error) {
				defer close(returned)
				<-release
				return "late", nil
			}
			b := carmy.New()
			opts := []carmy.Option{carmy.Name("slow"), carmy.Register(false)}
			tt.timeout(b, &opts)
			r := rtRegistry(t, b.Tool(carmy.Tool(ignoresContext, carmy.Read, opts...)))
			defer rtWait(t, returned, "the tool to return")
			defer close(release)

			start := time.Now()
			_, err := r.Execute(context.Background(), carmy.Call{Tool: "slow"})
			elapsed := time.Since(start)
			e := rtError(t, err, carmy.CodeTimeout)
			if elapsed > time.Second {
				t.Errorf("Execute took %v; the caller gets its answer at the 50ms deadline", elapsed)
			}
			if !e.Retryable {
				t.Errorf("timeout is not Retryable")
			}
		})
	}

	t.Run("tool that honours its context", func(t *testing.T) {
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, carmy.Read, carmy.Name("honest"), carmy.Timeout(30*time.Millisecond), carmy.Register(false))))
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "honest"})
		rtError(t, err, carmy.CodeTimeout)
	})

	t.Run("a context derived from the tool's ends at the deadline", func(t *testing.T) {
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) {
			child, cancel := context.WithCancel(ctx)
			defer cancel()
			<-child.Done()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
				return "", fmt.Errorf("ctx.Err() = %v, context.Cause(child) = %v; want the deadline", ctx.Err(), context.Cause(child))
			}
			return "", child.Err()
		}, carmy.Read, carmy.Name("derived"), carmy.Timeout(30*time.Millisecond), carmy.Register(false))))
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "derived"})
		rtError(t, err, carmy.CodeTimeout)
	})

	t.Run("deadline is visible to the tool", func(t *testing.T) {
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (bool, error) {
			d, ok := ctx.Deadline()
			return ok && time.Until(d) <= 5*time.Second, nil
		}, carmy.Read, carmy.Name("deadline"), carmy.Timeout(5*time.Second), carmy.Register(false))))
		res, err := r.Execute(context.Background(), carmy.Call{Tool: "deadline"})
		if err != nil || string(res.Output) != "true" {
			t.Errorf("Execute = %s, %v; want the tool's context to carry its deadline", res.Output, err)
		}
	})
}

func TestExecuteCallerCancellation(t *testing.T) {
	t.Parallel()
	t.Run("during execution, tool ignores its context", func(t *testing.T) {
		started, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) {
			defer close(returned)
			close(started)
			<-release
			return "late", nil
		}, carmy.Write, carmy.Name("stuck"), carmy.Register(false))))
		defer rtWait(t, returned, "the tool to return")
		defer close(release)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		start := time.Now()
		_, err := r.Execute(ctx, carmy.Call{Tool: "stuck"})
		e := rtError(t, err, carmy.CodeCancelled)
		if time.Since(start) > time.Second {
			t.Errorf("Execute returned %v after the cancellation", time.Since(start))
		}
		if !e.Retryable {
			t.Errorf("cancelled is not Retryable")
		}
	})

	t.Run("during execution, tool honours its context", func(t *testing.T) {
		started := make(chan struct{})
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) {
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		}, carmy.Write, carmy.Name("polite"), carmy.Register(false))))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		_, err := r.Execute(ctx, carmy.Call{Tool: "polite"})
		rtError(t, err, carmy.CodeCancelled)
	})

	t.Run("before the call", func(t *testing.T) {
		ran := make(chan struct{}, 1)
		r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) (string, error) {
			ran <- struct{}{}
			return "ran", nil
		}, carmy.Write, carmy.Name("never"), carmy.Register(false))))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.Execute(ctx, carmy.Call{Tool: "never"})
		rtError(t, err, carmy.CodeCancelled)
		select {
		case <-ran:
			t.Errorf("the tool ran for a call cancelled beforehand")
		default:
		}
	})
}

type rtCallInfo struct {
	ExecutionID string            `json:"execution_id"`
	RequestID   string            `json:"request_id"`
	Principal   string            `json:"principal"`
	Session     string            `json:"session"`
	Permissions []string          `json:"permissions"`
	Metadata    map[string]string `json:"metadata"`
	Text        string            `json:"text"`
}

type rtTextIn struct {
	Text string `json:"text,omitempty"`
}

func rtInfo(ctx carmy.Context, in rtTextIn) (rtCallInfo, error) {
	return rtCallInfo{
		ExecutionID: ctx.ExecutionID, RequestID: ctx.RequestID, Principal: ctx.Principal, Session: ctx.Session,
		Permissions: ctx.Permissions.List(), Metadata: ctx.Metadata, Text: in.Text,
	}, nil
}

func TestInvoke(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(
		carmy.Tool(rtInfo, carmy.Read, carmy.Name("info"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(in rtTextIn) (rtTextIn, error) { return in, nil }, carmy.None, carmy.Name("echo_text"), carmy.Register(false)),
		carmy.Tool(func() ([]int, error) { return nil, nil }, carmy.None, carmy.Name("none"), carmy.Register(false)),
	))
	ctx := context.Background()

	t.Run("call options", func(t *testing.T) {
		got, err := carmy.Invoke[rtCallInfo](ctx, r, "info", rtTextIn{Text: "hi"},
			carmy.WithPrincipal("alice"), carmy.WithSession("sess-1"),
			carmy.WithPermissions("write:orders", "confirm:x"), carmy.WithPermissions("read:orders"),
			carmy.WithRequestID("req-1"), carmy.WithMetadata("trace", "t-9"), carmy.WithMetadata("client", "cli"))
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		want := rtCallInfo{ExecutionID: got.ExecutionID, RequestID: "req-1", Principal: "alice", Session: "sess-1",
			Permissions: []string{"confirm:x", "read:orders", "write:orders"}, Metadata: map[string]string{"trace": "t-9", "client": "cli"}, Text: "hi"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Invoke = %+v\nwant     %+v", got, want)
		}
		if u, err := uuid.Parse(got.ExecutionID); err != nil || u.Version() != 7 {
			t.Errorf("execution id %q is not a UUIDv7", got.ExecutionID)
		}
	})

	t.Run("no options", func(t *testing.T) {
		got, err := carmy.Invoke[rtCallInfo](ctx, r, "info", nil)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		if got.Principal != "" || got.Session != "" || got.RequestID != "" || len(got.Permissions) != 0 || len(got.Metadata) != 0 {
			t.Errorf("Invoke without options = %+v, want empty call data", got)
		}
	})

	inputs := []struct {
		name  string
		input any
		want  string
	}{
		{"struct", rtTextIn{Text: "a"}, "a"},
		{"pointer to struct", &rtTextIn{Text: "b"}, "b"},
		{"map", map[string]any{"text": "c"}, "c"},
		{"raw message", json.RawMessage(`{"text":"d"}`), "d"},
		{"bytes", []byte(`{"text":"e"}`), "e"},
		{"nil", nil, ""},
	}
	for _, in := range inputs {
		t.Run("input "+in.name, func(t *testing.T) {
			got, err := carmy.Invoke[rtTextIn](ctx, r, "echo_text", in.input)
			if err != nil || got.Text != in.want {
				t.Errorf("Invoke = %+v, %v; want text %q", got, err, in.want)
			}
		})
	}

	t.Run("raw output", func(t *testing.T) {
		got, err := carmy.Invoke[json.RawMessage](ctx, r, "echo_text", rtTextIn{Text: "raw"})
		if err != nil || string(got) != `{"text":"raw"}` {
			t.Errorf("Invoke[json.RawMessage] = %s, %v", got, err)
		}
		got, err = carmy.Invoke[json.RawMessage](ctx, r, "none", nil)
		if err != nil || string(got) != `[]` {
			t.Errorf("Invoke[json.RawMessage] = %s, %v; want []", got, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := carmy.Invoke[rtTextIn](ctx, r, "echo_txt", nil)
		rtError(t, err, carmy.CodeUnknownTool)
		_, err = carmy.Invoke[rtTextIn](ctx, r, "echo_text", map[string]any{"txt": "x"})
		e := rtError(t, err, carmy.CodeInvalidInput)
		if len(e.Fields) != 1 || e.Fields[0].Path != "txt" {
			t.Errorf("fields = %+v", e.Fields)
		}
		_, err = carmy.Invoke[rtTextIn](ctx, r, "echo_text", make(chan int))
		rtError(t, err, carmy.CodeInvalidInput)
		_, err = carmy.Invoke[int](ctx, r, "echo_text", nil)
		if err == nil {
			t.Errorf("Invoke[int] of an object output succeeded")
		} else if _, ok := errors.AsType[*carmy.Error](err); !ok {
			t.Errorf("Invoke error %v is not a *carmy.Error", err)
		}
	})
}

func TestImpl(t *testing.T) {
	t.Parallel()
	given := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)
	r := rtRegistry(t, carmy.New().Tool(
		carmy.Impl(rtImplHandler{carmy.ToolMetadata{Name: "impl_default", Description: "Upper-cases", Effect: carmy.None, Idempotent: true}}),
		carmy.Impl(rtImplHandler{carmy.ToolMetadata{Name: "impl_given", Effect: carmy.Read, InputSchema: given}}),
		carmy.Impl(rtImplPtrHandler{}),
	))

	t.Run("schemas default to SchemaFor", func(t *testing.T) {
		m, ok := r.Lookup("impl_default")
		if !ok {
			t.Fatal("impl_default is missing")
		}
		if !bytes.Equal(m.InputSchema, carmy.SchemaFor[rtImplIn]()) {
			t.Errorf("input schema %s, want SchemaFor[rtImplIn] %s", m.InputSchema, carmy.SchemaFor[rtImplIn]())
		}
		if !bytes.Equal(m.OutputSchema, carmy.SchemaFor[rtImplOut]()) {
			t.Errorf("output schema %s, want SchemaFor[rtImplOut] %s", m.OutputSchema, carmy.SchemaFor[rtImplOut]())
		}
		if m.Description != "Upper-cases" || m.Effect != carmy.None || !m.Idempotent || m.Timeout != carmy.DefaultTimeout {
			t.Errorf("metadata = %+v", m)
		}
	})

	t.Run("given schema kept", func(t *testing.T) {
		m, _ := r.Lookup("impl_given")
		if !bytes.Equal(m.InputSchema, given) {
			t.Errorf("input schema %s, want the handler's %s", m.InputSchema, given)
		}
		if !bytes.Equal(m.OutputSchema, carmy.SchemaFor[rtImplOut]()) {
			t.Errorf("output schema %s, want SchemaFor[rtImplOut]", m.OutputSchema)
		}
	})

	t.Run("execute", func(t *testing.T) {
		got, err := carmy.Invoke[rtImplOut](context.Background(), r, "impl_default", rtImplIn{Text: "abc"})
		if err != nil || got.Upper != "ABC" {
			t.Fatalf("Invoke = %+v, %v", got, err)
		}
		if u, err := uuid.Parse(got.ExecID); err != nil || u.Version() != 7 {
			t.Errorf("execution id %q is not a UUIDv7", got.ExecID)
		}
	})

	t.Run("strict decoding", func(t *testing.T) {
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "impl_default", Input: json.RawMessage(`{"Text":"abc"}`)})
		e := rtError(t, err, carmy.CodeInvalidInput)
		if len(e.Fields) != 1 || e.Fields[0].Path != "Text" {
			t.Errorf("fields = %+v, want Text unknown", e.Fields)
		}
	})

	t.Run("plain error", func(t *testing.T) {
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "impl_default", Input: json.RawMessage(`{"text":"fail"}`)})
		e := rtError(t, err, carmy.CodeInternal)
		if strings.Contains(e.Message, "impl-secret-cause") {
			t.Errorf("Message %q carries the cause", e.Message)
		}
	})

	t.Run("panic", func(t *testing.T) {
		_, err := r.Execute(context.Background(), carmy.Call{Tool: "impl_default", Input: json.RawMessage(`{"text":"panic"}`)})
		e := rtError(t, err, carmy.CodeInternal)
		if strings.Contains(e.Message, "impl-secret-panic") {
			t.Errorf("Message %q carries the panic", e.Message)
		}
	})

	t.Run("pointer input and output", func(t *testing.T) {
		for input, want := range map[string]string{`{"text":"x"}`: `"x"`, `{"text":""}`: `null`} {
			res, err := r.Execute(context.Background(), carmy.Call{Tool: "impl_ptr", Input: json.RawMessage(input)})
			if err != nil || string(res.Output) != want {
				t.Errorf("Execute(%s) = %s, %v; want %s", input, res.Output, err, want)
			}
		}
	})

	t.Run("not registered automatically", func(t *testing.T) {
		r, err := carmy.App().Build()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, ok := r.Lookup("impl_default"); ok {
			t.Errorf("App() holds a tool declared with Impl")
		}
	})
}
