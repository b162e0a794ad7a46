package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/otelcarmy"
	"github.com/carmy-dev/carmy/pgaudit"
)

// obsInput is the input of the observability benchmarks' tools.
type obsInput struct {
	ID string `json:"id" validate:"required"`
}

func obsTools() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(in obsInput) (string, error) { return in.ID, nil }, carmy.Write, carmy.Name("edit"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(in obsInput) (string, error) { return in.ID, nil }, carmy.Destructive, carmy.Name("wipe"), carmy.ParallelSafe(), carmy.Register(false)),
	}
}

// BenchmarkObservability: the cost per call of tracing and auditing, side
// by side with the plain call of the same tool in the same run.
//
//   - plain: Registry.Execute, no middleware, no audit;
//   - otel-noop: otelcarmy with the SDK's tracer provider exporting to a
//     no-op exporter through the batcher, and a meter provider with a
//     manual reader: the cost of making spans and metrics;
//   - otel-memory: the same, spans kept by the in-memory exporter;
//   - audit-file: Builder.AuditFile, on a temporary file (a destructive
//     tool's records are synced, twice per call: started and executed);
//   - audit-pg: pgaudit, against CARMY_POSTGRES_URL (skipped without it):
//     a destructive tool's records are inserted before it runs, a write
//     tool's are batched.
func BenchmarkObservability(b *testing.B) {
	pgURL := os.Getenv("CARMY_POSTGRES_URL")
	type impl struct {
		name  string
		build func(b *testing.B) *carmy.Builder
	}
	impls := []impl{
		{"plain", func(*testing.B) *carmy.Builder { return carmy.New() }},
		{"otel-noop", func(b *testing.B) *carmy.Builder {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			return carmy.New().Use(otelcarmy.Middleware(otelcarmy.WithTracerProvider(tp), otelcarmy.WithMeterProvider(mp)))
		}},
		{"otel-memory", func(b *testing.B) *carmy.Builder {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			b.Cleanup(exp.Reset) // the spans of one benchmark are kept, then dropped
			return carmy.New().Use(otelcarmy.Middleware(otelcarmy.WithTracerProvider(tp), otelcarmy.WithMeterProvider(mp)))
		}},
		{"audit-file", func(b *testing.B) *carmy.Builder {
			return carmy.New().AuditFile(filepath.Join(b.TempDir(), "audit.jsonl"))
		}},
		{"audit-pg", func(b *testing.B) *carmy.Builder {
			if pgURL == "" {
				b.Skip("CARMY_POSTGRES_URL is not set: audit to PostgreSQL is not measured")
			}
			name := fmt.Sprintf("carmy_audit_bench_%d", time.Now().UnixNano())
			a, err := pgaudit.Open(context.Background(), pgURL, pgaudit.WithTable(name))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_ = a.Close()
				if pool, err := pgxpool.New(context.Background(), pgURL); err == nil {
					_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+name)
					pool.Close()
				}
			})
			return carmy.New().Audit(a)
		}},
	}
	input := json.RawMessage(`{"id":"a-1"}`)
	for _, tool := range []string{"edit", "wipe"} {
		for _, im := range impls {
			if tool == "wipe" && (im.name == "otel-noop" || im.name == "otel-memory") {
				continue // tracing does not depend on the effect
			}
			b.Run("tool="+tool+"/impl="+im.name, func(b *testing.B) {
				reg, err := im.build(b).Tool(obsTools()...).Build()
				if err != nil {
					b.Fatal(err)
				}
				defer reg.Close()
				ctx := context.Background()
				call := carmy.Call{Tool: tool, Input: input, Principal: "bench"}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := reg.Execute(ctx, call); err != nil {
						b.Fatal(err)
					}
				}
				if n := reg.AuditFailures(); n > 0 {
					b.Fatalf("%d audit failures", n)
				}
			})
		}
	}
}
