package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy"
)

// btHere returns "build_test.go:<line>" of its caller; called in the same
// statement as carmy.Tool, on the same line, it names the tool's site.
func btHere() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

type btIn struct {
	A string `json:"a"`
}

type btIn2 struct {
	B string `json:"b"`
}

type btOut struct {
	B string `json:"b"`
}

type btChanIn struct {
	C chan int `json:"c"`
}

type btFuncOut struct {
	F func() `json:"f"`
}

type btComplexIn struct {
	Z complex128 `json:"z"`
}

type btNestedComplexOut struct {
	Points []struct {
		Z complex64 `json:"z"`
	} `json:"points"`
}

type btReqInt struct {
	N int `json:"n" validate:"required"`
}

type btReqBool struct {
	B bool `json:"b" validate:"required"`
}

type btReqFloat struct {
	F float64 `json:"f" validate:"required"`
}

type btReqPtrInt struct {
	N *int `json:"n" validate:"required"`
}

type btReqPtrBool struct {
	B *bool `json:"b" validate:"required"`
}

type btCustomJSON struct{ X int }

func (btCustomJSON) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

type btMarshalerIn struct {
	V btCustomJSON `json:"v"`
}

type btIntMapIn struct {
	M map[int]string `json:"m"`
}

type btStringOpt struct {
	N int `json:"n,string"`
}

type btDB struct{ name string }

type btGreeter interface{ Greet() string }

type btEnglish struct{}

func (btEnglish) Greet() string { return "hello" }

type btFrench struct{}

func (btFrench) Greet() string { return "bonjour" }

type btStringHandler struct{}

func (btStringHandler) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "string_input", Effect: carmy.Read}
}
func (btStringHandler) Execute(ctx carmy.Context, in string) (string, error) { return in, nil }

type btNoNameHandler struct{}

func (btNoNameHandler) Metadata() carmy.ToolMetadata               { return carmy.ToolMetadata{Effect: carmy.Read} }
func (btNoNameHandler) Execute(carmy.Context, btIn) (btOut, error) { return btOut{}, nil }

type btNoEffectHandler struct{}

func (btNoEffectHandler) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "impl_no_effect"}
}
func (btNoEffectHandler) Execute(carmy.Context, btIn) (btOut, error) { return btOut{}, nil }

func btOK(btIn) (btOut, error) { return btOut{}, nil }

