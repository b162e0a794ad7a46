// Package otelcarmy traces and measures the calls of a carmy registry with
// OpenTelemetry.
//
// [Middleware] makes one span per call, refusals and replays included,
// named "execute_tool <tool>" after the OpenTelemetry semantic conventions
// for generative AI, and records two metrics: a counter of calls by tool,
// effect and code, and a histogram of their durations.
//
//	reg, err := carmy.New().Tool(tools...).Use(otelcarmy.Middleware()).Build()
//
// A call joins its caller's trace: the span is the child of the span in the
// call's context, or of the W3C trace context the caller sent (the
// traceparent and tracestate HTTP headers, or the same keys of an MCP
// request's _meta), which carmy puts in the call's metadata under
// [carmy.MetaTraceparent] and [carmy.MetaTracestate].
//
// The package is a module of its own, so that carmy itself does not depend
// on OpenTelemetry.
package otelcarmy

import (
	"context"
	"maps"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/carmy-dev/carmy"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/carmy-dev/carmy/otelcarmy"

// Attribute keys of spans and metrics. The gen_ai and error keys are those
// of the OpenTelemetry semantic conventions; the carmy keys are carmy's.
const (
	OperationNameKey = attribute.Key("gen_ai.operation.name") // always "execute_tool"
	ToolNameKey      = attribute.Key("gen_ai.tool.name")
	ToolCallIDKey    = attribute.Key("gen_ai.tool.call.id") // the execution id
	ErrorTypeKey     = attribute.Key("error.type")          // the carmy code of a failed call
	EffectKey        = attribute.Key("carmy.effect")        // none, read, write, external_write or destructive
	ReplayedKey      = attribute.Key("carmy.replayed")      // the recorded outcome of an earlier execution
	RequestIDKey     = attribute.Key("carmy.request_id")    // only when the call has one
	CodeKey          = attribute.Key("carmy.code")          // metrics: "ok" or the carmy code
)

// Names of the metrics.
const (
	CallsMetric    = "carmy.calls"         // counter, {call}
	DurationMetric = "carmy.call.duration" // histogram, seconds
)

// DurationBuckets are the explicit bucket boundaries of the duration
// histogram, in seconds: from a call served in process, under a
// millisecond, to one that runs for minutes.
var DurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

const operation = "execute_tool"

// Option configures [Middleware].
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider sets where spans go. The default is the global
// provider, [otel.GetTracerProvider].
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets where metrics go. The default is the global
// provider, [otel.GetMeterProvider].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithPropagator sets how the trace context a caller sent is read from a
// call's metadata. The default is W3C Trace Context
// ([propagation.TraceContext]).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

// Middleware returns carmy middleware that traces and measures every call
// of a found tool (an unknown tool's call reaches no middleware).
//
// The span, of kind internal, is named "execute_tool <tool>" and carries
// gen_ai.operation.name ("execute_tool"), gen_ai.tool.name,
// gen_ai.tool.call.id (the execution id, once the call has one: a new
// execution's, or the original one of a replay), carmy.effect,
// carmy.replayed, and carmy.request_id when the call has one. A failed
// call sets error.type to its carmy code and the span's status to error,
// with the code as its description; the message is not recorded, since it
// may quote the input.
//
// Its parent is the span in the call's context when that span was made in
// this process and belongs to the trace the caller sent, or when the
// caller sent none; otherwise the caller's trace context. So a host
// wrapped in HTTP instrumentation nests the call under its server span,
// and one without it still joins the agent's trace.
//
// The metrics carmy.calls (a counter) and carmy.call.duration (a histogram
// in seconds with [DurationBuckets]) carry gen_ai.tool.name, carmy.effect
// and carmy.code ("ok" or the carmy code).
func Middleware(opts ...Option) carmy.Middleware {
	c := config{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	tracer := c.tp.Tracer(ScopeName)
	meter := c.mp.Meter(ScopeName)
	calls, err := meter.Int64Counter(CallsMetric, metric.WithUnit("{call}"), metric.WithDescription("Calls of carmy tools, by tool, effect and outcome code."))
	if err != nil {
		otel.Handle(err)
	}
	duration, err := meter.Float64Histogram(DurationMetric, metric.WithUnit("s"), metric.WithDescription("Duration of calls of carmy tools, from the runtime's decision to its answer."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return func(next carmy.CallFunc) carmy.CallFunc {
		// The runtime builds one chain per tool: the attributes that do
		// not change from call to call are made once.
		var cached atomic.Pointer[toolAttrs]
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			ta := cached.Load()
			if ta == nil || ta.name != req.Tool.Name {
				ta = newToolAttrs(req.Tool)
				cached.Store(ta)
			}
			start := time.Now()
			attrs := make([]attribute.KeyValue, 0, 8)
			attrs = append(attrs, ta.span...)
			if req.Call.RequestID != "" {
				attrs = append(attrs, RequestIDKey.String(req.Call.RequestID))
			}
			ctx, span := tracer.Start(parent(ctx, c.prop, req.Call.Metadata), ta.spanName,
				trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
			res, err := next(ctx, req)
			end := time.Now()

			code := carmy.CodeOf(err)
			if req.ExecutionID != "" {
				span.SetAttributes(ToolCallIDKey.String(req.ExecutionID))
			}
			span.SetAttributes(ReplayedKey.Bool(req.Replayed))
			if err != nil {
				span.SetAttributes(ErrorTypeKey.String(string(code)))
				span.SetStatus(codes.Error, string(code))
			}
			span.End(trace.WithTimestamp(end))

			set := ta.metricSet(code)
			if calls != nil {
				calls.Add(ctx, 1, metric.WithAttributeSet(set))
			}
			if duration != nil {
				duration.Record(ctx, end.Sub(start).Seconds(), metric.WithAttributeSet(set))
			}
			return res, err
		}
	}
}

// parent returns the context whose span a call's span is the child of.
func parent(ctx context.Context, prop propagation.TextMapPropagator, md map[string]string) context.Context {
	if len(md) == 0 {
		return ctx
	}
	remote := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier(md)))
	if !remote.IsValid() {
		return ctx
	}
	if local := trace.SpanContextFromContext(ctx); local.IsValid() && !local.IsRemote() && local.TraceID() == remote.TraceID() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, remote)
}

// toolAttrs are the attributes of one tool's spans and metrics.
type toolAttrs struct {
	name     string
	spanName string
	span     []attribute.KeyValue
	ok       attribute.Set
	failed   atomic.Pointer[map[carmy.Code]attribute.Set] // copied on write: codes are few
}

func newToolAttrs(m carmy.ToolMetadata) *toolAttrs {
	return &toolAttrs{
		name:     m.Name,
		spanName: operation + " " + m.Name,
		span:     []attribute.KeyValue{OperationNameKey.String(operation), ToolNameKey.String(m.Name), EffectKey.String(m.Effect.String())},
		ok:       attribute.NewSet(ToolNameKey.String(m.Name), EffectKey.String(m.Effect.String()), CodeKey.String("ok")),
	}
}

// maxCachedCodes bounds the attribute sets kept per tool: carmy has a
// dozen codes, and a tool may make up more.
const maxCachedCodes = 32

// metricSet returns the attributes of a call's metrics with its code ("" for
// a success).
func (t *toolAttrs) metricSet(code carmy.Code) attribute.Set {
	if code == "" {
		return t.ok
	}
	for {
		old := t.failed.Load()
		if old != nil {
			if s, ok := (*old)[code]; ok {
				return s
			}
		}
		effect, _ := t.ok.Value(EffectKey)
		s := attribute.NewSet(ToolNameKey.String(t.name), EffectKey.String(effect.AsString()), CodeKey.String(string(code)))
		if old != nil && len(*old) >= maxCachedCodes {
			return s // a tool making up codes of its own: not kept
		}
		m := make(map[carmy.Code]attribute.Set, 1)
		if old != nil {
			maps.Copy(m, *old)
		}
		m[code] = s
		if t.failed.CompareAndSwap(old, &m) {
			return s
		}
	}
}
