package carmy_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/benchtools"
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
// either. Both sides cycle through the same 256 inputs of one shape with
// other strings and numbers (benchtools.Varied), as a stream of calls
// would send, so that neither profits from caches of one input repeated.

// The reference tools are benchtools', shared with the bench module.

// benchCase is one input size: its tool, its input and its floor, the same
// work written by hand.
type benchCase struct {
	name  string
	tool  *carmy.ToolDef
	call  string // the tool's name
	input string
}

func benchCases() []benchCase {
	return []benchCase{
		{"small", carmy.Tool(benchtools.CreateOrderFunc, carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Register(false)), "create_order", benchtools.SmallInput},
		{"medium", carmy.Tool(benchtools.PlaceOrderFunc, carmy.Write, carmy.Name("place_order"), carmy.ParallelSafe(), carmy.Register(false)), "place_order", benchtools.MediumInput},
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
			inputs := benchtools.Varied(c.input, 256)
			call := carmy.Call{Tool: c.call, Input: inputs[0]}
			if _, err := reg.Execute(ctx, call); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				call.Input = inputs[i%len(inputs)]
				i++
				if _, err := reg.Execute(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBaseline(b *testing.B) {
	ctx := context.Background()
	floors := benchtools.Floors()
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			inputs := benchtools.Varied(c.input, 256)
			floor := floors[c.call]
			if _, err := floor(ctx, inputs[0]); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := floor(ctx, inputs[i%len(inputs)]); err != nil {
					b.Fatal(err)
				}
				i++
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
		{"small", reflect.TypeFor[benchtools.CreateOrder](), benchtools.SmallInput},
		{"medium", reflect.TypeFor[benchtools.PlaceOrder](), benchtools.MediumInput},
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
			fns := benchtools.NewToolSet(fmt.Sprintf("cold-%d", benchGeneration.Add(1)), tools).Funcs
			b.StartTimer()
			benchBuild(b, fns)
		}
	})
	b.Run("warm", func(b *testing.B) {
		fns := benchtools.NewToolSet("warm", tools).Funcs
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

// benchGeneration numbers the sets of types of the cold build, across
// runs of the benchmark (-count) too, so that no set is ever made twice.
var benchGeneration atomic.Int64

// BenchmarkEncode compares the output encoder, which writes from the model
// that publishes the schema, with go-json-experiment/json's Marshal, the
// encoder it replaced, on the small and medium outputs. Compare the two
// in one run: go test -run X -bench Encode -count 10 | benchstat -col /enc -
func BenchmarkEncode(b *testing.B) {
	in := benchtools.PlaceOrder{}
	if err := jsonv2.Unmarshal([]byte(benchtools.MediumInput), &in); err != nil {
		b.Fatal(err)
	}
	medium, _ := benchtools.PlaceOrderFunc(context.Background(), in)
	for _, c := range []struct {
		name string
		out  any
	}{
		{"small", benchtools.Order{OrderID: 1234567}},
		{"medium", medium},
	} {
		n, err := shape.Of(reflect.TypeOf(c.out))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/enc=model", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := carmy.EncodeValue(n, reflect.ValueOf(c.out)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/enc=jsonv2", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonv2.Marshal(c.out, jsonv2.Deterministic(true)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