// btBuildErrors returns the *BuildError values of a Build error.
func btBuildErrors(t *testing.T, err error) []*carmy.BuildError {
	t.Helper()
	if err == nil {
		t.Fatal("Build succeeded; want an error")
	}
	var all []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	} else {
		all = []error{err}
	}
	var out []*carmy.BuildError
	for _, e := range all {
		var be *carmy.BuildError
		if !errors.As(e, &be) {
			t.Fatalf("problem %v (%T) is not a *carmy.BuildError", e, e)
		}
		out = append(out, be)
	}
	return out
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	longName := strings.Repeat("a", 129)
	tests := []struct {
		name  string
		mk    func() (*carmy.ToolDef, string) // the tool and the site of its carmy.Tool call
		state []any
		tool  string   // BuildError.Tool
		want  []string // substrings of the message
	}{
		{"nil function",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(nil, carmy.Read, carmy.Name("nil_fn"), carmy.Register(false)), btHere()
			},
			nil, "nil_fn", []string{"nil function"}},
		{"typed nil function",
			func() (*carmy.ToolDef, string) {
				var fn func() error
				return carmy.Tool(fn, carmy.Read, carmy.Name("typed_nil"), carmy.Register(false)), btHere()
			},
			nil, "typed_nil", []string{"nil function"}},
		{"not a function",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(42, carmy.Read, carmy.Name("not_fn"), carmy.Register(false)), btHere()
			},
			nil, "not_fn", []string{"int", "not a function"}},
		{"variadic",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(xs ...string) error { return nil }, carmy.Read, carmy.Name("variadic"), carmy.Register(false)), btHere()
			},
			nil, "variadic", []string{"variadic", "slice field"}},
		{"two contexts",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(context.Context, carmy.Context) error { return nil }, carmy.Read, carmy.Name("two_ctx"), carmy.Register(false)), btHere()
			},
			nil, "two_ctx", []string{"two contexts", "keep one"}},
		{"two plain contexts",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(context.Context, context.Context) error { return nil }, carmy.Read, carmy.Name("two_ctx2"), carmy.Register(false)), btHere()
			},
			nil, "two_ctx2", []string{"two contexts"}},
		{"pointer to carmy.Context",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(*carmy.Context) error { return nil }, carmy.Read, carmy.Name("ptr_ctx"), carmy.Register(false)), btHere()
			},
			nil, "ptr_ctx", []string{"*carmy.Context", "by value"}},
		{"two inputs",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btIn, *btIn2) error { return nil }, carmy.Read, carmy.Name("two_in"), carmy.Register(false)), btHere()
			},
			nil, "two_in", []string{"takes at most one input; combine the fields into one struct"}},
		{"non-struct parameter",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(s string) error { return nil }, carmy.Read, carmy.Name("str_param"), carmy.Register(false)), btHere()
			},
			nil, "str_param", []string{"parameter 1", "string", "struct field"}},
		{"pointer to non-struct parameter",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(context.Context, *int) error { return nil }, carmy.Read, carmy.Name("int_ptr"), carmy.Register(false)), btHere()
			},
			nil, "int_ptr", []string{"parameter 2", "*int"}},
		{"no results",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() {}, carmy.Read, carmy.Name("no_results"), carmy.Register(false)), btHere()
			},
			nil, "no_results", []string{"0 results", "(Out, error) or error"}},
		{"value without error",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() string { return "" }, carmy.Read, carmy.Name("no_err"), carmy.Register(false)), btHere()
			},
			nil, "no_err", []string{"string alone", "(string, error)"}},
		{"second result not error",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (int, string) { return 0, "" }, carmy.Read, carmy.Name("bad_second"), carmy.Register(false)), btHere()
			},
			nil, "bad_second", []string{"second result must be error"}},
		{"three results",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (int, int, error) { return 0, 0, nil }, carmy.Read, carmy.Name("three"), carmy.Register(false)), btHere()
			},
			nil, "three", []string{"3 results"}},
		{"channel in input",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btChanIn) error { return nil }, carmy.Read, carmy.Name("chan_in"), carmy.Register(false)), btHere()
			},
			nil, "chan_in", []string{"input", "chan int", "channel"}},
		{"channel output",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (chan int, error) { return nil, nil }, carmy.Read, carmy.Name("chan_out"), carmy.Register(false)), btHere()
			},
			nil, "chan_out", []string{"output", "channel"}},
		{"func in output",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (btFuncOut, error) { return btFuncOut{}, nil }, carmy.Read, carmy.Name("func_out"), carmy.Register(false)), btHere()
			},
			nil, "func_out", []string{"output", "func"}},
		{"complex in input",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btComplexIn) error { return nil }, carmy.Read, carmy.Name("complex_in"), carmy.Register(false)), btHere()
			},
			nil, "complex_in", []string{"complex", "two float64 fields"}},
		{"complex nested in output",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (btNestedComplexOut, error) { return btNestedComplexOut{}, nil }, carmy.Read, carmy.Name("complex_out"), carmy.Register(false)), btHere()
			},
			nil, "complex_out", []string{"output", "Points", "complex"}},
		{"state nobody provided",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(carmy.State[*btDB]) error { return nil }, carmy.Read, carmy.Name("no_state"), carmy.Register(false)), btHere()
			},
			nil, "no_state", []string{"carmy.State[*carmy_test.btDB]", "Builder.State"}},
		{"state of another type",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(carmy.State[*btDB]) error { return nil }, carmy.Read, carmy.Name("wrong_state"), carmy.Register(false)), btHere()
			},
			[]any{btDB{}}, "wrong_state", []string{"carmy.State[*carmy_test.btDB]", "Builder.State"}},
		{"interface state with two candidates",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(carmy.State[btGreeter]) error { return nil }, carmy.Read, carmy.Name("two_greeters"), carmy.Register(false)), btHere()
			},
			[]any{btEnglish{}, btFrench{}}, "two_greeters", []string{"carmy.State[carmy_test.btGreeter]", "btEnglish", "btFrench", "exactly one"}},
		{"unset effect",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, 0, carmy.Name("no_effect"), carmy.Register(false)), btHere()
			},
			nil, "no_effect", []string{"no effect", "carmy.None"}},
		{"unknown effect",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, 42, carmy.Name("bad_effect"), carmy.Register(false)), btHere()
			},
			nil, "bad_effect", []string{"effect"}},
		{"empty name",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name(""), carmy.Register(false)), btHere()
			},
			nil, "", []string{"invalid name", `""`}},
		{"129-character name",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name(longName), carmy.Register(false)), btHere()
			},
			nil, longName, []string{"invalid name", "1 to 128"}},
		{"name with spaces",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("create order"), carmy.Register(false)), btHere()
			},
			nil, "create order", []string{"invalid name"}},
		{"unicode name",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("créer"), carmy.Register(false)), btHere()
			},
			nil, "créer", []string{"invalid name", "ASCII"}},
		{"name with slash",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("orders/create"), carmy.Register(false)), btHere()
			},
			nil, "orders/create", []string{"invalid name"}},
		{"conflicting names",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("first"), carmy.Name("second"), carmy.Register(false)), btHere()
			},
			nil, "first", []string{"Name", "twice", "first", "second"}},
		{"conflicting descriptions",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("descs"), carmy.Description("a"), carmy.Description("b"), carmy.Register(false)), btHere()
			},
			nil, "descs", []string{"Description", "twice"}},
		{"conflicting timeouts",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("timeouts"), carmy.Timeout(1e9), carmy.Timeout(2e9), carmy.Register(false)), btHere()
			},
			nil, "timeouts", []string{"Timeout", "twice", "1s", "2s"}},
		{"zero timeout",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(btOK, carmy.Read, carmy.Name("zero_timeout"), carmy.Timeout(0), carmy.Register(false)), btHere()
			},
			nil, "zero_timeout", []string{"Timeout", "positive"}},
		{"closure without Name",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btIn) (btOut, error) { return btOut{}, nil }, carmy.Read, carmy.Register(false)), btHere()
			},
			nil, "", []string{"closure", "carmy.Name"}},
		{"required on int",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btReqInt) error { return nil }, carmy.Read, carmy.Name("req_int"), carmy.Register(false)), btHere()
			},
			nil, "req_int", []string{"required", "min=1", "pointer"}},
		{"required on bool",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btReqBool) error { return nil }, carmy.Read, carmy.Name("req_bool"), carmy.Register(false)), btHere()
			},
			nil, "req_bool", []string{"required", "false", "pointer"}},
		{"required on float",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btReqFloat) error { return nil }, carmy.Read, carmy.Name("req_float"), carmy.Register(false)), btHere()
			},
			nil, "req_float", []string{"required", "pointer"}},
		{"custom MarshalJSON",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btMarshalerIn) error { return nil }, carmy.Read, carmy.Name("custom_json"), carmy.Register(false)), btHere()
			},
			nil, "custom_json", []string{"btCustomJSON", "own JSON encoding"}},
		{"custom MarshalJSON output",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func() (btCustomJSON, error) { return btCustomJSON{}, nil }, carmy.Read, carmy.Name("custom_json_out"), carmy.Register(false)), btHere()
			},
			nil, "custom_json_out", []string{"output", "own JSON encoding"}},
		{"map with int keys",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btIntMapIn) error { return nil }, carmy.Read, carmy.Name("int_keys"), carmy.Register(false)), btHere()
			},
			nil, "int_keys", []string{"map[int]string", "map[string]string"}},
		{"json string option",
			func() (*carmy.ToolDef, string) {
				return carmy.Tool(func(btStringOpt) error { return nil }, carmy.Read, carmy.Name("string_opt"), carmy.Register(false)), btHere()
			},
			nil, "string_opt", []string{",string"}},
		{"impl with a non-struct input",
			func() (*carmy.ToolDef, string) { return carmy.Impl[string, string](btStringHandler{}), btHere() },
			nil, "string_input", []string{"input", "struct"}},
		{"impl with a nil handler",
			func() (*carmy.ToolDef, string) { return carmy.Impl[btIn, btOut](nil), btHere() },
			nil, "", []string{"nil"}},
		{"impl without a name",
			func() (*carmy.ToolDef, string) { return carmy.Impl(btNoNameHandler{}), btHere() },
			nil, "", []string{"name"}},
		{"impl without an effect",
			func() (*carmy.ToolDef, string) { return carmy.Impl(btNoEffectHandler{}), btHere() },
			nil, "impl_no_effect", []string{"no effect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, site := tt.mk()
			_, err := carmy.New().Tool(def).State(tt.state...).Build()
			problems := btBuildErrors(t, err)
			var match *carmy.BuildError
			for _, be := range problems {
				if strings.HasSuffix(be.Site, "/"+site) || be.Site == site {
					match = be
					break
				}
			}
			if match == nil {
				t.Fatalf("no problem has the site %s: %v", site, err)
			}
			if !strings.HasSuffix(match.Site, "/"+site) && match.Site != site {
				t.Errorf("Site = %q, want it to end in %q", match.Site, site)
			}
			if match.Tool != tt.tool {
				t.Errorf("Tool = %q, want %q", match.Tool, tt.tool)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
			if !strings.Contains(msg, site) {
				t.Errorf("message %q does not name the site %s", msg, site)
			}
			var be *carmy.BuildError
			if !errors.As(err, &be) {
				t.Errorf("errors.As does not reach a *carmy.BuildError")
			}
		})
	}
}

