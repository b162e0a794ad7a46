package vet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/modtest"
)

// TestAnalyzer runs the analyzer on the fixture module testdata/vetmod and
// checks its diagnostics against the // want comments there: bad tools
// (badtools), a current generated file (good), a stale one (stale), a
// missing one (nogen), no comments at all (nodocs), tools in test files
// (testonly). The fixture's good/carmy_gen.go is what carmy gen writes, as
// TestGenVetFixture in cmd/carmy checks.
func TestAnalyzer(t *testing.T) {
	t.Parallel()
	dir := modtest.Copy(t, filepath.Join("testdata", "vetmod"))

	results := analysistest.Run(factsAside{t}, dir, Analyzer, "./...")

	// The facts packages give the packages that import them: the doc
	// comments of the module's types, and the directives at fields.
	t.Run("Facts", func(t *testing.T) {
		var docs, ignored bool
		for _, r := range results {
			for obj, facts := range r.Facts {
				for _, f := range facts {
					switch f := f.(type) {
					case *docsFact:
						if r.Action.Package.PkgPath == "example.com/vetmod/good/model" && obj != nil && obj.Name() == "Results" &&
							f.Module == "example.com/vetmod" && slices.ContainsFunc(f.Docs, func(d namedDoc) bool { return d.Name == "Results.Hits" }) {
							docs = true
						}
					case *ignoredFact:
						if obj != nil && obj.Name() == "Quiet" && slices.Equal(f.Checks, []string{"rule"}) {
							ignored = true
						}
					}
				}
			}
		}
		if !docs {
			t.Error("good/model exports no docsFact for Results with the comment of its field Hits")
		}
		if !ignored {
			t.Error("rules/shared exports no ignoredFact for Shared.Quiet")
		}
	})

	var bad []string
	for _, r := range results {
		if r.Action.Package.PkgPath != "example.com/vetmod/badtools" {
			continue
		}
		for _, d := range r.Diagnostics {
			bad = append(bad, d.Message)
		}
	}
	t.Run("SpeaksLikeBuild", func(t *testing.T) { speaksLikeBuild(t, bad) })
}

// factsAside passes on every failure analysistest reports but unexpected
// facts: the analyzer exports facts for every package, which TestAnalyzer
// checks in the results rather than with a // want comment in each.
type factsAside struct{ *testing.T }

func (f factsAside) Errorf(format string, args ...any) {
	if strings.Contains(fmt.Sprintf(format, args...), ": unexpected fact: ") {
		return
	}
	f.T.Helper()
	f.T.Errorf(format, args...)
}

// The declarations of testdata/vetmod/badtools, for Build.
type (
	VIn  struct{ A int }
	VOut struct{ B int }
	vSvc struct{}
)

func vTwoInputs(ctx context.Context, a VIn, b *VIn) (VOut, error)   { return VOut{}, nil }
func vTwoContexts(a context.Context, b carmy.Context, in VIn) error { return nil }
func vPtrContext(c *carmy.Context, in VIn) error                    { return nil }
func vBadParam(ctx context.Context, n int, m map[string]any) error  { return nil }
func vVariadic(ctx context.Context, names ...string) error          { return nil }
func vNoError(in VIn) VOut                                          { return VOut{} }
func vSecondNotError(in VIn) (VOut, int)                            { return VOut{}, 0 }
func vThreeResults(in VIn) (VOut, int, error)                       { return VOut{}, 0, nil }
func vOK(ctx context.Context, deps carmy.State[*VOut], in VIn) (VOut, error) {
	return VOut{}, nil
}
func créer(in VIn) error                           { return nil }
func getHTTPStatus(ctx carmy.Context) (int, error) { return 200, nil }
func (*vSvc) CancelOrder(in VIn) error             { return nil }

var dynamic any = vOK

// Fields mirrored in headers, as in badtools.
type (
	HZone struct {
		Zone string `json:"zone" carmy:"header=Zone"`
	}
	HIn struct {
		Amount float64 `json:"amount" carmy:"header=Amount"`
		Ptr    *string `json:"ptr,omitempty" carmy:"header=Ptr"`
		A      string  `json:"a" carmy:"header=Dup"`
		B      string  `json:"b" carmy:"header=dup"`
		In     HZone   `json:"in"`
		Fine   int     `json:"fine" carmy:"header=Fine"`
	}
	HBadName struct {
		Region string `json:"region" carmy:"header=Bad Name"`
	}
	HGood struct {
		Region string `json:"region" carmy:"header=Region"`
		Days   int    `json:"days" carmy:"header=Days"`
		Yes    bool   `json:"yes" carmy:"header=Yes"`
	}
)

func hMirror(in HIn) error       { return nil }
func hBadName(in HBadName) error { return nil }
func hGood(in HGood) error       { return nil }

func genericTool[T any]() *carmy.ToolDef {
	return carmy.Tool(func(ctx context.Context, in T) error { return nil }, carmy.Read, carmy.Name("generic"), carmy.Register(false))
}

