package otelcarmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/otelcarmy"
)

// harness is a registry traced into memory.
type harness struct {
	reg    *carmy.Registry
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

type Item struct {
	ID string `json:"id" validate:"required"`
}

func newHarness(t *testing.T, b *carmy.Builder) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() { _ = h.tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	reg, err := b.Use(otelcarmy.Middleware(otelcarmy.WithTracerProvider(h.tp), otelcarmy.WithMeterProvider(mp))).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	h.reg = reg
	return h
}

// lastSpan returns the one span recorded since the last call, and forgets
// it.
func (h *harness) lastSpan(t *testing.T) tracetest.SpanStub {
	t.Helper()
	spans := h.spans.GetSpans()
	h.spans.Reset()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	return spans[0]
}

// outerSpan returns the span of the last call whose parent is not in this
// process, and the other one, if any, and forgets them.
func outerSpan(t *testing.T, h *harness) (outer tracetest.SpanStub, inner *tracetest.SpanStub) {
	t.Helper()
	spans := h.spans.GetSpans()
	h.spans.Reset()
	if len(spans) == 0 || len(spans) > 2 {
		t.Fatalf("%d spans, want 1 or 2", len(spans))
	}
	for i := range spans {
		if spans[i].Parent.IsRemote() || !spans[i].Parent.IsValid() {
			outer = spans[i]
		} else {
			inner = &spans[i]
		}
	}
	return outer, inner
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// tools is one tool for each outcome the test needs.
func tools(block chan struct{}) []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(in Item) (string, error) { return in.ID, nil }, carmy.Write, carmy.Name("save"), carmy.Register(false)),
		carmy.Tool(func(in Item) error { return nil }, carmy.Destructive, carmy.Name("drop"), carmy.RequireConfirmation(), carmy.Register(false)),
		carmy.Tool(func(in Item) error { return carmy.Errorf(carmy.CodeNotFound, "no item %s", in.ID) }, carmy.Read, carmy.Name("find"), carmy.Register(false)),
		carmy.Tool(func(in Item) error { return errors.New("boom") }, carmy.Read, carmy.Name("broken"), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, carmy.Read, carmy.Name("slow"), carmy.Timeout(20*time.Millisecond), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() error { <-block; return nil }, carmy.Write, carmy.Name("serial"), carmy.Timeout(50*time.Millisecond), carmy.Register(false)),
	}
}

func policy(c carmy.Context, m carmy.ToolMetadata) error {
	switch c.Principal {
	case "mallory":
		return errors.New("not allowed")
	case "ghost":
		return carmy.Errorf(carmy.CodeUnauthenticated, "who are you?")
	}
	return nil
}

