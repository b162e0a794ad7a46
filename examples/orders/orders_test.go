package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// setup builds the example's registry over a fresh store.
func setup(t *testing.T) (*carmy.Registry, *Store) {
	t.Helper()
	store := NewStore()
	reg, err := newRegistry(store)
	if err != nil {
		t.Fatalf("newRegistry: %v", err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg, store
}

// asError returns the *carmy.Error in err, failing the test when there is
// none or its code is not want.
func asError(t *testing.T, err error, want carmy.Code) *carmy.Error {
	t.Helper()
	var e *carmy.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want a *carmy.Error with code %s", err, want)
	}
	if e.Code != want {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, want)
	}
	return e
}

func fieldPaths(e *carmy.Error) []string {
	var paths []string
	for _, f := range e.Fields {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	return paths
}

var confirmCancel = carmy.WithPermissions("confirm:cancel_order")

func TestToolsMetadata(t *testing.T) {
	reg, _ := setup(t)
	type want struct {
		effect       carmy.Effect
		idempotent   bool
		parallelSafe bool
		confirmation carmy.Confirmation
	}
	wants := map[string]want{
		"create_order":  {carmy.Write, false, true, carmy.ConfirmationNone},
		"get_order":     {carmy.Read, true, true, carmy.ConfirmationNone},
		"list_orders":   {carmy.Read, true, true, carmy.ConfirmationNone},
		"cancel_order":  {carmy.Destructive, false, false, carmy.ConfirmationRequired},
		"whoami":        {carmy.Read, true, true, carmy.ConfirmationNone},
		"export_orders": {carmy.Read, true, true, carmy.ConfirmationNone},
	}
	var names []string
	for _, m := range reg.Tools() {
		names = append(names, m.Name)
		w, ok := wants[m.Name]
		if !ok {
			t.Errorf("unexpected tool %s", m.Name)
			continue
		}
		got := want{m.Effect, m.Idempotent, m.ParallelSafe, m.Confirmation}
		if got != w {
			t.Errorf("%s: metadata %+v, want %+v", m.Name, got, w)
		}
		if m.Description == "" {
			t.Errorf("%s has no description", m.Name)
		}
		for _, s := range []json.RawMessage{m.InputSchema, m.OutputSchema} {
			if !json.Valid(s) {
				t.Errorf("%s: schema %s is not JSON", m.Name, s)
			}
		}
	}
	if want := []string{"cancel_order", "create_order", "export_orders", "get_order", "list_orders", "whoami"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestCreateOrderSchema(t *testing.T) {
	reg, _ := setup(t)
	m, ok := reg.Lookup("create_order")
	if !ok {
		t.Fatal("create_order is missing")
	}
	var schema struct {
		Type                 string                     `json:"type"`
		Required             []string                   `json:"required"`
		AdditionalProperties bool                       `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(m.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || schema.AdditionalProperties {
		t.Errorf("schema %s: want a closed object", m.InputSchema)
	}
	// sku and quantity are required; note is a pointer: optional, nullable.
	if !slices.Equal(schema.Required, []string{"sku", "quantity"}) {
		t.Errorf("required = %v, want [sku quantity]", schema.Required)
	}
	if got := string(schema.Properties["quantity"]); !strings.Contains(got, `"minimum":1`) || !strings.Contains(got, `"maximum":100`) {
		t.Errorf("quantity schema %s: want minimum 1 and maximum 100 from validate:\"min=1,max=100\"", got)
	}
	if got := string(schema.Properties["note"]); !strings.Contains(got, `"type":["string","null"]`) {
		t.Errorf("note schema %s: want a nullable string", got)
	}
}

func TestCreateOrder(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	note := "leave at the door"
	o, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 3, Note: &note}, carmy.WithPrincipal("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if o.OrderID != 1 || o.SKU != "A-100" || o.Quantity != 3 || o.Status != StatusPlaced || o.PlacedBy != "alice" || o.Note == nil || *o.Note != note {
		t.Errorf("order = %+v", o)
	}
	if _, ok := store.Get(1); !ok {
		t.Error("the order is not in the store")
	}

	// The note may be left out or null; an anonymous caller places an order
	// that nobody placed.
	for _, input := range []string{`{"sku":"B-7","quantity":1}`, `{"sku":"B-7","quantity":1,"note":null}`} {
		o, err := carmy.Invoke[Order](ctx, reg, "create_order", json.RawMessage(input))
		if err != nil {
			t.Fatalf("%s: %v", input, err)
		}
		if o.Note != nil || o.PlacedBy != "" {
			t.Errorf("%s: order = %+v", input, o)
		}
	}
}

func TestCreateOrderInvalidInput(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	cases := []struct {
		input string
		paths []string
	}{
		{`{"sku":"","quantity":0,"colour":"red"}`, []string{"colour", "quantity", "sku"}},
		{`{"sku":"A-100","quantity":101}`, []string{"quantity"}},
		{`{"sku":"A-100","quantity":-1}`, []string{"quantity"}},
		{`{"sku":"A-100","quantity":1.5}`, []string{"quantity"}},
		{`{"sku":"A-100"}`, []string{"quantity"}},
		{`{"sku":null,"quantity":1}`, []string{"sku"}},
		{`{"SKU":"A-100","quantity":1}`, []string{"SKU", "sku"}}, // names are case-sensitive
		{`{"sku":"A-100","quantity":1,"note":"` + strings.Repeat("x", 201) + `"}`, []string{"note"}},
		{`{}`, []string{"quantity", "sku"}},
	}
	for _, c := range cases {
		_, err := carmy.Invoke[Order](ctx, reg, "create_order", json.RawMessage(c.input))
		e := asError(t, err, carmy.CodeInvalidInput)
		if got := fieldPaths(e); !slices.Equal(got, c.paths) {
			t.Errorf("%.60s: field paths %v, want %v (%v)", c.input, got, c.paths, err)
		}
		for _, f := range e.Fields {
			if f.Message == "" {
				t.Errorf("%.60s: field %s has no message", c.input, f.Path)
			}
		}
	}
	if got := store.List(""); len(got) != 0 {
		t.Errorf("invalid calls placed orders: %+v", got)
	}
}

func TestGetOrder(t *testing.T) {
	reg, _ := setup(t)
	ctx := context.Background()
	placed, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := carmy.Invoke[Order](ctx, reg, "get_order", GetOrder{OrderID: placed.OrderID})
	if err != nil {
		t.Fatal(err)
	}
	if got != placed {
		t.Errorf("get_order = %+v, want %+v", got, placed)
	}

	_, err = carmy.Invoke[Order](ctx, reg, "get_order", GetOrder{OrderID: 42})
	e := asError(t, err, carmy.CodeNotFound)
	if e.Retryable || !strings.Contains(e.Message, "42") {
		t.Errorf("not found error = %+v", e)
	}

	_, err = carmy.Invoke[Order](ctx, reg, "get_order", GetOrder{OrderID: 0})
	if e := asError(t, err, carmy.CodeInvalidInput); !slices.Equal(fieldPaths(e), []string{"order_id"}) {
		t.Errorf("order_id 0: %v", err)
	}
}

func TestListOrders(t *testing.T) {
	reg, _ := setup(t)
	ctx := context.Background()

	// No orders: the output is [], not null.
	raw, err := carmy.Invoke[json.RawMessage](ctx, reg, "list_orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != "[]" {
		t.Errorf("empty list_orders = %s, want []", raw)
	}

	for _, sku := range []string{"A", "B", "C"} {
		if _, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: sku, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := carmy.Invoke[Order](ctx, reg, "cancel_order", CancelOrder{OrderID: 2, Reason: "test"}, confirmCancel); err != nil {
		t.Fatal(err)
	}

	skus := func(os []Order) string {
		var s []string
		for _, o := range os {
			s = append(s, o.SKU)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		input any
		want  string
	}{
		{nil, "A,B,C"},
		{json.RawMessage(`{"status":null}`), "A,B,C"},
		{json.RawMessage(`{"status":"placed"}`), "A,C"},
		{json.RawMessage(`{"status":"cancelled"}`), "B"},
	} {
		got, err := carmy.Invoke[[]Order](ctx, reg, "list_orders", c.input)
		if err != nil {
			t.Fatalf("%s: %v", c.input, err)
		}
		if skus(got) != c.want {
			t.Errorf("list_orders %s = %s, want %s", c.input, skus(got), c.want)
		}
	}

	_, err = carmy.Invoke[[]Order](ctx, reg, "list_orders", json.RawMessage(`{"status":"shipped"}`))
	if e := asError(t, err, carmy.CodeInvalidInput); !slices.Equal(fieldPaths(e), []string{"status"}) {
		t.Errorf("status shipped: %v", err)
	}
}

func TestCancelOrder(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	placed, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := CancelOrder{OrderID: placed.OrderID, Reason: "changed my mind"}
	got, err := carmy.Invoke[Order](ctx, reg, "cancel_order", in, confirmCancel)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusCancelled || got.CancelReason == nil || *got.CancelReason != in.Reason {
		t.Errorf("cancelled order = %+v", got)
	}
	if o, _ := store.Get(placed.OrderID); o.Status != StatusCancelled {
		t.Errorf("stored order = %+v", o)
	}

	// Cancelling again contradicts the order's state.
	_, err = carmy.Invoke[Order](ctx, reg, "cancel_order", in, confirmCancel)
	asError(t, err, carmy.CodeConflict)

	_, err = carmy.Invoke[Order](ctx, reg, "cancel_order", CancelOrder{OrderID: 42, Reason: "x"}, confirmCancel)
	asError(t, err, carmy.CodeNotFound)

	_, err = carmy.Invoke[Order](ctx, reg, "cancel_order", json.RawMessage(`{"order_id":1}`), confirmCancel)
	if e := asError(t, err, carmy.CodeInvalidInput); !slices.Equal(fieldPaths(e), []string{"reason"}) {
		t.Errorf("missing reason: %v", err)
	}
}

// TestCancelOrderNeedsConfirmation checks that cancel_order runs only for
// callers granted confirm:cancel_order, or confirm:cancel_order:<digest>
// for the very input the user approved.
func TestCancelOrderNeedsConfirmation(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	placed, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := CancelOrder{OrderID: placed.OrderID, Reason: "x"}
	_, err = carmy.Invoke[Order](ctx, reg, "cancel_order", in,
		carmy.WithPermissions("confirm:get_order", "confirm:cancel_orders", "Confirm:cancel_order"))
	e := asError(t, err, carmy.CodeConfirmationRequired)
	if o, _ := store.Get(placed.OrderID); o.Status != StatusPlaced {
		t.Fatalf("the order was cancelled without confirmation: %+v", o)
	}
	digest, _ := e.Details["digest"].(string)
	if digest == "" {
		t.Fatalf("confirmation_required without a digest: %+v", e)
	}

	// A grant for another input does not do.
	other := CancelOrder{OrderID: placed.OrderID, Reason: "y"}
	_, err = carmy.Invoke[Order](ctx, reg, "cancel_order", other, carmy.WithPermissions("confirm:cancel_order:"+digest))
	asError(t, err, carmy.CodeConfirmationRequired)

	// The grant bound to this input does.
	got, err := carmy.Invoke[Order](ctx, reg, "cancel_order", in, carmy.WithPermissions("confirm:cancel_order:"+digest))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusCancelled {
		t.Errorf("order = %+v, want cancelled", got)
	}
}

// TestCreateOrderRequestID checks that a retried call with the same request
// id places one order, not two.
func TestCreateOrderRequestID(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	call := carmy.Call{Tool: "create_order", Input: json.RawMessage(`{"sku":"A-100","quantity":1}`), RequestID: "req-1", Principal: "alice"}
	first, err := reg.Execute(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	again, err := reg.Execute(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.ExecutionID != first.ExecutionID || string(again.Output) != string(first.Output) {
		t.Errorf("retry = %+v, want the replay of %+v", again, first)
	}
	if n := len(store.List("")); n != 1 {
		t.Errorf("%d orders placed, want 1", n)
	}

	call.Input = json.RawMessage(`{"sku":"A-100","quantity":2}`)
	_, err = reg.Execute(ctx, call)
	asError(t, err, carmy.CodeConflict)
}

func TestWhoami(t *testing.T) {
	reg, _ := setup(t)
	ctx := context.Background()
	who, err := carmy.Invoke[*string](ctx, reg, "whoami", nil, carmy.WithPrincipal("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if who == nil || *who != "alice" {
		t.Errorf("whoami as alice = %v", who)
	}

	who, err = carmy.Invoke[*string](ctx, reg, "whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if who != nil {
		t.Errorf("whoami anonymous = %q, want nil", *who)
	}

	res, err := reg.Execute(ctx, carmy.Call{Tool: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "null" || res.ExecutionID == "" {
		t.Errorf("whoami result = %+v, want output null and an execution id", res)
	}

	_, err = carmy.Invoke[*string](ctx, reg, "whoami", json.RawMessage(`{"principal":"root"}`))
	asError(t, err, carmy.CodeInvalidInput)
}

func TestUnknownTool(t *testing.T) {
	reg, _ := setup(t)
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: "create_ordr"})
	e := asError(t, err, carmy.CodeUnknownTool)
	if !strings.Contains(e.Message, `"create_order"`) {
		t.Errorf("message %q does not suggest create_order", e.Message)
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"cancel_order   destructive",
		`ok: "alice"`,
		"ok: null",
		"invalid_input: ",
		"    sku: ",
		"    colour: ",
		"not_found: order 42",
		"confirmation_required: ",
		"details.digest: ",
		`unknown_tool: unknown tool "create_ordr"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Each principal may place createOrderRate orders a minute; the next call
// is refused, in words a model acts on, and another principal is not.
func TestCreateOrderRateLimit(t *testing.T) {
	reg, store := setup(t)
	ctx := context.Background()
	for i := range createOrderRate {
		if _, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1}, carmy.WithPrincipal("loop-agent")); err != nil {
			t.Fatalf("order %d = %v", i+1, err)
		}
	}
	_, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1}, carmy.WithPrincipal("loop-agent"))
	e := asError(t, err, carmy.CodeRateLimited)
	if !e.Retryable || !strings.Contains(e.Message, "call create_order again in 3 s") {
		t.Errorf("refusal %v; want it retryable, telling the model to wait 3 s", e)
	}
	if n := len(store.List("")); n != createOrderRate {
		t.Errorf("%d orders placed; want %d", n, createOrderRate)
	}
	if _, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-100", Quantity: 1}, carmy.WithPrincipal("alice")); err != nil {
		t.Errorf("alice's order = %v; the loop agent's limit is not hers", err)
	}
}
