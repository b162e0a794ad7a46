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
// A call that came over MCP also gets the span and the metric of the
// OpenTelemetry semantic conventions for MCP servers: a span of kind server
// named "tools/call <tool>", the execute_tool span's parent, and the
// histogram mcp.server.operation.duration. [Sessions] records the
// conventions' mcp.server.session.duration:
//
//	b.Use(otelcarmy.Middleware()).OnMCPSessionEnd(otelcarmy.Sessions())
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
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
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

// Attribute keys of the MCP server span and metric, those of the
// OpenTelemetry semantic conventions for MCP.
const (
	MCPMethodNameKey      = semconv.McpMethodNameKey      // "tools/call"
	MCPSessionIDKey       = semconv.McpSessionIDKey       // only with a session
	MCPProtocolVersionKey = semconv.McpProtocolVersionKey // the version the request is served under
	JSONRPCRequestIDKey   = semconv.JSONRPCRequestIDKey   // when carmy read the request itself
	NetworkTransportKey   = semconv.NetworkTransportKey   // "tcp" (streamable HTTP) or "pipe" (stdio)
)

// Names of the metrics.
const (
	CallsMetric    = "carmy.calls"         // counter, {call}
	DurationMetric = "carmy.call.duration" // histogram, seconds

	// MCPOperationMetric is the MCP conventions' histogram of the
	// duration of MCP requests, in seconds.
	MCPOperationMetric = "mcp.server.operation.duration"

	// MCPSessionMetric is the MCP conventions' histogram of the duration
	// of MCP sessions, in seconds ([Sessions]).
	MCPSessionMetric = "mcp.server.session.duration"
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
//
// A call that came over MCP ([carmy.Request.MCP]) is first given the
// span the MCP conventions define, of kind server, named "tools/call
// <tool>", with mcp.method.name, mcp.session.id (with a session),
// mcp.protocol.version, jsonrpc.request.id (when carmy decoded the request
// itself, as it does for the calls it answers without the MCP SDK),
// gen_ai.tool.name, gen_ai.operation.name, network.transport, and
// error.type for a failed call; the execute_tool span is its child. Its
// duration goes to mcp.server.operation.duration (seconds, with
// [DurationBuckets]) with mcp.method.name, gen_ai.tool.name,
// gen_ai.operation.name, mcp.protocol.version, network.transport and
// error.type. A middleware sees calls, not the ends of sessions: [Sessions]
// records mcp.server.session.duration.
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
	mcpDuration, err := mcpconv.NewServerOperationDuration(meter, metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	in := &instruments{tracer: tracer, prop: c.prop, calls: calls, duration: duration, mcpDuration: mcpDuration}
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
			// The work before and after the call is in functions of its
			// own: this frame, on the stack while the call runs, stays
			// small, and a server's goroutines seldom grow their stacks.
			var o observed
			ctx = in.begin(ctx, ta, req, &o)
			res, err := next(ctx, req)
			in.end(ctx, ta, req, &o, err)
			return res, err
		}
	}
}

// instruments are a middleware's tracer and meters.
type instruments struct {
	tracer      trace.Tracer
	prop        propagation.TextMapPropagator
	calls       metric.Int64Counter
	duration    metric.Float64Histogram
	mcpDuration mcpconv.ServerOperationDuration
}

// observed is what a call's telemetry holds from its start to its end.
type observed struct {
	start        time.Time
	mcp          carmy.MCPRequest
	server, span trace.Span // server is nil for a call that did not come over MCP
}

// begin starts a call's spans and returns the context the call runs in.
func (in *instruments) begin(ctx context.Context, ta *toolAttrs, req *carmy.Request, o *observed) context.Context {
	// The spans take their own start and end times, the same clock: no
	// timestamp option to allocate per call.
	o.start = time.Now()
	ctx = parent(ctx, in.prop, req.Call.Metadata)
	o.mcp = req.MCP()
	if o.mcp.Method != "" {
		ctx, o.server = in.tracer.Start(ctx, ta.mcpSpanName, ta.mcpStart, trace.WithAttributes(ta.mcpAttrs(o.mcp)...))
	}
	spanOpts := ta.start
	if req.Call.RequestID != "" {
		spanOpts = []trace.SpanStartOption{ta.start[0], ta.start[1], trace.WithAttributes(RequestIDKey.String(req.Call.RequestID))}
	}
	ctx, o.span = in.tracer.Start(ctx, ta.spanName, spanOpts...)
	return ctx
}

// end ends a call's spans and records its metrics.
func (in *instruments) end(ctx context.Context, ta *toolAttrs, req *carmy.Request, o *observed, err error) {
	end := time.Now()
	code := carmy.CodeOf(err)
	span := o.span
	if span.IsRecording() {
		late := [3]attribute.KeyValue{ReplayedKey.Bool(req.Replayed)}
		n := 1
		if req.ExecutionID != "" {
			late[n] = ToolCallIDKey.String(req.ExecutionID)
			n++
		}
		if err != nil {
			late[n] = ErrorTypeKey.String(string(code))
			n++
		}
		span.SetAttributes(late[:n]...)
	}
	if err != nil {
		span.SetStatus(codes.Error, string(code))
	}
	span.End()
	if o.server != nil {
		if err != nil {
			o.server.SetAttributes(ErrorTypeKey.String(string(code)))
			o.server.SetStatus(codes.Error, string(code))
		}
		o.server.End()
		in.mcpDuration.Inst().Record(ctx, end.Sub(o.start).Seconds(), ta.set(setKey{mcp: true, code: code, version: o.mcp.ProtocolVersion, transport: o.mcp.Transport}).record...)
	}
	set := ta.set(setKey{code: code})
	if in.calls != nil {
		in.calls.Add(ctx, 1, set.add...)
	}
	if in.duration != nil {
		in.duration.Record(ctx, end.Sub(o.start).Seconds(), set.record...)
	}
}