// A span per call, refusals and replays included, with the conventions'
// attributes; error.type is the carmy code.
func TestSpanAttributes(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := newHarness(t, carmy.New().Tool(tools(block)...).Authorize(policy))
	ctx := context.Background()

	// serial is busy: this call's answer is a timeout, but the tool,
	// which ignores its context, keeps its turn until block is closed.
	if _, err := h.reg.Execute(ctx, carmy.Call{Tool: "serial"}); carmy.CodeOf(err) != carmy.CodeTimeout {
		t.Fatalf("holder: %v", err)
	}
	h.spans.Reset()

	first, err := h.reg.Execute(ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	success := h.lastSpan(t)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		call     carmy.Call
		code     carmy.Code
		executed bool
		replayed bool
	}{
		{"replay", ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"}, "", true, true},
		{"invalid_input", ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{}`)}, carmy.CodeInvalidInput, false, false},
		{"permission_denied", ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), Principal: "mallory"}, carmy.CodePermissionDenied, false, false},
		{"unauthenticated", ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), Principal: "ghost"}, carmy.CodeUnauthenticated, false, false},
		{"confirmation_required", ctx, carmy.Call{Tool: "drop", Input: json.RawMessage(`{"id":"a"}`)}, carmy.CodeConfirmationRequired, false, false},
		{"conflict", ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"b"}`), RequestID: "r1"}, carmy.CodeConflict, false, false},
		{"unavailable", ctx, carmy.Call{Tool: "serial"}, carmy.CodeUnavailable, false, false},
		{"not_found", ctx, carmy.Call{Tool: "find", Input: json.RawMessage(`{"id":"a"}`)}, carmy.CodeNotFound, true, false},
		{"internal", ctx, carmy.Call{Tool: "broken", Input: json.RawMessage(`{"id":"a"}`)}, carmy.CodeInternal, true, false},
		{"timeout", ctx, carmy.Call{Tool: "slow"}, carmy.CodeTimeout, true, false},
		{"cancelled", cancelled, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"c"}`)}, carmy.CodeCancelled, false, false},
	}
	check := func(t *testing.T, s tracetest.SpanStub, tool string, code carmy.Code, execID, rid string, replayed bool) {
		t.Helper()
		a := attrs(s)
		m, _ := h.reg.Lookup(tool)
		if s.Name != "execute_tool "+tool || s.SpanKind != trace.SpanKindInternal {
			t.Errorf("span %q of kind %v", s.Name, s.SpanKind)
		}
		want := map[attribute.Key]string{
			otelcarmy.OperationNameKey: "execute_tool",
			otelcarmy.ToolNameKey:      tool,
			otelcarmy.EffectKey:        m.Effect.String(),
			otelcarmy.ToolCallIDKey:    execID,
			otelcarmy.ErrorTypeKey:     string(code),
			otelcarmy.RequestIDKey:     rid,
		}
		for k, v := range want {
			got, ok := a[k]
			if v == "" && ok {
				t.Errorf("%s = %q, want none", k, got.String())
			} else if v != "" && got.AsString() != v {
				t.Errorf("%s = %q, want %q", k, got.String(), v)
			}
		}
		if got, ok := a[otelcarmy.ReplayedKey]; !ok || got.AsBool() != replayed {
			t.Errorf("carmy.replayed = %v, want %v", got.String(), replayed)
		}
		if (code == "") != (s.Status.Code == codes.Unset) || code != "" && s.Status.Description != string(code) {
			t.Errorf("status %+v for code %q", s.Status, code)
		}
	}
	t.Run("success", func(t *testing.T) {
		check(t, success, "save", "", first.ExecutionID, "r1", false)
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.reg.Execute(tt.ctx, tt.call)
			if carmy.CodeOf(err) != tt.code {
				t.Fatalf("code %q, want %q (%v)", carmy.CodeOf(err), tt.code, err)
			}
			s := h.lastSpan(t)
			execID := ""
			switch {
			case tt.replayed:
				execID = first.ExecutionID
				if res.ExecutionID != execID {
					t.Fatalf("replay of %q, want %q", res.ExecutionID, execID)
				}
			case tt.executed:
				var e *carmy.Error
				if errors.As(err, &e) {
					execID, _ = e.Details["execution_id"].(string)
				}
				if execID == "" {
					// A tool's own error carries no execution id: the
					// span's must be a UUID all the same.
					id := attrs(s)[otelcarmy.ToolCallIDKey].AsString()
					if len(id) != 36 {
						t.Fatalf("gen_ai.tool.call.id %q", id)
					}
					execID = id
				}
			}
			check(t, s, tt.call.Tool, tt.code, execID, tt.call.RequestID, tt.replayed)
		})
	}
}

// The counter counts calls by tool, effect and code; the histogram has the
// explicit buckets.
func TestMetrics(t *testing.T) {
	h := newHarness(t, carmy.New().Tool(tools(nil)...).Authorize(policy))
	ctx := context.Background()
	for range 3 {
		_, _ = h.reg.Execute(ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`)})
	}
	_, _ = h.reg.Execute(ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), Principal: "mallory"})
	_, _ = h.reg.Execute(ctx, carmy.Call{Tool: "find", Input: json.RawMessage(`{"id":"a"}`)})
	_, _ = h.reg.Execute(ctx, carmy.Call{Tool: "nope"}) // no tool, no middleware

	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var (
		counts  = map[string]int64{}
		samples uint64
		bounds  []float64
	)
	key := func(s attribute.Set) string {
		tool, _ := s.Value(otelcarmy.ToolNameKey)
		effect, _ := s.Value(otelcarmy.EffectKey)
		code, _ := s.Value(otelcarmy.CodeKey)
		return tool.AsString() + "/" + effect.AsString() + "/" + code.AsString()
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelcarmy.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != otelcarmy.CallsMetric || !data.IsMonotonic || m.Unit != "{call}" {
					t.Errorf("counter %q %q", m.Name, m.Unit)
				}
				for _, dp := range data.DataPoints {
					counts[key(dp.Attributes)] += dp.Value
				}
			case metricdata.Histogram[float64]:
				if m.Name != otelcarmy.DurationMetric || m.Unit != "s" {
					t.Errorf("histogram %q %q", m.Name, m.Unit)
				}
				for _, dp := range data.DataPoints {
					samples += dp.Count
					bounds = dp.Bounds
					if dp.Sum <= 0 {
						t.Errorf("duration sum %v", dp.Sum)
					}
				}
			}
		}
	}
	want := map[string]int64{"save/write/ok": 3, "save/write/permission_denied": 1, "find/read/not_found": 1}
	if len(counts) != len(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("count %s = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	if samples != 5 || !slices.Equal(bounds, otelcarmy.DurationBuckets) {
		t.Errorf("%d samples, bounds %v", samples, bounds)
	}
}

