package carmy_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/carmy-dev/carmy"
)

// BenchmarkRules measures what each runtime rule adds to the same tool:
// the plain call, an idempotent first call, an idempotent replay, and a
// tool that is not parallel-safe, alone and under 8 concurrent callers.
func BenchmarkRules(b *testing.B) {
	input := []byte(`{"sku":"A-1","quantity":2}`)
	fn := func(ctx context.Context, in PlaceOrder) (Placed, error) { return Placed{Number: 1}, nil }
	parallel := carmy.Tool(fn, carmy.Write, carmy.Name("parallel"), carmy.ParallelSafe(), carmy.Register(false))
	serial := carmy.Tool(fn, carmy.Write, carmy.Name("serial"), carmy.Register(false))
	reg, err := carmy.New().Tool(parallel, serial).Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	run := func(b *testing.B, c carmy.Call) {
		if _, err := reg.Execute(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "parallel", Input: input})
		}
	})
	b.Run("idempotent-first", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "first-" + strconv.Itoa(i)})
		}
	})
	b.Run("idempotent-replay", func(b *testing.B) {
		run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "replay"})
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "replay"})
		}
	})
	b.Run("serialized", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "serial", Input: input})
		}
	})
	for _, name := range []string{"parallel", "serial"} {
		b.Run(name+"-8callers", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					run(b, carmy.Call{Tool: name, Input: input})
				}
			})
		})
	}
}
