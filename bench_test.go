package carmy_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-playground/validator/v10"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/shape"
)

// The benchmarks compare Registry.Execute with the same work written by
// hand (BenchmarkBaseline): a strict decode into the input struct, the
// validator, the direct call of the function and the encoding of its
// output. The goal (issue 2, item 10): Execute within 1.25× the baseline's
// time on the medium input, 1.75× on the small one, and within 8
// allocations of the baseline.
//
//	go test -run '^$' -bench 'Execute|Baseline' -benchmem -count 6 . > bench.txt
//	sed -E 's#Benchmark(Execute|Baseline)/#BenchmarkCall/impl=\1/size=#' bench.txt > cols.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl cols.txt
//
// The tools are ParallelSafe, as the hand-written code has no serialization
// either. Both sides decode one input over and over, so both profit fully
// from the caches of repeated strings that go-json-experiment/json and
// carmy's decoder keep; a real stream of calls profits less, on both sides.

// benchCreateOrder is the small input: two fields.
type benchCreateOrder struct {
	SKU      string `json:"sku" validate:"required"`
	Quantity uint32 `json:"quantity" validate:"min=1,max=100"`
}

type benchOrder struct {
	OrderID uint64 `json:"order_id"`
}

func benchCreate(_ context.Context, in benchCreateOrder) (benchOrder, error) {
	return benchOrder{OrderID: uint64(len(in.SKU)) + uint64(in.Quantity)}, nil
}

// benchPlaceOrder is the medium input: 15 fields, a nested struct, a
// pointer to one and a slice of structs, with rules JSON Schema can say
// (carmy checks them itself) and one it cannot (email, for the validator).
type benchPlaceOrder struct {
	CustomerID string             `json:"customer_id" validate:"required"`
	Email      string             `json:"email" validate:"required,email"`
	Currency   string             `json:"currency" validate:"oneof=EUR USD GBP"`
	Shipping   benchAddress       `json:"shipping"`
	Billing    *benchAddress      `json:"billing,omitempty"`
	Items      []benchLineItem    `json:"items" validate:"min=1,max=50,dive"`
	Priority   int                `json:"priority" validate:"min=0,max=9"`
	Gift       bool               `json:"gift"`
	Note       string             `json:"note,omitempty" validate:"max=500"`
	Coupon     string             `json:"coupon,omitempty" validate:"max=16"`
	Tags       []string           `json:"tags,omitempty" validate:"max=10,dive,max=32"`
	Channel    string             `json:"channel" validate:"oneof=web app phone"`
	Discount   float64            `json:"discount" validate:"gte=0,lte=1"`
	Attempt    uint8              `json:"attempt" validate:"max=5"`
	Reference  string             `json:"reference" validate:"max=64"`
	Extra      map[string]float64 `json:"extra,omitempty"`
}

type benchAddress struct {
	Street  string `json:"street" validate:"required"`
	City    string `json:"city" validate:"required"`
	Country string `json:"country" validate:"len=2"`
	Zip     string `json:"zip,omitempty" validate:"max=10"`
}

type benchLineItem struct {
	SKU        string `json:"sku" validate:"required"`
	Quantity   uint32 `json:"quantity" validate:"min=1,max=100"`
	PriceCents int64  `json:"price_cents" validate:"gte=0"`
}

type benchPlaced struct {
	OrderID    uint64          `json:"order_id"`
	TotalCents int64           `json:"total_cents"`
	Currency   string          `json:"currency"`
	Lines      []benchLineItem `json:"lines"`
	ShipTo     benchAddress    `json:"ship_to"`
	Gift       bool            `json:"gift"`
}

func benchPlace(_ context.Context, in benchPlaceOrder) (benchPlaced, error) {
	var total int64
	for _, it := range in.Items {
		total += int64(it.Quantity) * it.PriceCents
	}
	return benchPlaced{OrderID: 42, TotalCents: total, Currency: in.Currency, Lines: in.Items, ShipTo: in.Shipping, Gift: in.Gift}, nil
}

const (
	smallInput  = `{"sku":"A-100","quantity":3}`
	mediumInput = `{
		"customer_id": "cus_8f3a2b",
		"email": "ada@example.com",
		"currency": "EUR",
		"shipping": {"street": "1 Analytical Way", "city": "London", "country": "GB", "zip": "N1 9GU"},
		"billing": {"street": "12 Engine Row", "city": "London", "country": "GB"},
		"items": [
			{"sku": "A-100", "quantity": 2, "price_cents": 1299},
			{"sku": "B-220", "quantity": 1, "price_cents": 4999},
			{"sku": "C-031", "quantity": 5, "price_cents": 250}
		],
		"priority": 3,
		"gift": true,
		"note": "leave at the door",
		"tags": ["spring", "promo"],
		"channel": "web",
		"discount": 0.1,
		"attempt": 1,
		"reference": "po-2024-0001"
	}`
)

// benchCase is one input size: its tool and a hand-written equivalent.
type benchCase struct {
	name  string
	tool  *carmy.ToolDef
	call  string // the tool's name
	input string
	// baseline decodes strictly, validates, calls and encodes by hand.
	baseline func(ctx context.Context, v *validator.Validate, data []byte) ([]byte, error)
}

func benchCases() []benchCase {
	return []benchCase{
		{
			name:     "small",
			tool:     carmy.Tool(benchCreate, carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Register(false)),
			call:     "create_order",
			input:    smallInput,
			baseline: baselineOf(benchCreate),
		},
		{
			name:     "medium",
			tool:     carmy.Tool(benchPlace, carmy.Write, carmy.Name("place_order"), carmy.ParallelSafe(), carmy.Register(false)),
			call:     "place_order",
			input:    mediumInput,
			baseline: baselineOf(benchPlace),
		},
	}
}