const (
	agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpan  = "00f067aa0ba902b7"
)

// A call over HTTP or MCP that carries the agent's traceparent is a child
// of the agent's span, in the agent's trace.
func TestParentFromTheAgent(t *testing.T) {
	h := newHarness(t, carmy.New().Tool(tools(nil)...))
	srv := httptest.NewServer(h.reg.Handler())
	defer srv.Close()
	traceparent := "00-" + agentTrace + "-" + agentSpan + "-01"

	tests := []struct {
		name string
		call func(t *testing.T)
	}{
		{"HTTP traceparent header", func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/tools/save", strings.NewReader(`{"id":"a"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", traceparent)
			req.Header.Set("tracestate", "agent=1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}},
		{"MCP _meta traceparent", func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
			s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "save", Arguments: map[string]any{"id": "a"},
				Meta: mcp.Meta{"traceparent": traceparent, "tracestate": "agent=1"}})
			if err != nil || res.IsError {
				t.Fatalf("CallTool: %+v, %v", res, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.spans.Reset()
			tt.call(t)
			// Over MCP the conventions' server span is the outer one, the
			// execute_tool span its child.
			s, inner := outerSpan(t, h)
			if inner != nil && inner.Parent.SpanID() != s.SpanContext.SpanID() {
				t.Errorf("the execute_tool span's parent is %s, not the MCP span %s", inner.Parent.SpanID(), s.SpanContext.SpanID())
			}
			if s.SpanContext.TraceID().String() != agentTrace || s.Parent.SpanID().String() != agentSpan || !s.Parent.IsRemote() {
				t.Errorf("span in trace %s with parent %s (remote %v); want trace %s, parent %s", s.SpanContext.TraceID(), s.Parent.SpanID(), s.Parent.IsRemote(), agentTrace, agentSpan)
			}
			if got := s.Parent.TraceState().Get("agent"); got != "1" {
				t.Errorf("tracestate agent=%q", got)
			}
		})
	}
}