// speaksLikeBuild checks that Build reports the same problems as the
// analyzer found in badtools, in the same words.
func speaksLikeBuild(t *testing.T, diagnostics []string) {
	r := carmy.Register(false)
	spread := []carmy.Option{carmy.Name("spread"), r}
	defs := []*carmy.ToolDef{
		carmy.Tool(vTwoInputs, carmy.Read, r),
		carmy.Tool(vTwoContexts, carmy.Read, r),
		carmy.Tool(vPtrContext, carmy.Read, r),
		carmy.Tool(vBadParam, carmy.Read, r),
		carmy.Tool(vVariadic, carmy.Read, r),
		carmy.Tool(vNoError, carmy.Read, r),
		carmy.Tool(vSecondNotError, carmy.Read, r),
		carmy.Tool(vThreeResults, carmy.Read, r),

		carmy.Tool(vOK, 0, r),
		carmy.Tool(vOK, carmy.Effect(0), carmy.Name("zero_effect"), r),
		carmy.Tool(vOK, 9, carmy.Name("effect_nine"), r),

		carmy.Tool(vOK, carmy.Read, carmy.Name("bad name!"), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name(""), r),
		carmy.Tool(créer, carmy.Read, r),
		carmy.Tool(func(in VIn) error { return nil }, carmy.Read, r),
		carmy.Tool(nil, carmy.Read, carmy.Name("nil_fn"), r),
		carmy.Tool(42, carmy.Read, carmy.Name("not_func"), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("first"), carmy.Name("second"), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("no_time"), carmy.Timeout(0), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("no_calls"), carmy.RateLimit(0, time.Minute), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("no_period"), carmy.RateLimit(10, 0), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("too_fast"), carmy.RateLimit(10_000, time.Millisecond), r),
		carmy.Tool(vOK, carmy.Read, carmy.Name("no_slots"), carmy.MaxInFlight(0), r),

		carmy.Tool(vOK, carmy.Read, carmy.Name("ok"), r),
		carmy.Tool(func(in VIn) error { return nil }, carmy.Write, carmy.Name("named_closure"), r),
		carmy.Tool(vOK, carmy.Read, spread...),
		carmy.Tool(getHTTPStatus, carmy.Read, r),
		carmy.Tool((&vSvc{}).CancelOrder, carmy.Destructive, carmy.RequireConfirmation(), r),
		carmy.Tool(dynamic, carmy.Read, carmy.Name("dynamic"), r),
		genericTool[VIn](),
		carmy.Tool(hMirror, carmy.Read, r),
		carmy.Tool(hBadName, carmy.Read, r),
		carmy.Tool(hGood, carmy.Read, r),
	}
	site := regexp.MustCompile(`^(carmy: tool (?:"[^"]*" )?)\([^)]*:\d+\) `)
	var built []string
	for _, d := range defs {
		_, err := carmy.New().Tool(d).State(&VOut{}).Build()
		for _, e := range unjoin(err) {
			var be *carmy.BuildError
			if !errors.As(e, &be) {
				t.Fatalf("Build returned %T: %v", e, e)
			}
			built = append(built, site.ReplaceAllString(be.Error(), "$1"))
		}
	}
	slices.Sort(built)
	slices.Sort(diagnostics)
	if !slices.Equal(built, diagnostics) {
		t.Errorf("Build and the analyzer disagree.\nBuild:\n\t%s\nanalyzer:\n\t%s",
			strings.Join(built, "\n\t"), strings.Join(diagnostics, "\n\t"))
	}
}

// Functions whose derived names are checked against Build's.
func createOrder() error    { return nil }
func listV2Items() error    { return nil }
func getHTTPStatus2() error { return nil }
func XMLHTTPRequest() error { return nil }
func a1B2c() error          { return nil }
func (vSvc) Value() error   { return nil }

// TestSnakeCase checks that the analyzer derives names as Build does.
func TestSnakeCase(t *testing.T) {
	fns := map[string]any{
		"createOrder": createOrder, "listV2Items": listV2Items, "getHTTPStatus2": getHTTPStatus2,
		"XMLHTTPRequest": XMLHTTPRequest, "a1B2c": a1B2c, "Value": vSvc{}.Value, "Value ": vSvc.Value,
	}
	for goName, fn := range fns {
		reg, err := carmy.New().Tool(carmy.Tool(fn, carmy.None, carmy.Register(false))).Build()
		if err != nil {
			t.Errorf("%s: %v", goName, err)
			continue
		}
		tools := reg.Tools()
		reg.Close()
		if want := snakeCase(strings.TrimSpace(goName)); len(tools) != 1 || tools[0].Name != want {
			t.Errorf("%s: Build names it %v, the analyzer %q", goName, tools, want)
		}
	}
	for in, want := range map[string]string{
		"createOrder": "create_order", "getHTTPStatus": "get_http_status", "listV2Items": "list_v2_items",
		"CancelOrder": "cancel_order", "ID": "id", "userID": "user_id",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