func baselineOf[In, Out any](fn func(context.Context, In) (Out, error)) func(context.Context, *validator.Validate, []byte) ([]byte, error) {
	return func(ctx context.Context, v *validator.Validate, data []byte) ([]byte, error) {
		var in In
		if err := jsonv2.Unmarshal(data, &in, jsonv2.RejectUnknownMembers(true)); err != nil {
			return nil, err
		}
		if err := v.Struct(&in); err != nil {
			return nil, err
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return jsonv2.Marshal(out)
	}
}

func BenchmarkExecute(b *testing.B) {
	ctx := context.Background()
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			reg, err := carmy.New().Tool(c.tool).Build()
			if err != nil {
				b.Fatal(err)
			}
			defer reg.Close()
			call := carmy.Call{Tool: c.call, Input: []byte(c.input)}
			if _, err := reg.Execute(ctx, call); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Execute(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBaseline(b *testing.B) {
	ctx := context.Background()
	v := validator.New()
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			data := []byte(c.input)
			if _, err := c.baseline(ctx, v, data); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.baseline(ctx, v, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShape isolates the part of Execute that internal/shape does:
// the strict decode and the rule checks, without the execution pipeline.
func BenchmarkShape(b *testing.B) {
	for _, c := range []struct {
		name  string
		typ   reflect.Type
		input string
	}{
		{"small", reflect.TypeFor[benchCreateOrder](), smallInput},
		{"medium", reflect.TypeFor[benchPlaceOrder](), mediumInput},
	} {
		b.Run(c.name, func(b *testing.B) {
			n, err := shape.Of(c.typ)
			if err != nil {
				b.Fatal(err)
			}
			data := []byte(c.input)
			b.ReportAllocs()
			for b.Loop() {
				v := reflect.New(c.typ).Elem()
				problems, fatal := shape.Decode(n, data, v)
				if !fatal {
					problems = append(problems, shape.Check(n, v, problems)...)
				}
				if len(problems) > 0 {
					b.Fatal(problems)
				}
			}
		})
	}
}

// BenchmarkBuild builds a registry of 1,000 tools, each with its own input
// type, made at run time with reflect.StructOf, FuncOf and MakeFunc.
//
// The models of types are cached process-wide (shape.Of), so a second
// build of the same types skips modelling them. "cold" measures the first
// build of new types: every iteration makes 1,000 types never seen before
// (a struct tag carries a generation number), outside the timer. "warm" rebuilds
// one set of tools whose types are already cached, as a process that
// builds a second registry does. Types made by StructOf are never freed, so
// the cold benchmark grows the heap by its iterations.
func BenchmarkBuild(b *testing.B) {
	const tools = 1000
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			fns := benchFuncs(fmt.Sprintf("cold-%d", benchGeneration.Add(1)), tools)
			b.StartTimer()
			benchBuild(b, fns)
		}
	})
	b.Run("warm", func(b *testing.B) {
		fns := benchFuncs("warm", tools)
		benchBuild(b, fns)
		b.ReportAllocs()
		for b.Loop() {
			benchBuild(b, fns)
		}
	})
}

// benchBuild declares a tool for every function and builds the registry.
func benchBuild(b *testing.B, fns []any) {
	bld := carmy.New()
	for i, fn := range fns {
		bld.Tool(carmy.Tool(fn, carmy.Read, carmy.Name("tool_"+strconv.Itoa(i)), carmy.Register(false)))
	}
	reg, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	if got := len(reg.Tools()); got != len(fns) {
		b.Fatalf("built %d tools, want %d", got, len(fns))
	}
}

type benchBuildOut struct {
	OK bool `json:"ok"`
}

// benchGeneration numbers the sets of types of the cold build, across
// runs of the benchmark (-count) too, so that no set is ever made twice.
var benchGeneration atomic.Int64

var (
	benchCtxType = reflect.TypeFor[context.Context]()
	benchErrType = reflect.TypeFor[error]()
	benchOutType = reflect.TypeFor[benchBuildOut]()
)

// benchFuncs makes n functions func(context.Context, In_i) (benchBuildOut,
// error), each In_i a distinct struct type: the generation and index are in
// a tag of its first field, and the fields vary with i.
func benchFuncs(generation string, n int) []any {
	fns := make([]any, n)
	for i := range n {
		fields := []reflect.StructField{
			{Name: "ID", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(fmt.Sprintf(`json:"id" validate:"required" bench:"%s-%d"`, generation, i))},
			{Name: "Count", Type: reflect.TypeFor[int32](), Tag: `json:"count" validate:"min=0,max=1000"`},
			{Name: "Labels", Type: reflect.TypeFor[[]string](), Tag: `json:"labels,omitempty" validate:"max=8,dive,max=20"`},
		}
		if i%2 == 0 {
			fields = append(fields, reflect.StructField{Name: "Note", Type: reflect.TypeFor[*string](), Tag: `json:"note"`})
		}
		if i%3 == 0 {
			fields = append(fields, reflect.StructField{Name: "Kind", Type: reflect.TypeFor[string](), Tag: `json:"kind" validate:"oneof=a b c"`})
		}
		in := reflect.StructOf(fields)
		ft := reflect.FuncOf([]reflect.Type{benchCtxType, in}, []reflect.Type{benchOutType, benchErrType}, false)
		fns[i] = reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			return []reflect.Value{reflect.ValueOf(benchBuildOut{OK: true}), reflect.Zero(benchErrType)}
		}).Interface()
	}
	return fns
}
