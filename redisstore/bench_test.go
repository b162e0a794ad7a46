package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// BenchmarkExecute measures what each guarantee costs on the Redis path
// against the in-memory one, through Registry.Execute:
//
//	plain        a parallel-safe tool called without a request id: no store
//	idempotent   a call with a new request id: reserve, execute, record
//	replay       a call with a request id already recorded: one look-up
//	serialized   a tool that is not parallel-safe: take and release the lock
//	idempotent-parallel  the idempotent call from GOMAXPROCS goroutines at once
//	rate-limited a plain call of a tool with a RateLimit that never refuses:
//	             one GCRA decision
//	max-in-flight a plain call of a tool with a MaxInFlight that never
//	             refuses: a slot taken, renewed while held, and given back
//
// The Redis half needs CARMY_REDIS_URL (see redisURL); docs/deployment.md
// has the numbers and the command.
func BenchmarkExecute(b *testing.B) {
	tools := func() []*carmy.ToolDef {
		return []*carmy.ToolDef{
			carmy.Tool(func(ctx carmy.Context, in countIn) (int, error) { return in.N, nil },
				carmy.Write, carmy.Name("echo"), carmy.ParallelSafe(), carmy.Register(false)),
			carmy.Tool(func(ctx carmy.Context, in countIn) (uint64, error) { return ctx.Fence, nil },
				carmy.Write, carmy.Name("serial"), carmy.Register(false)),
			carmy.Tool(func(ctx carmy.Context, in countIn) (int, error) { return in.N, nil },
				carmy.Write, carmy.Name("echo_limited"), carmy.ParallelSafe(), carmy.RateLimit(1_000_000_000, time.Hour), carmy.Register(false)),
			carmy.Tool(func(ctx carmy.Context, in countIn) (int, error) { return in.N, nil },
				carmy.Write, carmy.Name("echo_slotted"), carmy.ParallelSafe(), carmy.MaxInFlight(1_000_000), carmy.Register(false)),
		}
	}
	run := func(b *testing.B, reg *carmy.Registry) {
		ctx := context.Background()
		input := []byte(`{"n":1}`)
		var next atomic.Int64
		call := func(b *testing.B, c carmy.Call) {
			if _, err := reg.Execute(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("plain", func(b *testing.B) {
			for b.Loop() {
				call(b, carmy.Call{Tool: "echo", Input: input})
			}
		})
		b.Run("idempotent", func(b *testing.B) {
			for b.Loop() {
				call(b, carmy.Call{Tool: "echo", Input: input, RequestID: strconv.FormatInt(next.Add(1), 10)})
			}
		})
		b.Run("replay", func(b *testing.B) {
			call(b, carmy.Call{Tool: "echo", Input: input, RequestID: "replayed"})
			for b.Loop() {
				call(b, carmy.Call{Tool: "echo", Input: input, RequestID: "replayed"})
			}
		})
		b.Run("serialized", func(b *testing.B) {
			for b.Loop() {
				call(b, carmy.Call{Tool: "serial", Input: input})
			}
		})
		b.Run("rate-limited", func(b *testing.B) {
			for b.Loop() {
				call(b, carmy.Call{Tool: "echo_limited", Input: input, Principal: "alice"})
			}
		})
		b.Run("max-in-flight", func(b *testing.B) {
			for b.Loop() {
				call(b, carmy.Call{Tool: "echo_slotted", Input: input, Principal: "alice"})
			}
		})
		b.Run("idempotent-parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					call(b, carmy.Call{Tool: "echo", Input: input, RequestID: strconv.FormatInt(next.Add(1), 10)})
				}
			})
		})
	}

	b.Run("memory", func(b *testing.B) {
		reg, err := carmy.New().Tool(tools()...).Build()
		if err != nil {
			b.Fatal(err)
		}
		defer reg.Close()
		run(b, reg)
	})
	b.Run("redis", func(b *testing.B) {
		c := newClient(b)
		s := newStore(b, c, testPrefix(b, c))
		reg, err := carmy.New().Tool(tools()...).Store(s).Locker(s).Build()
		if err != nil {
			b.Fatal(err)
		}
		defer reg.Close()
		run(b, reg)
	})
}
