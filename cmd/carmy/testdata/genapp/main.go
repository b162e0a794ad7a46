// Command genapp is the fixture of carmy gen's end-to-end test: tools whose
// types carry doc comments in every place gen reads them. It prints its
// tools' metadata as JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"example.com/genapp/model"
	"github.com/carmy-dev/carmy"
)

// CreateOrder is the input of create_order.
type CreateOrder struct {
	// Product SKU, as printed on the box.
	SKU      string `json:"sku" validate:"required"`
	Quantity uint32 `json:"quantity" validate:"min=1,max=100"` // How many to order.
	// This comment loses to the tag.
	Note string `json:"note,omitempty" jsonschema:"description=Free text for the courier"`
	// Where to deliver.
	Ship model.Address `json:"ship"`
	// When the order is due; a time.Time, whose own doc comment stays out.
	Due    time.Time `json:"due"`
	Lines  []Line    `json:"lines,omitempty"`
	secret string    // unexported: not in the schema, not in the file
}

// The types of a grouped declaration each have their own comment.
type (
	// Line is one line of an order.
	Line struct {
		// Item number.
		Item int `json:"item"`
		// Status of the line.
		Status Status `json:"status"`
	}

	// Status is where an order stands.
	Status string

	// Order is the output of create_order.
	Order struct {
		// OrderID identifies the order.
		OrderID uint64 `json:"order_id"`
	}
)

// Page is one page of a listing; generic types are keyed by their declared
// name.
type Page[T any] struct {
	// Items on this page.
	Items []T `json:"items"`
	// Next is the cursor of the next page, empty on the last one.
	Next string `json:"next"`
}

// Item is one thing listed.
type Item struct {
	// Name of the item.
	Name string `json:"name"`
}

// ListInput is the input of list_items.
type ListInput struct {
	// Cursor from the previous page's next.
	Cursor string `json:"cursor,omitempty"`
}

var createOrderTool = carmy.Tool(createOrder, carmy.Write)

// Place an order for a product.
func createOrder(ctx context.Context, in CreateOrder) (Order, error) {
	return Order{OrderID: 1}, nil
}

var listTool = carmy.Tool(listItems[Item], carmy.Read)

// List the items, a page at a time.
func listItems[T any](ctx context.Context, in ListInput) (Page[T], error) {
	return Page[T]{}, nil
}

// Svc is a service whose methods are tools.
type Svc struct{}

// CancelInput is the input of cancel_order.
type CancelInput struct {
	// Order to cancel.
	OrderID uint64 `json:"order_id"`
}

// Cancel an order that has not shipped yet.
func (s *Svc) CancelOrder(ctx context.Context, in CancelInput) error { return nil }

// Tell whether the service is up.
func (Svc) Ping(ctx context.Context) (bool, error) { return true, nil }

var (
	svc           = &Svc{}
	cancelTool    = carmy.Tool(svc.CancelOrder, carmy.Destructive, carmy.Requires("orders:write", "orders:admin"))
	pingTool      = carmy.Tool(Svc.Ping, carmy.Read)
	describedTool = carmy.Tool(describedOne, carmy.None, carmy.Description("The option wins"))
)

// This doc comment loses to the Description option.
func describedOne() error { return nil }

// SumIn is the input of sum, a hand-written tool.
type SumIn struct {
	// Terms to add up.
	Terms []int `json:"terms"`
}

// SumOut is the output of sum.
type SumOut struct {
	Total int `json:"total"` // Total of the terms.
}

type sumHandler struct{}

func (sumHandler) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "sum", Effect: carmy.None}
}

func (sumHandler) Execute(ctx carmy.Context, in SumIn) (SumOut, error) {
	var out SumOut
	for _, t := range in.Terms {
		out.Total += t
	}
	return out, nil
}

// sumTool is hand-written: carmy.Impl is not registered automatically.
var sumTool = carmy.Impl[SumIn, SumOut](sumHandler{})

// Extra is a type whose schema the program asks for with carmy.SchemaFor.
type Extra struct {
	// Remark about the extra.
	Remark string `json:"remark"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "extra" {
		fmt.Println(string(carmy.SchemaFor[Extra]()))
		return
	}
	reg, err := carmy.App().Tool(sumTool).Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := json.MarshalIndent(reg.Tools(), "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
