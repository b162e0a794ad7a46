package main

//go:generate go tool carmy gen

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/carmy-dev/carmy"
)

// Status is where an order stands: "placed" or "cancelled".
type Status string

// The statuses of an order.
const (
	StatusPlaced    Status = "placed"
	StatusCancelled Status = "cancelled"
)

// Order is an order as the tools return it.
type Order struct {
	// OrderID identifies the order; the store numbers orders from 1.
	OrderID uint64 `json:"order_id" jsonschema:"description=Identifies the order"`
	// SKU is the product ordered.
	SKU string `json:"sku" jsonschema:"description=Product SKU"`
	// Quantity is how many units were ordered.
	Quantity uint32 `json:"quantity" jsonschema:"description=Units ordered"`
	// Note is the customer's note, null when they left none.
	Note *string `json:"note" jsonschema:"description=The customer's note or null"`
	// Status is placed or cancelled.
	Status Status `json:"status" validate:"oneof=placed cancelled" jsonschema:"description=placed or cancelled"`
	// PlacedBy is the principal that placed the order, "" when the caller
	// was not authenticated.
	PlacedBy string `json:"placed_by" jsonschema:"description=Who placed the order; empty when the caller was anonymous"`
	// CancelReason says why the order was cancelled, null while it is
	// placed.
	CancelReason *string `json:"cancel_reason" jsonschema:"description=Why the order was cancelled (null while placed)"`
}

// Store is an in-memory order store, safe for concurrent use. The tools
// receive it as carmy.State[*Store]; a real application would put a
// database handle there instead.
type Store struct {
	// ExportPause is how long export_orders takes per order.
	ExportPause time.Duration

	mu     sync.Mutex
	last   uint64
	orders map[uint64]Order
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{orders: map[uint64]Order{}, ExportPause: DefaultExportPause}
}

// Place stores a new order and returns it.
func (s *Store) Place(in CreateOrder, placedBy string) Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	o := Order{OrderID: s.last, SKU: in.SKU, Quantity: in.Quantity, Note: in.Note, Status: StatusPlaced, PlacedBy: placedBy}
	s.orders[o.OrderID] = o
	return o
}

// Get returns the order with the id, and false when there is none.
func (s *Store) Get(id uint64) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	return o, ok
}

// List returns the orders with the status (every order when status is
// ""), oldest first.
func (s *Store) List(status Status) []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Order
	for _, o := range s.orders {
		if status == "" || o.Status == status {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Order) int { return cmp.Compare(a.OrderID, b.OrderID) })
	return out
}

// Cancel marks a placed order cancelled. It fails with not_found when the
// order does not exist and conflict when it is already cancelled: both are
// *carmy.Error values, so the caller sees the code and the message.
func (s *Store) Cancel(id uint64, reason string) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Order{}, notFound(id)
	}
	if o.Status == StatusCancelled {
		return Order{}, carmy.Errorf(carmy.CodeConflict, "order %d is already cancelled", id)
	}
	o.Status, o.CancelReason = StatusCancelled, &reason
	s.orders[id] = o
	return o, nil
}

func notFound(id uint64) *carmy.Error {
	return carmy.Errorf(carmy.CodeNotFound, "order %d does not exist; list_orders shows the orders there are", id)
}

// CreateOrder is the input of create_order.
type CreateOrder struct {
	// SKU is the product's stock-keeping unit, such as "A-100".
	SKU string `json:"sku" validate:"required,max=32" jsonschema:"description=Product SKU such as A-100"`
	// Quantity is how many units to order, 1 to 100.
	Quantity uint32 `json:"quantity" validate:"min=1,max=100" jsonschema:"description=Units to order"`
	// Note is an optional note for the warehouse.
	Note *string `json:"note" validate:"omitempty,max=200" jsonschema:"description=Optional note for the warehouse"`
}

// GetOrder is the input of get_order.
type GetOrder struct {
	// OrderID is the order to read.
	OrderID uint64 `json:"order_id" validate:"min=1" jsonschema:"description=The order to read"`
}

// ListOrders is the input of list_orders. Every field is optional: {}
// lists every order.
type ListOrders struct {
	// Status keeps only the orders with this status.
	Status *Status `json:"status" validate:"omitempty,oneof=placed cancelled" jsonschema:"description=Only orders with this status; omit for all"`
}

