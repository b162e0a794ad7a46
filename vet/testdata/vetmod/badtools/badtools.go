package vet

// The tools of this package are mirrored in vet_test.go (a package vet, so
// that types print alike)
// (TestVetSpeaksLikeBuild), which checks that Builder.Build reports the same
// problems in the same words. Nothing here has a doc comment, so that no
// generated file is expected.

import (
	"context"
	"time"

	"github.com/carmy-dev/carmy"
)

type VIn struct {
	A int `json:"a"`
}

type VOut struct {
	B int `json:"b"`
}

func vTwoInputs(ctx context.Context, a VIn, b *VIn) (VOut, error) { return VOut{}, nil }

func vTwoContexts(a context.Context, b carmy.Context, in VIn) error { return nil }

func vPtrContext(c *carmy.Context, in VIn) error { return nil }

func vBadParam(ctx context.Context, n int, m map[string]any) error { return nil }

func vVariadic(ctx context.Context, names ...string) error { return nil }

func vNoError(in VIn) VOut { return VOut{} }

func vSecondNotError(in VIn) (VOut, int) { return VOut{}, 0 }

func vThreeResults(in VIn) (VOut, int, error) { return VOut{}, 0, nil }

func vOK(ctx context.Context, deps carmy.State[*VOut], in VIn) (VOut, error) { return VOut{}, nil }

func créer(in VIn) error { return nil }

func getHTTPStatus(ctx carmy.Context) (int, error) { return 200, nil }

type vSvc struct{}

func (*vSvc) CancelOrder(in VIn) error { return nil }

var spread = []carmy.Option{carmy.Name("spread")}

// A function known at run time only: left to Build.
var dynamic any = vOK

// Inside a generic function, T is known once instantiated: left to Build.
func genericTool[T any]() *carmy.ToolDef {
	return carmy.Tool(func(ctx context.Context, in T) error { return nil }, carmy.Read, carmy.Name("generic"))
}

var _ = genericTool[VIn]()

