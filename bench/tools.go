// Package bench compares carmy with the hand-written floor and with the two
// Go MCP libraries, github.com/modelcontextprotocol/go-sdk and
// github.com/mark3labs/mcp-go, on the same reference tools.
//
// It is a module of its own, so that the comparison libraries never enter
// the go.sum of carmy's users. The benchmarks are in bench_test.go; the
// command ./cmd/report runs them, summarizes them with benchstat and
// writes docs/benchmarks.md and its chart:
//
//	cd bench && go run ./cmd/report
//
// Every library gets the same two tools, with the same functions behind
// them: create_order, a small input of two fields, and place_order, a
// medium one of 16 fields with a nested struct, an optional one, a slice of
// structs, a map and validation rules. carmy derives the input schema and
// enforces the rules itself; go-sdk and mcp-go are given that same schema
// (carmy.SchemaFor), so that their own JSON Schema validators check the
// same rules.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/google/jsonschema-go/jsonschema"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/benchtools"
)

// The reference tools, defined once for the root package's benchmarks and
// this module's (internal/benchtools).
type (
	CreateOrder = benchtools.CreateOrder
	Order       = benchtools.Order
	PlaceOrder  = benchtools.PlaceOrder
	Address     = benchtools.Address
	LineItem    = benchtools.LineItem
	Placed      = benchtools.Placed
	Floor       = benchtools.Floor
)

// The functions behind the tools, and the floors of the tools by name.
var (
	CreateOrderFunc = benchtools.CreateOrderFunc
	PlaceOrderFunc  = benchtools.PlaceOrderFunc
	Floors          = benchtools.Floors
)

// The arguments every benchmark sends.
const (
	SmallInput  = benchtools.SmallInput
	MediumInput = benchtools.MediumInput
)

// Case is one reference tool.
type Case struct {
	Size  string // "small" or "medium"
	Tool  string // its name
	Input string // the arguments sent
}

// Cases are the reference tools, small first.
var Cases = []Case{
	{Size: "small", Tool: "create_order", Input: SmallInput},
	{Size: "medium", Tool: "place_order", Input: MediumInput},
}

// CarmyTools are the reference tools declared for carmy: writes whose calls
// may overlap, as the other libraries' calls do.
func CarmyTools() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(CreateOrderFunc, carmy.Write, carmy.Name("create_order"), carmy.Description("Place a small order"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(PlaceOrderFunc, carmy.Write, carmy.Name("place_order"), carmy.Description("Place an order"), carmy.ParallelSafe(), carmy.Register(false)),
	}
}

// CarmyRegistry builds a registry of the reference tools.
func CarmyRegistry() (*carmy.Registry, error) {
	return carmy.New().Tool(CarmyTools()...).Build()
}

// PlainHandler is a plain net/http handler doing the work of carmy's
// POST /tools/{name} by hand with the floor: route, read the body within a
// limit, decode, validate, call, encode, answer {"output": …}.
func PlainHandler() http.Handler {
	floors := Floors()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, req *http.Request) {
		floor, ok := floors[req.PathValue("name")]
		if !ok {
			http.Error(w, `{"error":"unknown tool"}`, http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 1<<20))
		if err != nil {
			http.Error(w, `{"error":"cannot read the body"}`, http.StatusBadRequest)
			return
		}
		out, err := floor(req.Context(), body)
		if err != nil {
			b, _ := json.Marshal(map[string]string{"error": err.Error()})
			http.Error(w, string(b), http.StatusBadRequest)
			return
		}
		b := make([]byte, 0, len(out)+12)
		b = append(append(append(b, `{"output":`...), out...), "}\n"...)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return mux
}

// GoSDKServer is an MCP server of the official SDK with the reference tools
// added by its typed mcp.AddTool. Each input schema is the one carmy
// derives, so that the SDK's validator checks the same rules; the output
// schemas are the SDK's own.
func GoSDKServer() (*mcp.Server, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, nil)
	small, err := sdkSchema(carmy.SchemaFor[CreateOrder]())
	if err != nil {
		return nil, err
	}
	medium, err := sdkSchema(carmy.SchemaFor[PlaceOrder]())
	if err != nil {
		return nil, err
	}
	mcp.AddTool(s, &mcp.Tool{Name: "create_order", Description: "Place a small order", InputSchema: small},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CreateOrder) (*mcp.CallToolResult, Order, error) {
			out, err := CreateOrderFunc(ctx, in)
			return nil, out, err
		})
	mcp.AddTool(s, &mcp.Tool{Name: "place_order", Description: "Place an order", InputSchema: medium},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PlaceOrder) (*mcp.CallToolResult, Placed, error) {
			out, err := PlaceOrderFunc(ctx, in)
			return nil, out, err
		})
	return s, nil
}

func sdkSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	s := new(jsonschema.Schema)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("carmy's schema as the SDK's: %w", err)
	}
	return s, nil
}

// MCPGoServer is an mcp-go server with input validation on and the
// reference tools as typed, structured handlers. Like go-sdk's, each input
// schema is the one carmy derives; the output schemas are mcp-go's own.
func MCPGoServer() *mcpgo.MCPServer {
	s := mcpgo.NewMCPServer("mcp-go", "1", mcpgo.WithToolCapabilities(false), mcpgo.WithInputSchemaValidation())
	s.AddTool(mcpgomcp.NewTool("create_order",
		mcpgomcp.WithDescription("Place a small order"),
		mcpgomcp.WithRawInputSchema(carmy.SchemaFor[CreateOrder]()),
		mcpgomcp.WithOutputSchema[Order](),
	), mcpgomcp.NewStructuredToolHandler(func(ctx context.Context, _ mcpgomcp.CallToolRequest, in CreateOrder) (Order, error) {
		return CreateOrderFunc(ctx, in)
	}))
	s.AddTool(mcpgomcp.NewTool("place_order",
		mcpgomcp.WithDescription("Place an order"),
		mcpgomcp.WithRawInputSchema(carmy.SchemaFor[PlaceOrder]()),
		mcpgomcp.WithOutputSchema[Placed](),
	), mcpgomcp.NewStructuredToolHandler(func(ctx context.Context, _ mcpgomcp.CallToolRequest, in PlaceOrder) (Placed, error) {
		return PlaceOrderFunc(ctx, in)
	}))
	return s
}

// MCPGoStdio serves s over a pair of streams, the way `mcp-go` serves
// stdio, until ctx is done or in ends. Its log goes nowhere.
func MCPGoStdio(ctx context.Context, s *mcpgo.MCPServer, in io.Reader, out io.Writer) error {
	srv := mcpgo.NewStdioServer(s)
	mcpgo.WithErrorLogger(log.New(io.Discard, "", 0))(srv)
	return srv.Listen(ctx, in, out)
}