// SessionBuckets are the explicit bucket boundaries of the session
// duration histogram, in seconds: the MCP conventions' advice, from a
// session of one request to one a client keeps open for hours.
var SessionBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400}

// Sessions returns the function to give [carmy.Builder.OnMCPSessionEnd]
// that records the MCP conventions' histogram mcp.server.session.duration
// (seconds, with [SessionBuckets]) of every MCP session that ends, with
// mcp.protocol.version, network.transport ("tcp" for streamable HTTP,
// "pipe" for stdio) and, over HTTP, network.protocol.name ("http"). The
// sessionless protocol (2026-07-28) has no sessions to record. Only the
// meter provider of the options counts.
func Sessions(opts ...Option) func(carmy.MCPSession) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	h, err := mcpconv.NewServerSessionDuration(c.mp.Meter(ScopeName), metric.WithExplicitBucketBoundaries(SessionBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return func(s carmy.MCPSession) {
		attrs := []attribute.KeyValue{MCPProtocolVersionKey.String(s.ProtocolVersion), NetworkTransportKey.String(s.Transport)}
		if s.Transport == "tcp" {
			attrs = append(attrs, semconv.NetworkProtocolName("http"))
		}
		h.Record(context.Background(), s.End.Sub(s.Start).Seconds(), attrs...)
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

// toolAttrs are the attributes of one tool's spans and metrics, made once
// per tool, and the attribute sets of its metrics, made once per set.
type toolAttrs struct {
	name        string
	effect      string
	spanName    string
	mcpSpanName string
	start       []trace.SpanStartOption // the execute_tool span's: its kind and attributes
	mcpStart    trace.SpanStartOption   // the MCP span's kind
	mcp         []attribute.KeyValue    // those of the MCP span that every call of the tool has
	ok          *metricSet
	sets        atomic.Pointer[map[setKey]*metricSet] // copied on write: sets are few
}

// metricSet is one attribute set of a tool's metrics, as the options the
// instruments take, made once: a call records with no option to allocate.
type metricSet struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newMetricSet(kv ...attribute.KeyValue) *metricSet {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &metricSet{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

// setKey names one attribute set of a tool's metrics: carmy's own (mcp
// false), or the MCP conventions' for a protocol version and transport.
// code is "" for a success.
type setKey struct {
	mcp                bool
	code               carmy.Code
	version, transport string
}

func newToolAttrs(m carmy.ToolMetadata) *toolAttrs {
	effect := m.Effect.String()
	return &toolAttrs{
		name:        m.Name,
		effect:      effect,
		spanName:    operation + " " + m.Name,
		mcpSpanName: "tools/call " + m.Name,
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(OperationNameKey.String(operation), ToolNameKey.String(m.Name), EffectKey.String(effect))},
		mcpStart: trace.WithSpanKind(trace.SpanKindServer),
		mcp:      []attribute.KeyValue{OperationNameKey.String(operation), ToolNameKey.String(m.Name)},
		ok:       newMetricSet(ToolNameKey.String(m.Name), EffectKey.String(effect), CodeKey.String("ok")),
	}
}

// mcpAttrs are the attributes of the MCP span of a call that m carried.
func (t *toolAttrs) mcpAttrs(m carmy.MCPRequest) []attribute.KeyValue {
	a := make([]attribute.KeyValue, len(t.mcp), len(t.mcp)+5)
	copy(a, t.mcp)
	a = append(a, MCPMethodNameKey.String(m.Method), MCPProtocolVersionKey.String(m.ProtocolVersion), NetworkTransportKey.String(m.Transport))
	if m.SessionID != "" {
		a = append(a, MCPSessionIDKey.String(m.SessionID))
	}
	if len(m.ID) > 0 {
		id := string(m.ID)
		if len(id) >= 2 && id[0] == '"' {
			id = id[1 : len(id)-1] // plain: carmy reads only ids with no escapes itself
		}
		a = append(a, JSONRPCRequestIDKey.String(id))
	}
	return a
}

// maxCachedSets bounds the attribute sets kept per tool: carmy has a dozen
// codes, MCP a few versions and transports, and a tool may make up codes.
const maxCachedSets = 64

// set returns the attributes of a call's metrics.
func (t *toolAttrs) set(k setKey) *metricSet {
	if !k.mcp && k.code == "" {
		return t.ok
	}
	for {
		old := t.sets.Load()
		if old != nil {
			if s, ok := (*old)[k]; ok {
				return s
			}
		}
		s := t.newSet(k)
		if old != nil && len(*old) >= maxCachedSets {
			return s // a tool making up codes of its own: not kept
		}
		m := make(map[setKey]*metricSet, 1)
		if old != nil {
			maps.Copy(m, *old)
		}
		m[k] = s
		if t.sets.CompareAndSwap(old, &m) {
			return s
		}
	}
}

func (t *toolAttrs) newSet(k setKey) *metricSet {
	if !k.mcp {
		return newMetricSet(ToolNameKey.String(t.name), EffectKey.String(t.effect), CodeKey.String(string(k.code)))
	}
	a := []attribute.KeyValue{MCPMethodNameKey.String("tools/call"), ToolNameKey.String(t.name), OperationNameKey.String(operation),
		MCPProtocolVersionKey.String(k.version), NetworkTransportKey.String(k.transport)}
	if k.code != "" {
		a = append(a, ErrorTypeKey.String(string(k.code)))
	}
	return newMetricSet(a...)
}