func TestBuildAcceptsPointerRequired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		def  *carmy.ToolDef
	}{
		{"*int", carmy.Tool(func(btReqPtrInt) error { return nil }, carmy.Read, carmy.Name("req_ptr_int"), carmy.Register(false))},
		{"*bool", carmy.Tool(func(btReqPtrBool) error { return nil }, carmy.Read, carmy.Name("req_ptr_bool"), carmy.Register(false))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := carmy.New().Tool(tt.def).Build()
			if err != nil {
				t.Fatalf("Build: %v; validate:\"required\" on a pointer means non-nil and is fine", err)
			}
			r.Close()
		})
	}
}

func TestBuildDuplicateNames(t *testing.T) {
	t.Parallel()
	first, site1 := carmy.Tool(btOK, carmy.Read, carmy.Name("dup"), carmy.Register(false)), btHere()
	second, site2 := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("dup"), carmy.Register(false)), btHere()
	_, err := carmy.New().Tool(first, second).Build()
	problems := btBuildErrors(t, err)
	if len(problems) != 1 {
		t.Fatalf("%d problems, want 1: %v", len(problems), err)
	}
	be := problems[0]
	if be.Tool != "dup" {
		t.Errorf("Tool = %q, want dup", be.Tool)
	}
	if !strings.HasSuffix(be.Site, site1) && !strings.HasSuffix(be.Site, site2) {
		t.Errorf("Site = %q, want one of the two declarations", be.Site)
	}
	for _, site := range []string{site1, site2} {
		if !strings.Contains(err.Error(), site) {
			t.Errorf("error %q does not name the site %s", err, site)
		}
	}
	if !strings.Contains(err.Error(), "same name") {
		t.Errorf("error %q does not say what is wrong", err)
	}
}