// CancelOrder is the input of cancel_order.
type CancelOrder struct {
	// OrderID is the order to cancel.
	OrderID uint64 `json:"order_id" validate:"min=1" jsonschema:"description=The order to cancel"`
	// Reason says why, for the customer and the records.
	Reason string `json:"reason" validate:"required,max=200" jsonschema:"description=Why the order is cancelled"`
}

// The tools of the example. Each is declared once, at package level, next
// to its function; newRegistry puts them together.
var (
	// An agent in a loop must not place a thousand orders a minute: each
	// principal may place 20 a minute (a burst of 20, then one every 3 s)
	// with at most 2 being placed at once. A call past either limit is
	// refused with rate_limited, telling the model when to call again.
	createOrderTool = carmy.Tool(createOrder, carmy.Write,
		carmy.Description("Place an order for a product. Returns the new order with its order_id."),
		carmy.ParallelSafe(),
		carmy.RateLimit(createOrderRate, time.Minute),
		carmy.MaxInFlight(2),
	)
	getOrderTool = carmy.Tool(getOrder, carmy.Read,
		carmy.Description("Read one order by its order_id."),
		carmy.Idempotent(),
		carmy.ParallelSafe(),
	)
	listOrdersTool = carmy.Tool(listOrders, carmy.Read,
		carmy.Description("List orders, oldest first, optionally only those with one status."),
		carmy.ParallelSafe(),
	)
	cancelOrderTool = carmy.Tool(cancelOrder, carmy.Destructive,
		carmy.Description("Cancel a placed order. The user must confirm: the call needs the permission confirm:cancel_order."),
		carmy.RequireConfirmation(),
	)
	whoamiTool = carmy.Tool(whoami, carmy.Read,
		carmy.Description("Tell who the caller is authenticated as; null when nobody is."),
		carmy.ParallelSafe(),
	)
)

// createOrderRate is how many orders one principal may place a minute.
const createOrderRate = 20

// tools lists every tool of the example, in the order main shows them.
var tools = []*carmy.ToolDef{createOrderTool, getOrderTool, listOrdersTool, cancelOrderTool, whoamiTool, exportOrdersTool}

// newBuilder collects the example's tools over a store. main serves what it
// builds to agents; the tests and the demo call the registry from Go.
func newBuilder(store *Store) *carmy.Builder {
	return carmy.New().Tool(tools...).State(store)
}

// newRegistry builds the registry of the example's tools over a store.
func newRegistry(store *Store) (*carmy.Registry, error) {
	return newBuilder(store).Build()
}

// createOrder places an order. It records who placed it from the call's
// carmy.Context.
func createOrder(ctx carmy.Context, store carmy.State[*Store], in CreateOrder) (Order, error) {
	return store.Value.Place(in, ctx.Principal), nil
}

// getOrder reads one order. A tool that needs only cancellation takes a
// plain context.Context.
func getOrder(ctx context.Context, store carmy.State[*Store], in GetOrder) (Order, error) {
	o, ok := store.Value.Get(in.OrderID)
	if !ok {
		return Order{}, notFound(in.OrderID)
	}
	return o, nil
}

// listOrders lists orders. It needs no context at all. With no orders it
// returns a nil slice, which carmy sends as [], as the schema says.
func listOrders(store carmy.State[*Store], in ListOrders) ([]Order, error) {
	var status Status
	if in.Status != nil {
		status = *in.Status
	}
	return store.Value.List(status), nil
}

// cancelOrder cancels a placed order. carmy runs it only for callers that
// hold the permission confirm:cancel_order (or confirm:cancel_order:<digest>
// for this very input), and never two at once, since it is not
// ParallelSafe.
func cancelOrder(ctx carmy.Context, store carmy.State[*Store], in CancelOrder) (Order, error) {
	return store.Value.Cancel(in.OrderID, in.Reason)
}

// whoami returns the caller's principal, or nil (JSON null) when the host
// authenticated nobody. It takes no input: its input schema is an empty
// object and {} (or nothing) calls it.
func whoami(ctx carmy.Context) (*string, error) {
	if ctx.Principal == "" {
		return nil, nil
	}
	p := ctx.Principal
	return &p, nil
}