var (
	_ = carmy.Tool(vTwoInputs, carmy.Read)      // want `^carmy: tool "v_two_inputs" takes at most one input; combine the fields into one struct \(parameters 2 and 3 are both inputs\)$`
	_ = carmy.Tool(vTwoContexts, carmy.Read)    // want `^carmy: tool "v_two_contexts" takes two contexts \(parameters 1 and 2\); keep one: carmy.Context or context.Context$`
	_ = carmy.Tool(vPtrContext, carmy.Read)     // want `^carmy: tool "v_ptr_context" takes \*carmy.Context; take carmy.Context by value$`
	_ = carmy.Tool(vBadParam, carmy.Read)       // want `^carmy: tool "v_bad_param" parameter 2 has type int; a tool takes a context, carmy.State\[T\] dependencies and one input struct: wrap the value in a struct field$` `parameter 3 has type map\[string\]interface \{\}`
	_ = carmy.Tool(vVariadic, carmy.Read)       // want `^carmy: tool "v_variadic" takes variadic parameters \(func\(context.Context, \.\.\.string\) error\); tools take fixed parameters: put a slice field in the input struct instead$` `parameter 2 has type \[\]string`
	_ = carmy.Tool(vNoError, carmy.Read)        // want `^carmy: tool "v_no_error" returns vet.VOut alone; return \(vet.VOut, error\) or error$`
	_ = carmy.Tool(vSecondNotError, carmy.Read) // want `^carmy: tool "v_second_not_error" returns \(vet.VOut, int\); the second result must be error$`
	_ = carmy.Tool(vThreeResults, carmy.Read)   // want `^carmy: tool "v_three_results" returns 3 results; return \(Out, error\) or error$`

	_ = carmy.Tool(vOK, 0)                                          // want `^carmy: tool "v_ok" has no effect \(effect\(0\)\); pass one of carmy.None, Read, Write, ExternalWrite or Destructive$`
	_ = carmy.Tool(vOK, carmy.Effect(0), carmy.Name("zero_effect")) // want `^carmy: tool "zero_effect" has no effect \(effect\(0\)\)`
	_ = carmy.Tool(vOK, 9, carmy.Name("effect_nine"))               // want `^carmy: tool "effect_nine" has no effect \(effect\(9\)\)`

	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("bad name!"))                                           // want `^carmy: tool "bad name!" has the invalid name "bad name!"; a name is 1 to 128 ASCII letters, digits, '_', '-' or '.'$`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name(""))                                                    // want `^carmy: tool has the invalid name ""`
	_ = carmy.Tool(créer, carmy.Read)                                                                  // want `^carmy: tool "créer" has the invalid name "créer"`
	_ = carmy.Tool(func(in VIn) error { return nil }, carmy.Read)                                      // want `^carmy: tool is a closure or anonymous function, which has no usable name; give it one with carmy.Name$`
	_ = carmy.Tool(nil, carmy.Read, carmy.Name("nil_fn"))                                              // want `^carmy: tool "nil_fn" has a nil function; pass a func such as func\(ctx context.Context, in Input\) \(Output, error\)$`
	_ = carmy.Tool(42, carmy.Read, carmy.Name("not_func"))                                             // want `^carmy: tool "not_func" is given a int, not a function; pass a func`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("first"), carmy.Name("second"))                         // want `^carmy: tool "first" option Name is given twice with different values \(first and second\); keep one$`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("no_time"), carmy.Timeout(0))                           // want `^carmy: tool "no_time" Timeout\(0s\) must be positive$`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("no_calls"), carmy.RateLimit(0, time.Minute))           // want `^carmy: tool "no_calls" RateLimit\(0, 1m0s\): the number of calls must be positive$`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("no_period"), carmy.RateLimit(10, 0))                   // want `^carmy: tool "no_period" RateLimit\(10, 0s\): the period must be positive$`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("too_fast"), carmy.RateLimit(10_000, time.Millisecond)) // want `^carmy: tool "too_fast" RateLimit\(10000, 1ms\): that is more than one call per microsecond`
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("no_slots"), carmy.MaxInFlight(0))                      // want `^carmy: tool "no_slots" MaxInFlight\(0\) must be positive$`

	// Correct declarations: nothing to report.
	_ = carmy.Tool(vOK, carmy.Read, carmy.Name("ok"))
	_ = carmy.Tool(func(in VIn) error { return nil }, carmy.Write, carmy.Name("named_closure"))
	_ = carmy.Tool(vOK, carmy.Read, spread...)
	_ = carmy.Tool(getHTTPStatus, carmy.Read)
	_ = carmy.Tool((&vSvc{}).CancelOrder, carmy.Destructive, carmy.RequireConfirmation())
	_ = carmy.Tool(dynamic, carmy.Read, carmy.Name("dynamic"))
)

// Fields mirrored in headers (carmy:"header=Name") that no header can
// carry, and a header name that is not an HTTP token.

type HZone struct {
	Zone string `json:"zone" carmy:"header=Zone"`
}

type HIn struct {
	Amount float64 `json:"amount" carmy:"header=Amount"`
	Ptr    *string `json:"ptr,omitempty" carmy:"header=Ptr"`
	A      string  `json:"a" carmy:"header=Dup"`
	B      string  `json:"b" carmy:"header=dup"`
	In     HZone   `json:"in"`
	Fine   int     `json:"fine" carmy:"header=Fine"`
}

type HBadName struct {
	Region string `json:"region" carmy:"header=Bad Name"`
}

type HGood struct {
	Region string `json:"region" carmy:"header=Region"`
	Days   int    `json:"days" carmy:"header=Days"`
	Yes    bool   `json:"yes" carmy:"header=Yes"`
}

func hMirror(in HIn) error { return nil }

func hBadName(in HBadName) error { return nil }

func hGood(in HGood) error { return nil }

var (
	_ = carmy.Tool(hMirror, carmy.Read)  // want `^carmy: tool "h_mirror" input field Amount is tagged carmy:"header=Amount" but is not a string, an integer or a boolean; a header mirrors only those$` `input field Ptr is tagged carmy:"header=Ptr" but is a pointer` `input fields A and B mirror the same header dup; give each its own$` `input field Zone, tagged carmy:"header=Zone", is not at the input's top level; move it there$`
	_ = carmy.Tool(hBadName, carmy.Read) // want `^carmy: tool "h_bad_name" input vet.HBadName.Region: carmy tag "header=Bad Name": header name "Bad Name" has ' ', which a header name cannot hold`
	_ = carmy.Tool(hGood, carmy.Read)
)