func TestBuildDuplicateDerivedNames(t *testing.T) {
	t.Parallel()
	var n tdNamer
	_, err := carmy.New().Tool(
		carmy.Tool(n.createOrder, carmy.Write, carmy.Register(false)),
		carmy.Tool(btOK, carmy.Write, carmy.Name("create_order"), carmy.Register(false)),
	).Build()
	problems := btBuildErrors(t, err)
	if len(problems) != 1 || problems[0].Tool != "create_order" {
		t.Fatalf("problems = %v, want one duplicate create_order", err)
	}
}

func TestBuildReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	noEffect, site1 := carmy.Tool(btOK, 0, carmy.Name("p_no_effect"), carmy.Register(false)), btHere()
	twoIn, site2 := carmy.Tool(func(btIn, btIn2) error { return nil }, carmy.Read, carmy.Name("p_two_in"), carmy.Register(false)), btHere()
	badName, site3 := carmy.Tool(btOK, carmy.Read, carmy.Name("bad name"), carmy.Register(false)), btHere()
	noState, site4 := carmy.Tool(func(carmy.State[*btDB]) error { return nil }, carmy.Read, carmy.Name("p_no_state"), carmy.Register(false)), btHere()
	good := carmy.Tool(btOK, carmy.Read, carmy.Name("p_good"), carmy.Register(false))

	_, err := carmy.New().Tool(noEffect, good, twoIn, badName, noState).Build()
	problems := btBuildErrors(t, err)
	want := map[string]string{"p_no_effect": site1, "p_two_in": site2, "bad name": site3, "p_no_state": site4}
	got := map[string]string{}
	for _, be := range problems {
		got[be.Tool] = be.Site
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(problems), len(want), err)
	}
	for tool, site := range want {
		if !strings.HasSuffix(got[tool], site) {
			t.Errorf("problem of %q has site %q, want it to end in %q", tool, got[tool], site)
		}
	}
	if _, ok := got["p_good"]; ok {
		t.Errorf("the good tool is reported as a problem")
	}

	t.Run("one tool with several problems", func(t *testing.T) {
		def := carmy.Tool(func(btIn, btIn2) error { return nil }, 0, carmy.Name("two problems"), carmy.Register(false))
		_, err := carmy.New().Tool(def).Build()
		problems := btBuildErrors(t, err)
		msg := err.Error()
		for _, w := range []string{"takes at most one input", "invalid name", "no effect"} {
			if !strings.Contains(msg, w) {
				t.Errorf("error %q lacks %q", msg, w)
			}
		}
		if len(problems) < 3 {
			t.Errorf("%d problems, want at least 3", len(problems))
		}
	})
}

func TestBuildBuilderMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mk   func() (*carmy.Builder, string)
		want string
	}{
		{"nil tool", func() (*carmy.Builder, string) { return carmy.New().Tool(nil), btHere() }, "nil *ToolDef"},
		{"nil state", func() (*carmy.Builder, string) { return carmy.New().State(nil), btHere() }, "nil"},
		{"zero builder timeout", func() (*carmy.Builder, string) { return carmy.New().Timeout(0), btHere() }, "positive"},
		{"nil middleware", func() (*carmy.Builder, string) { return carmy.New().Use(nil), btHere() }, "nil Middleware"},
		{"zero idempotency TTL", func() (*carmy.Builder, string) { return carmy.New().IdempotencyTTL(0), btHere() }, "IdempotencyTTL(0s) must be positive"},
		{"zero idempotency limit", func() (*carmy.Builder, string) { return carmy.New().IdempotencyLimit(0), btHere() }, "IdempotencyLimit(0) must be positive"},
		{"zero body limit", func() (*carmy.Builder, string) { return carmy.New().BodyLimit(0), btHere() }, "BodyLimit(0) must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, site := tt.mk()
			_, err := b.Build()
			problems := btBuildErrors(t, err)
			if len(problems) != 1 {
				t.Fatalf("%d problems, want 1: %v", len(problems), err)
			}
			if !strings.HasSuffix(problems[0].Site, site) {
				t.Errorf("Site = %q, want it to end in %q", problems[0].Site, site)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestBuildEmpty(t *testing.T) {
	t.Parallel()
	r, err := carmy.New().Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer r.Close()
	if n := len(r.Tools()); n != 0 {
		t.Errorf("%d tools, want 0", n)
	}
}

// Registry.

type btStore struct{ orders []string }

type btWhoIn struct{}

func TestRegistryToolsSortedWithSchemas(t *testing.T) {
	t.Parallel()
	r, err := carmy.New().Tool(
		carmy.Tool(btOK, carmy.Read, carmy.Name("zeta"), carmy.Register(false)),
		carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("alpha"), carmy.Register(false)),
		carmy.Tool(func(context.Context) ([]string, error) { return nil, nil }, carmy.None, carmy.Name("mid.dle"), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer r.Close()
	tools := r.Tools()
	var names []string
	for _, m := range tools {
		names = append(names, m.Name)
	}
	if want := []string{"alpha", "mid.dle", "zeta"}; !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	type schema struct {
		Type                 any             `json:"type"`
		Properties           map[string]any  `json:"properties"`
		Required             []string        `json:"required"`
		AdditionalProperties *bool           `json:"additionalProperties"`
		Items                json.RawMessage `json:"items"`
	}
	for _, m := range tools {
		var in schema
		if err := json.Unmarshal(m.InputSchema, &in); err != nil {
			t.Fatalf("%s: input schema %s: %v", m.Name, m.InputSchema, err)
		}
		if in.Type != "object" || in.AdditionalProperties == nil || *in.AdditionalProperties {
			t.Errorf("%s: input schema %s is not a closed object", m.Name, m.InputSchema)
		}
		if !json.Valid(m.OutputSchema) {
			t.Errorf("%s: output schema %s is not JSON", m.Name, m.OutputSchema)
		}
	}
	// zeta: btIn → btOut.
	var in schema
	_ = json.Unmarshal(tools[2].InputSchema, &in)
	if _, ok := in.Properties["a"]; !ok || !slices.Equal(in.Required, []string{"a"}) {
		t.Errorf("zeta input schema %s: want property a, required", tools[2].InputSchema)
	}
	// alpha: error alone → null.
	if got := string(tools[0].OutputSchema); strings.ReplaceAll(got, " ", "") != `{"type":"null"}` {
		t.Errorf("alpha output schema = %s, want {\"type\":\"null\"}", got)
	}
	// mid.dle: no input → {} accepted; []string output → array.
	var out schema
	_ = json.Unmarshal(tools[1].OutputSchema, &out)
	if out.Type != "array" {
		t.Errorf("mid.dle output schema %s, want an array", tools[1].OutputSchema)
	}

	t.Run("copies", func(t *testing.T) {
		first := r.Tools()
		first[2].InputSchema[0] = 'X'
		first[2].Name = "changed"
		if again := r.Tools(); again[2].InputSchema[0] != '{' || again[2].Name != "zeta" {
			t.Errorf("changing what Tools returned changed the registry")
		}
		m, _ := r.Lookup("zeta")
		m.InputSchema[0] = 'X'
		if again, _ := r.Lookup("zeta"); again.InputSchema[0] != '{' {
			t.Errorf("changing what Lookup returned changed the registry")
		}
	})
}

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	def := carmy.Tool(btOK, carmy.Read, carmy.Name("lookup_me"), carmy.Description("Finds things"), carmy.Register(false))
	r, err := carmy.New().Tool(def).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer r.Close()
	tests := []struct {
		name   string
		lookup string
		ok     bool
	}{
		{"found", "lookup_me", true},
		{"case-sensitive", "Lookup_Me", false},
		{"absent", "nope", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := r.Lookup(tt.lookup)
			if ok != tt.ok {
				t.Fatalf("Lookup(%q) ok = %v, want %v", tt.lookup, ok, tt.ok)
			}
			if ok && (m.Name != "lookup_me" || m.Description != "Finds things" || m.InputSchema == nil || m.OutputSchema == nil) {
				t.Errorf("Lookup = %+v", m)
			}
			if !ok && m.Name != "" {
				t.Errorf("Lookup of an absent tool returned %+v", m)
			}
		})
	}
}

func TestRegistrySameDefTwiceCountsOnce(t *testing.T) {
	t.Parallel()
	def := carmy.Tool(btOK, carmy.Read, carmy.Name("once"), carmy.Register(false))
	r, err := carmy.New().Tool(def, def).Tool(def).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	defer r.Close()
	if n := len(r.Tools()); n != 1 {
		t.Errorf("%d tools, want 1", n)
	}
}

// Tools declared at package level: one in the automatic registry, one kept
// out of it.
func btAppVisible(context.Context) (string, error) { return "visible", nil }
func btAppHidden(context.Context) (string, error)  { return "hidden", nil }

var (
	_ = carmy.Tool(btAppVisible, carmy.Read, carmy.Name("carmy_test_app_visible"))
	_ = carmy.Tool(btAppHidden, carmy.Read, carmy.Name("carmy_test_app_hidden"), carmy.Register(false))
)

func TestAppRegistry(t *testing.T) {
	t.Parallel()
	inTest := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("carmy_test_app_in_test"), carmy.Register(false))
	_ = inTest
	r, err := carmy.App().Build()
	if err != nil {
		t.Fatalf("App().Build(): %v", err)
	}
	defer r.Close()
	tests := []struct {
		name string
		want bool
	}{
		{"carmy_test_app_visible", true},
		{"carmy_test_app_hidden", false},
		{"carmy_test_app_in_test", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := r.Lookup(tt.name); ok != tt.want {
				t.Errorf("App() has %s = %v, want %v", tt.name, ok, tt.want)
			}
		})
	}
	t.Run("New is empty", func(t *testing.T) {
		r, err := carmy.New().Build()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, ok := r.Lookup("carmy_test_app_visible"); ok {
			t.Errorf("New() holds an automatically registered tool")
		}
	})
	t.Run("App plus an explicit tool", func(t *testing.T) {
		hidden := carmy.Tool(btAppHidden, carmy.Read, carmy.Name("carmy_test_app_added"), carmy.Register(false))
		r, err := carmy.App().Tool(hidden).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, ok := r.Lookup("carmy_test_app_added"); !ok {
			t.Errorf("the explicitly added tool is missing")
		}
	})
}

