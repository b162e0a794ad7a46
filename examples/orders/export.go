package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/carmy-dev/carmy"
)

// ExportOrders is the input of export_orders. Every field is optional: {}
// exports every order.
type ExportOrders struct {
	// Status keeps only the orders with this status.
	Status *Status `json:"status" validate:"omitempty,oneof=placed cancelled" jsonschema:"description=Only orders with this status; omit for all"`
}

// Export is the output of export_orders.
type Export struct {
	// Orders is how many orders the export holds.
	Orders int `json:"orders" jsonschema:"description=How many orders were exported"`
	// CSV is the export: a header line, then one line per order.
	CSV string `json:"csv" jsonschema:"description=The orders as CSV with a header line"`
}

// DefaultExportPause is how long exporting one order takes in the example,
// standing in for a slow system the export reads from.
const DefaultExportPause = 500 * time.Millisecond

// exportOrdersTool is the example's long-running tool: a client runs it
// as a task (over HTTP, with Prefer: respond-async) and reads it back at
// /tasks/{id}, with its progress, while it runs.
var exportOrdersTool = carmy.Tool(exportOrders, carmy.Read,
	carmy.Description("Export orders as CSV, oldest first, optionally only those with one status. Slow: start it as a task and read it back."),
	carmy.Timeout(30*time.Minute),
	carmy.ParallelSafe(),
)

// exportOrders writes the orders as CSV, one at a time, reporting its
// progress after each. It stops when its call is cancelled.
func exportOrders(ctx carmy.Context, store carmy.State[*Store], in ExportOrders) (Export, error) {
	var status Status
	if in.Status != nil {
		status = *in.Status
	}
	orders := store.Value.List(status)
	var b strings.Builder
	b.WriteString("order_id,sku,quantity,status\n")
	for i, o := range orders {
		select {
		case <-ctx.Done():
			return Export{}, ctx.Err()
		case <-time.After(store.Value.ExportPause):
		}
		fmt.Fprintf(&b, "%d,%s,%d,%s\n", o.OrderID, csvField(o.SKU), o.Quantity, o.Status)
		ctx.Progress(float64(i+1), float64(len(orders)), fmt.Sprintf("exported order %d", o.OrderID))
	}
	return Export{Orders: len(orders), CSV: b.String()}, nil
}

// csvField quotes a field that holds a comma, a quote or a line break.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