// A span already in the context (a host's HTTP server span, an agent in
// the same process) is the parent when it is local and in the caller's
// trace, or when the caller sent no trace context.
func TestParentFromTheContext(t *testing.T) {
	h := newHarness(t, carmy.New().Tool(tools(nil)...))
	tracer := h.tp.Tracer("host")
	other := "00-11111111111111111111111111111111-2222222222222222-01"
	remote, _ := trace.TraceIDFromHex(agentTrace)
	remoteSpan, _ := trace.SpanIDFromHex(agentSpan)
	inAgentTrace := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: remote, SpanID: remoteSpan, TraceFlags: trace.FlagsSampled, Remote: true}))

	tests := []struct {
		name       string
		base       context.Context
		md         map[string]string
		wantParent string // "local" or a span id
	}{
		{"local span, no trace context sent", context.Background(), nil, "local"},
		{"local span in the caller's trace", inAgentTrace, map[string]string{carmy.MetaTraceparent: "00-" + agentTrace + "-" + agentSpan + "-01"}, "local"},
		{"local span in another trace", context.Background(), map[string]string{carmy.MetaTraceparent: other}, "2222222222222222"},
		{"malformed traceparent", context.Background(), map[string]string{carmy.MetaTraceparent: "garbage"}, "local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, local := tracer.Start(tt.base, "host")
			h.spans.Reset()
			if _, err := h.reg.Execute(ctx, carmy.Call{Tool: "save", Input: json.RawMessage(`{"id":"a"}`), Metadata: tt.md}); err != nil {
				t.Fatal(err)
			}
			local.End()
			var s tracetest.SpanStub
			for _, sp := range h.spans.GetSpans() {
				if sp.Name == "execute_tool save" {
					s = sp
				}
			}
			want := tt.wantParent
			if want == "local" {
				want = local.SpanContext().SpanID().String()
			}
			if got := s.Parent.SpanID().String(); got != want {
				t.Errorf("parent %s, want %s", got, want)
			}
		})
	}
}

// The tool's own spans are children of the call's span.
func TestToolSpansNest(t *testing.T) {
	var tp *sdktrace.TracerProvider
	inner := carmy.Tool(func(ctx context.Context) error {
		_, s := tp.Tracer("tool").Start(ctx, "query")
		s.End()
		return nil
	}, carmy.Read, carmy.Name("inner"), carmy.Register(false))
	h := newHarness(t, carmy.New().Tool(inner))
	tp = h.tp
	if _, err := h.reg.Execute(context.Background(), carmy.Call{Tool: "inner"}); err != nil {
		t.Fatal(err)
	}
	spans := h.spans.GetSpans()
	if len(spans) != 2 || spans[0].Name != "query" || spans[0].Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Fatalf("spans %+v", spans)
	}
}