func TestBuildState(t *testing.T) {
	t.Parallel()
	store := &btStore{orders: []string{"A-1"}}
	tests := []struct {
		name  string
		def   *carmy.ToolDef
		state []any
		want  string
	}{
		{"concrete pointer type",
			carmy.Tool(func(s carmy.State[*btStore]) (string, error) {
				if s.Value != store {
					return "", errors.New("not the provided store")
				}
				return s.Value.orders[0], nil
			}, carmy.Read, carmy.Name("by_pointer"), carmy.Register(false)),
			[]any{store, btEnglish{}}, `"A-1"`},
		{"concrete value type",
			carmy.Tool(func(s carmy.State[btDB]) (string, error) { return s.Value.name, nil }, carmy.Read, carmy.Name("by_value"), carmy.Register(false)),
			[]any{btDB{name: "main"}, &btDB{name: "pointer"}}, `"main"`},
		{"interface with one implementation",
			carmy.Tool(func(g carmy.State[btGreeter]) (string, error) { return g.Value.Greet(), nil }, carmy.Read, carmy.Name("by_iface"), carmy.Register(false)),
			[]any{store, btFrench{}}, `"bonjour"`},
		{"several states in any order",
			carmy.Tool(func(g carmy.State[btGreeter], ctx context.Context, s carmy.State[*btStore], in btWhoIn) (string, error) {
				return g.Value.Greet() + " " + s.Value.orders[0], nil
			}, carmy.Read, carmy.Name("several"), carmy.Register(false)),
			[]any{btEnglish{}, store}, `"hello A-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := carmy.New().Tool(tt.def).State(tt.state...).Build()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			defer r.Close()
			name := r.Tools()[0].Name
			res, err := r.Execute(context.Background(), carmy.Call{Tool: name})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if string(res.Output) != tt.want {
				t.Errorf("output = %s, want %s", res.Output, tt.want)
			}
		})
	}
}

func TestRegistryCloseIdempotent(t *testing.T) {
	t.Parallel()
	r, err := carmy.New().Tool(carmy.Tool(btOK, carmy.Read, carmy.Name("closing"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for i := range 3 {
		if err := r.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if _, ok := r.Lookup("closing"); !ok {
		t.Errorf("Lookup after Close lost the tool")
	}
	// Calls made after Close still run.
	res, err := r.Execute(context.Background(), carmy.Call{Tool: "closing", Input: json.RawMessage(`{"a":"x"}`)})
	if err != nil || string(res.Output) != `{"b":""}` {
		t.Errorf("Execute after Close = %s, %v", res.Output, err)
	}
}

// TestBuildWhileExecuting builds registries of new types, which share the
// cached model of string with a tool that is running.
func TestBuildWhileExecuting(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func() (string, error) { return "x", nil }, carmy.Read, carmy.Name("s"), carmy.ParallelSafe(), carmy.Register(false))))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := r.Execute(context.Background(), carmy.Call{Tool: "s"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)
	out := []reflect.Type{reflect.TypeFor[string](), reflect.TypeFor[error]()}
	for i := range 40 {
		in := reflect.StructOf([]reflect.StructField{{Name: "S", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(fmt.Sprintf(`json:"s%d" validate:"max=9"`, i))}})
		fn := reflect.MakeFunc(reflect.FuncOf([]reflect.Type{in}, out, false), func([]reflect.Value) []reflect.Value {
			return []reflect.Value{reflect.ValueOf("y"), reflect.Zero(out[1])}
		})
		r2, err := carmy.New().Tool(carmy.Tool(fn.Interface(), carmy.Read, carmy.Name("dynamic"), carmy.Register(false))).Build()
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		r2.Close()
	}
}

// TestBuildLogsUndescribedTools: Build says, in one line, which tools
// reach a model with an empty description (no Description, and no doc
// comment registered: go generate was not run); with every tool described
// it says nothing.
func TestBuildLogsUndescribedTools(t *testing.T) {
	bare := func(name string) *carmy.ToolDef {
		return carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name(name), carmy.Register(false))
	}
	described := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("described"), carmy.Description("Has one"), carmy.Register(false))
	for _, tc := range []struct {
		name  string
		tools []*carmy.ToolDef
		want  string // the line's tools; "" for no line
	}{
		{"two undescribed", []*carmy.ToolDef{bare("zeta"), described, bare("alpha")}, "alpha, zeta"},
		{"all described", []*carmy.ToolDef{described}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			reg, err := carmy.New().Tool(tc.tools...).Logger(slog.New(slog.NewTextHandler(&log, nil))).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			lines := strings.Count(log.String(), "without a description")
			switch {
			case tc.want == "" && lines != 0:
				t.Fatalf("Build logged %q; want nothing", log.String())
			case tc.want != "" && (lines != 1 || !strings.Contains(log.String(), `tools="`+tc.want+`"`) || !strings.Contains(log.String(), "go generate")):
				t.Fatalf("Build logged %q; want one line naming %s and go generate", log.String(), tc.want)
			}
		})
	}
}
