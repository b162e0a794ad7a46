// Package benchtools holds the reference tools of carmy's benchmarks, and
// the benchmarks shared by the root package and the bench module: one
// definition of the inputs, the hand-written floor and the rule costs, so
// that the two always measure the same work.
package benchtools

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-playground/validator/v10"

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
// one it only annotates (email, left to the validator).
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

// Varied returns n inputs of input's shape with other strings and numbers,
// so that a benchmark cycling through them measures a stream of calls, not
// the caches of one input repeated.
func Varied(input string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(strings.NewReplacer(
			"A-100", fmt.Sprintf("A-%d", 100+i),
			`"quantity":3`, fmt.Sprintf(`"quantity":%d`, 1+i%100),
			"cus_8f3a2b", fmt.Sprintf("cus_%06x", i*7919),
			"ada@example.com", fmt.Sprintf("ada%d@example.com", i),
			"leave at the door", fmt.Sprintf("leave at door %d", i),
			"po-2024-0001", fmt.Sprintf("po-2024-%04d", i),
		).Replace(input))
	}
	return out
}

// Floor is the hand-written equivalent of one carmy call: a strict decode
// (unknown members rejected), the validator, the call and the encoding of
// the output. It is the least any library can do for the same guarantees.
type Floor func(ctx context.Context, data []byte) ([]byte, error)

// Floors are the floors of the reference tools, by tool name.
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

// ToolSet is n functions, each taking an input type of its own, for
// benchmarks of building many tools.
type ToolSet struct {
	Types []reflect.Type
	Funcs []any
}

type buildOut struct {
	OK bool `json:"ok"`
}

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
	outType = reflect.TypeFor[buildOut]()
)

// NewToolSet makes n input types, distinct from every type made with
// another generation (it is in a tag), and a function taking each. Types
// made by reflect.StructOf are never freed.
func NewToolSet(generation string, n int) *ToolSet {
	s := &ToolSet{Types: make([]reflect.Type, n), Funcs: make([]any, n)}
	for i := range n {
		fields := []reflect.StructField{
			{Name: "ID", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(fmt.Sprintf(`json:"id" validate:"required" gen:"%s-%d"`, generation, i))},
			{Name: "Count", Type: reflect.TypeFor[int32](), Tag: `json:"count" validate:"min=0,max=1000"`},
			{Name: "Labels", Type: reflect.TypeFor[[]string](), Tag: `json:"labels,omitempty" validate:"max=8,dive,max=20"`},
		}
		if i%2 == 0 {
			fields = append(fields, reflect.StructField{Name: "Note", Type: reflect.TypeFor[*string](), Tag: `json:"note"`})
		}
		if i%3 == 0 {
			fields = append(fields, reflect.StructField{Name: "Kind", Type: reflect.TypeFor[string](), Tag: `json:"kind" validate:"oneof=a b c"`})
		}
		in := reflect.StructOf(fields)
		ft := reflect.FuncOf([]reflect.Type{ctxType, in}, []reflect.Type{outType, errType}, false)
		s.Types[i] = in
		s.Funcs[i] = reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			return []reflect.Value{reflect.ValueOf(buildOut{OK: true}), reflect.Zero(errType)}
		}).Interface()
	}
	return s
}

// Callers8 is the parallelism that makes b.RunParallel use 8 goroutines.
func Callers8() int {
	p := runtime.GOMAXPROCS(0)
	return (8 + p - 1) / p
}

// Rules measures what carmy's runtime rules cost on the small tool: a
// plain call, an idempotent first call (a new request id each time), an
// idempotent replay (the same request id and input), a tool that is not
// parallel-safe, and both under 8 concurrent callers.
func Rules(b *testing.B) {
	parallel := carmy.Tool(CreateOrderFunc, carmy.Write, carmy.Name("parallel"), carmy.ParallelSafe(), carmy.Register(false))
	serial := carmy.Tool(CreateOrderFunc, carmy.Write, carmy.Name("serialized"), carmy.Register(false))
	// A benchmark makes more first calls in a second than the default
	// store keeps within its window; a window of a millisecond lets their
	// records be evicted, as a long-lived host's old records are, instead
	// of refusing the benchmark's calls for capacity.
	reg, err := carmy.New().Tool(parallel, serial).IdempotencyWindow(time.Millisecond).Build()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Close() })
	ctx := context.Background()
	input := []byte(SmallInput)
	run := func(b *testing.B, c carmy.Call) {
		if _, err := reg.Execute(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("rule=plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "parallel", Input: input})
		}
	})
	b.Run("rule=idempotent-first", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "first-" + strconv.Itoa(i)})
		}
	})
	b.Run("rule=idempotent-replay", func(b *testing.B) {
		run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "replay"})
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "parallel", Input: input, RequestID: "replay"})
		}
	})
	b.Run("rule=serialized", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run(b, carmy.Call{Tool: "serialized", Input: input})
		}
	})
	for _, name := range []string{"parallel", "serialized"} {
		b.Run("rule="+name+"-8callers", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(Callers8())
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := reg.Execute(ctx, carmy.Call{Tool: name, Input: input}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
