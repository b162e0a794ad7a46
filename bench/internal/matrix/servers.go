// Package matrix is the throughput matrix of bench/cmd/matrix: the servers
// compared (one per implementation name), the load that drives them over
// loopback, and the measures taken from /proc.
//
// Every server has the same trivial tool, create_order of the reference
// tools, behind streamable HTTP; carmy's also answer it on the HTTP API
// (POST /tools/create_order).
package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/bench"
	"github.com/carmy-dev/carmy/otelcarmy"
)

// The implementations a server can be, by name.
const (
	CarmyBare      = "carmy"           // the registry of the reference tool, nothing else
	CarmyGoverned  = "carmy-governed"  // a permission, a rate limit that never refuses, audit to a file, OpenTelemetry
	GoSDK          = "gosdk"           // go-sdk's stateful streamable HTTP handler (2025-11-25 sessions)
	GoSDKStateless = "gosdk-stateless" // go-sdk's stateless handler (the sessionless 2026-07-28)
	MCPGo          = "mcpgo"           // mcp-go's StreamableHTTPServer
)

// Impls are the implementation names, in the order the report lists them.
var Impls = []string{GoSDK, GoSDKStateless, MCPGo, CarmyBare, CarmyGoverned}

// Token is the bearer token a governed server's caller sends, and
// Permission the permission it grants, which the governed tool requires.
const (
	Token      = "matrix-bench-token"
	Permission = "orders:write"
)

// Tool, Input and Want are the tool every server serves, the arguments
// every call sends, and what a correct answer contains.
const (
	Tool  = "create_order"
	Input = bench.SmallInput
	Want  = `"order_id":8`
)

// Server is one implementation ready to serve.
type Server struct {
	Handler http.Handler
	MCPPath string // where its streamable HTTP endpoint is
	API     bool   // whether it also serves carmy's HTTP API
	close   func() error
}

// Close releases what the server holds (a registry, an audit file, the
// telemetry providers).
func (s *Server) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// NewServer returns the implementation named impl. auditPath is the file a
// governed carmy audits to.
func NewServer(impl, auditPath string) (*Server, error) {
	switch impl {
	case CarmyBare:
		reg, err := carmy.New().Tool(tool()).Build()
		if err != nil {
			return nil, err
		}
		return &Server{Handler: reg.Handler(), MCPPath: "/mcp", API: true, close: reg.Close}, nil
	case CarmyGoverned:
		return governed(auditPath)
	case GoSDK, GoSDKStateless:
		s, err := bench.GoSDKServer()
		if err != nil {
			return nil, err
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: impl == GoSDKStateless})
		return &Server{Handler: h, MCPPath: "/"}, nil
	case MCPGo:
		return &Server{Handler: mcpgo.NewStreamableHTTPServer(bench.MCPGoServer()), MCPPath: "/mcp"}, nil
	}
	return nil, fmt.Errorf("no implementation %q (want one of %v)", impl, Impls)
}

// tool is the reference tool for carmy, with the given options added.
func tool(opts ...carmy.Option) *carmy.ToolDef {
	return carmy.Tool(bench.CreateOrderFunc, carmy.Write, slices.Concat([]carmy.Option{
		carmy.Name(Tool), carmy.Description("Place a small order"), carmy.ParallelSafe(), carmy.Register(false),
	}, opts)...)
}

// governed is carmy with everything a production host turns on: the
// caller authenticated by a bearer token whose permission the tool
// requires, a rate limit that never refuses, every record audited to a
// file, and OpenTelemetry (spans batched to an exporter that drops them,
// metrics kept by a reader nobody reads: the SDK's whole cost, no export).
func governed(auditPath string) (*Server, error) {
	if auditPath == "" {
		return nil, errors.New("a governed server needs an audit file")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	reg, err := carmy.New().
		Tool(tool(carmy.Requires(Permission), carmy.RateLimit(1_000_000, time.Second))).
		Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(Token), Principal: "bench", Permissions: []string{Permission}})).
		AuditFile(auditPath).
		Use(otelcarmy.Middleware(otelcarmy.WithTracerProvider(tp), otelcarmy.WithMeterProvider(mp))).
		OnMCPSessionEnd(otelcarmy.Sessions(otelcarmy.WithMeterProvider(mp))).
		Build()
	if err != nil {
		return nil, err
	}
	return &Server{Handler: reg.Handler(), MCPPath: "/mcp", API: true, close: func() error {
		return errors.Join(reg.Close(), tp.Shutdown(context.Background()), mp.Shutdown(context.Background()))
	}}, nil
}

// Cell is one measurement of the matrix: an implementation on a door.
type Cell struct {
	Impl, Door string
}

// Cells are the matrix's cells: every implementation on every door it
// serves. go-sdk's stateful handler serves sessions, its stateless one the
// sessionless protocol (the stateful one does not answer it); mcp-go
// serves both; carmy serves both and its HTTP API.
func Cells() []Cell {
	var cells []Cell
	for _, impl := range Impls {
		for _, door := range Doors {
			if Serves(impl, door) {
				cells = append(cells, Cell{impl, door})
			}
		}
	}
	return cells
}

// Serves says whether an implementation serves a door.
func Serves(impl, door string) bool {
	switch impl {
	case GoSDK:
		return door == Sessions
	case GoSDKStateless:
		return door == Sessionless
	case MCPGo:
		return door != API
	}
	return true
}