// A call over MCP gets the span of the MCP conventions, of kind server,
// named "tools/call <tool>", the parent of the execute_tool span, and its
// duration in mcp.server.operation.duration; a call of the HTTP API gets
// neither.
func TestMCPServerSpan(t *testing.T) {
	h := newHarness(t, carmy.New().Tool(tools(nil)...))
	srv := httptest.NewServer(h.reg.Handler())
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		version string
		session bool
	}{
		{"2025-11-25", true},
		{"2026-07-28", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			h.spans.Reset()
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
			var opts *mcp.ClientSessionOptions
			if tc.session {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: tc.version}
			}
			s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, tool := range []string{"save", "find"} {
				h.spans.Reset()
				if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": "a"}}); err != nil {
					t.Fatal(err)
				}
				server, inner := outerSpan(t, h)
				if inner == nil || inner.Name != "execute_tool "+tool || inner.Parent.SpanID() != server.SpanContext.SpanID() {
					t.Fatalf("no execute_tool span under the MCP span: %+v", inner)
				}
				if server.Name != "tools/call "+tool || server.SpanKind != trace.SpanKindServer {
					t.Errorf("span %q of kind %v", server.Name, server.SpanKind)
				}
				a := attrs(server)
				want := map[attribute.Key]string{
					otelcarmy.MCPMethodNameKey:      "tools/call",
					otelcarmy.MCPProtocolVersionKey: tc.version,
					otelcarmy.ToolNameKey:           tool,
					otelcarmy.NetworkTransportKey:   "tcp",
				}
				if tool == "find" {
					want[otelcarmy.ErrorTypeKey] = string(carmy.CodeNotFound)
				}
				for k, v := range want {
					if a[k].AsString() != v {
						t.Errorf("%s = %q, want %q", k, a[k].AsString(), v)
					}
				}
				if _, ok := a[otelcarmy.ErrorTypeKey]; ok && tool == "save" {
					t.Errorf("error.type on a success")
				}
				if id := a[otelcarmy.JSONRPCRequestIDKey].AsString(); id == "" {
					t.Error("no jsonrpc.request.id")
				}
				if sid := a[otelcarmy.MCPSessionIDKey].AsString(); (sid != "") != tc.session {
					t.Errorf("mcp.session.id %q with session=%v", sid, tc.session)
				}
			}
		})
	}

	h.spans.Reset()
	resp, err := http.Post(srv.URL+"/tools/save", "application/json", strings.NewReader(`{"id":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := h.lastSpan(t); s.Name != "execute_tool save" {
		t.Errorf("the HTTP API's call has span %q", s.Name)
	}

	seen := map[string]bool{}
	for _, dp := range secondsHistogram(t, h.reader, otelcarmy.MCPOperationMetric) {
		v, _ := dp.Attributes.Value(otelcarmy.MCPProtocolVersionKey)
		tool, _ := dp.Attributes.Value(otelcarmy.ToolNameKey)
		method, _ := dp.Attributes.Value(otelcarmy.MCPMethodNameKey)
		et, _ := dp.Attributes.Value(otelcarmy.ErrorTypeKey)
		seen[v.AsString()+"/"+method.AsString()+"/"+tool.AsString()+"/"+et.AsString()] = dp.Count == 1
	}
	for _, k := range []string{"2025-11-25/tools/call/save/", "2025-11-25/tools/call/find/not_found", "2026-07-28/tools/call/save/", "2026-07-28/tools/call/find/not_found"} {
		if !seen[k] {
			t.Errorf("no data point of one call for %s in %v", k, seen)
		}
	}
}

// TestMCPSessionDuration: every MCP session that ends, over streamable
// HTTP (deleted by its client) and over a single-client transport, is one
// data point of mcp.server.session.duration, with its protocol version and
// transport, lasting at least as long as the client kept it; the
// sessionless protocol has no session to record.
func TestMCPSessionDuration(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := carmy.New().Tool(tools(nil)...).OnMCPSessionEnd(otelcarmy.Sessions(otelcarmy.WithMeterProvider(mp))).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	ctx := context.Background()
	const held = 30 * time.Millisecond
	use := func(t *testing.T, tr mcp.Transport, opts *mcp.ClientSessionOptions) {
		t.Helper()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, tr, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "save", Arguments: map[string]any{"id": "a"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(held)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sessions := &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	use(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, sessions)
	use(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, nil) // sessionless
	clientT, serverT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- reg.ServeMCP(ctx, serverT) }()
	use(t, clientT, sessions)
	if err := <-served; err != nil {
		t.Fatal(err)
	}

	got := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, dp := range secondsHistogram(t, reader, otelcarmy.MCPSessionMetric) {
		v, _ := dp.Attributes.Value(otelcarmy.MCPProtocolVersionKey)
		tr, _ := dp.Attributes.Value(otelcarmy.NetworkTransportKey)
		proto, _ := dp.Attributes.Value("network.protocol.name")
		got[v.AsString()+"/"+tr.AsString()+"/"+proto.AsString()] = dp
	}
	for _, k := range []string{"2025-11-25/tcp/http", "2025-11-25/pipe/"} {
		dp, ok := got[k]
		if !ok || dp.Count != 1 || dp.Sum < held.Seconds() {
			t.Errorf("%s: %+v, want one session of at least %v (data points: %v)", k, dp, held, slices.Collect(maps.Keys(got)))
		}
	}
	if len(got) != 2 {
		t.Errorf("data points %v; the sessionless client has no session", slices.Collect(maps.Keys(got)))
	}
}

// secondsHistogram collects reader's metrics and returns the data points
// of the histogram named name, whose unit must be seconds.
func secondsHistogram(t *testing.T, reader *sdkmetric.ManualReader, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var points []metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("%s: unit %q", name, m.Unit)
			}
			points = append(points, m.Data.(metricdata.Histogram[float64]).DataPoints...)
		}
	}
	return points
}
