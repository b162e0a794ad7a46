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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-playground/validator/v10"
	"github.com/google/jsonschema-go/jsonschema"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// CreateOrder is the small input.
type CreateOrder struct {
	SKU      string `json:"sku" validate:"required"`
	Quantity uint32 `json:"quantity" validate:"min=1,max=100"`
}

// Order is the small output.
type Order struct {
	OrderID uint64 `json:"order_id"`
}

// CreateOrderFunc is the function behind create_order.
func CreateOrderFunc(_ context.Context, in CreateOrder) (Order, error) {
	return Order{OrderID: uint64(len(in.SKU)) + uint64(in.Quantity)}, nil
}

// PlaceOrder is the medium input: 16 fields, a nested struct, a pointer to
// one, a slice of structs and a map, with rules JSON Schema can state and
// one it only annotates (email).
type PlaceOrder struct {
	CustomerID string             `json:"customer_id" validate:"required"`
	Email      string             `json:"email" validate:"required,email"`
	Currency   string             `json:"currency" validate:"oneof=EUR USD GBP"`
	Shipping   Address            `json:"shipping"`
	Billing    *Address           `json:"billing,omitempty"`
	Items      []LineItem         `json:"items" validate:"min=1,max=50,dive"`
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

// Address is nested in PlaceOrder.
type Address struct {
	Street  string `json:"street" validate:"required"`
	City    string `json:"city" validate:"required"`
	Country string `json:"country" validate:"len=2"`
	Zip     string `json:"zip,omitempty" validate:"max=10"`
}

// LineItem is an element of PlaceOrder.Items.
type LineItem struct {
	SKU        string `json:"sku" validate:"required"`
	Quantity   uint32 `json:"quantity" validate:"min=1,max=100"`
	PriceCents int64  `json:"price_cents" validate:"gte=0"`
}

// Placed is the medium output.
type Placed struct {
	OrderID    uint64     `json:"order_id"`
	TotalCents int64      `json:"total_cents"`
	Currency   string     `json:"currency"`
	Lines      []LineItem `json:"lines"`
	ShipTo     Address    `json:"ship_to"`
	Gift       bool       `json:"gift"`
}

// PlaceOrderFunc is the function behind place_order.
func PlaceOrderFunc(_ context.Context, in PlaceOrder) (Placed, error) {
	var total int64
	for _, it := range in.Items {
		total += int64(it.Quantity) * it.PriceCents
	}
	return Placed{OrderID: 42, TotalCents: total, Currency: in.Currency, Lines: in.Items, ShipTo: in.Shipping, Gift: in.Gift}, nil
}

// The arguments every benchmark sends.
const (
	SmallInput  = `{"sku":"A-100","quantity":3}`
	MediumInput = `{"customer_id":"cus_8f3a2b","email":"ada@example.com","currency":"EUR",` +
		`"shipping":{"street":"1 Analytical Way","city":"London","country":"GB","zip":"N1 9GU"},` +
		`"billing":{"street":"12 Engine Row","city":"London","country":"GB"},` +
		`"items":[{"sku":"A-100","quantity":2,"price_cents":1299},{"sku":"B-220","quantity":1,"price_cents":4999},{"sku":"C-031","quantity":5,"price_cents":250}],` +
		`"priority":3,"gift":true,"note":"leave at the door","tags":["spring","promo"],"channel":"web",` +
		`"discount":0.1,"attempt":1,"reference":"po-2024-0001"}`
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

// Floor is the hand-written equivalent of one carmy call: a strict decode
// (unknown members rejected), the validator, the call and the encoding of
// the output. It is the least any library can do for the same guarantees.
type Floor func(ctx context.Context, data []byte) ([]byte, error)

// Floors are the floors of the reference tools, by name.
func Floors() map[string]Floor {
	v := validator.New()
	return map[string]Floor{
		"create_order": floorOf(v, CreateOrderFunc),
		"place_order":  floorOf(v, PlaceOrderFunc),
	}
}

func floorOf[In, Out any](v *validator.Validate, fn func(context.Context, In) (Out, error)) Floor {
	return func(ctx context.Context, data []byte) ([]byte, error) {
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
