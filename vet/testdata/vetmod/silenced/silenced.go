// Package silenced has findings, each silenced at its site (the rule of
// parts.Part in package parts): vet passes.
package silenced

import (
	"context"

	"github.com/carmy-dev/carmy"

	"example.com/vetmod/silenced/parts"
)

type Order struct {
	//carmy:ignore rule the description says it
	Ref  string     `json:"ref" validate:"startswith=ord_" jsonschema:"description=An order reference starting with ord_"`
	Qty  int        `json:"qty" validate:"ne=0" jsonschema:"description=A quantity other than 0"` //carmy:ignore rule described
	Part parts.Part `json:"part"`
}

var orderTool = carmy.Tool(order, carmy.Write)

func order(ctx context.Context, in Order) error { return nil }
