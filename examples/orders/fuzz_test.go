package main

import (
	"context"
	"errors"
	"testing"

	"github.com/carmy-dev/carmy"
)

// FuzzTools sends arbitrary inputs to every tool of the example. Whatever
// the input, a call either succeeds or fails with an error a caller can act
// on: never a panic, never internal, and an invalid input always says which
// field is wrong and how.
//
//	go test -run '^$' -fuzz FuzzTools -fuzztime 5m ./examples/orders
func FuzzTools(f *testing.F) {
	for _, seed := range []struct{ tool, input string }{
		{"create_order", `{"sku":"A-100","quantity":2,"note":"door"}`},
		{"create_order", `{"sku":"","quantity":0,"colour":"red"}`},
		{"create_order", `{"sku":"A","quantity":2.0e0}`},
		{"get_order", `{"order_id":1}`},
		{"get_order", `{"order_id":18446744073709551616}`},
		{"list_orders", `{"status":"placed"}`},
		{"list_orders", `{}`},
		{"cancel_order", `{"order_id":1,"reason":"x"}`},
		{"whoami", ``},
		{"whoami", `null`},
		{"create_ordr", `{}`},
	} {
		f.Add(seed.tool, []byte(seed.input), false)
		f.Add(seed.tool, []byte(seed.input), true)
	}
	allowed := map[carmy.Code]bool{
		carmy.CodeInvalidInput: true, carmy.CodeUnknownTool: true, carmy.CodeNotFound: true,
		carmy.CodeConflict: true, carmy.CodeConfirmationRequired: true,
	}
	f.Fuzz(func(t *testing.T, tool string, input []byte, confirmed bool) {
		reg, err := newRegistry(NewStore())
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		// An order to find and cancel, so that those paths run too.
		if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "create_order", Input: []byte(`{"sku":"S","quantity":1}`)}); err != nil {
			t.Fatal(err)
		}
		c := carmy.Call{Tool: tool, Input: input, Principal: "fuzz", RequestID: "r"}
		if confirmed {
			c.Permissions = []string{"confirm:cancel_order"}
		}
		res, err := reg.Execute(context.Background(), c)
		if err == nil {
			if len(res.Output) == 0 || res.ExecutionID == "" {
				t.Fatalf("success without output or execution id: %+v", res)
			}
			return
		}
		var e *carmy.Error
		if !errors.As(err, &e) {
			t.Fatalf("not a *carmy.Error: %v", err)
		}
		if !allowed[e.Code] || e.Message == "" {
			t.Fatalf("%s(%q): %v", tool, input, err)
		}
		if e.Code == carmy.CodeInvalidInput {
			if len(e.Fields) == 0 {
				t.Fatalf("invalid_input without fields: %v", err)
			}
			for _, fe := range e.Fields {
				if fe.Message == "" {
					t.Fatalf("a field error without a message: %v", err)
				}
			}
		}
	})
}
