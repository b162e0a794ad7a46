// Package refusals declares a tool for each way Builder.Build refuses a
// tool or its types. TestRefusals builds each and runs the analyzer on this
// source: vet must report every refusal, or the test's table says why
// only the running program can know it.
package refusals

import (
	"context"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/carmy-dev/carmy"
)

// Inner is a struct the inputs below reach.
type Inner struct {
	A int `json:"a"`
}

// Name is a named string, embedded below.
type Name string

type hidden struct{ a int }

// XA and XB each have a field named x in JSON.
type (
	XA struct {
		A string `json:"x"`
	}
	XB struct {
		B string `json:"x"`
	}
)

// Raw has its own JSON encoding, whose schema only the program can derive.
type Raw struct{ V int }

// MarshalJSON encodes r.
func (r Raw) MarshalJSON() ([]byte, error) { return json.Marshal(r.V) }

// UnmarshalJSON decodes r.
func (r *Raw) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.V) }

// JSONSchema declares a schema that is not one.
func (Raw) JSONSchema() json.RawMessage { return json.RawMessage(`{"type": 5}`) }

// Store is a dependency no builder of the test provides.
type Store struct{}

func run[In any](ctx context.Context, in In) error { return nil }

func out[Out any](ctx context.Context, in Inner) (Out, error) {
	var o Out
	return o, nil
}

var r = carmy.Register(false)

// Tools are the declarations, by name.
var Tools = []*carmy.ToolDef{
	// Rules.
	carmy.Tool(run[struct {
		Force bool `json:"force" validate:"required"`
	}], carmy.Write, carmy.Name("required_bool"), r),
	carmy.Tool(run[struct {
		Count int `json:"count" validate:"required"`
	}], carmy.Write, carmy.Name("required_int"), r),
	carmy.Tool(run[struct {
		Wait time.Duration `json:"wait" validate:"required"`
	}], carmy.Write, carmy.Name("required_duration"), r),
	carmy.Tool(run[struct {
		Pair [2]Inner `json:"pair" validate:"required"`
	}], carmy.Write, carmy.Name("required_array"), r),
	carmy.Tool(run[struct {
		N int `json:"n" validate:"dive"`
	}], carmy.Write, carmy.Name("dive_scalar"), r),
	carmy.Tool(run[struct {
		A     int   `json:"a" validate:"eqcsfield=Inner.A"`
		Inner Inner `json:"inner"`
	}], carmy.Write, carmy.Name("cross_struct"), r),
	carmy.Tool(run[struct {
		L []int `json:"l" validate:"dive,eqfield=M"`
		M int   `json:"m"`
	}], carmy.Write, carmy.Name("dive_field"), r),
	carmy.Tool(run[struct {
		S string `json:"s" validate:"min=abc"`
	}], carmy.Write, carmy.Name("min_not_number"), r),
	carmy.Tool(run[struct {
		L []int `json:"l" validate:"min=1.5"`
	}], carmy.Write, carmy.Name("min_not_count"), r),
	carmy.Tool(run[struct {
		S string `json:"s" validate:"lt=0"`
	}], carmy.Write, carmy.Name("lt_zero_length"), r),
	carmy.Tool(run[struct {
		F float64 `json:"f" validate:"oneof=1 2"`
	}], carmy.Write, carmy.Name("oneof_float"), r),
	carmy.Tool(run[struct {
		N int `json:"n" validate:"oneof=a b"`
	}], carmy.Write, carmy.Name("oneof_not_int"), r),

	// jsonschema tags.
	carmy.Tool(run[struct {
		N int `json:"n" jsonschema:"nullable"`
	}], carmy.Write, carmy.Name("nullable_value"), r),
	carmy.Tool(run[struct {
		N int `json:"n" jsonschema:"bogus=1"`
	}], carmy.Write, carmy.Name("schema_keyword"), r),
	carmy.Tool(run[struct {
		N int `json:"n" jsonschema:"pattern=^a$"`
	}], carmy.Write, carmy.Name("schema_pattern_number"), r),
	carmy.Tool(run[struct {
		S string `json:"s" jsonschema:"minimum=1"`
	}], carmy.Write, carmy.Name("schema_minimum_string"), r),
	carmy.Tool(run[struct {
		S string `json:"s" jsonschema:"minLength=x"`
	}], carmy.Write, carmy.Name("schema_count"), r),
	carmy.Tool(run[struct {
		I Inner `json:"i" jsonschema:"enum=a"`
	}], carmy.Write, carmy.Name("enum_struct"), r),
	carmy.Tool(run[struct {
		N int `json:"n" jsonschema:"-"`
	}], carmy.Write, carmy.Name("schema_hides"), r),

	// Types.
	carmy.Tool(run[struct {
		C chan int `json:"c"`
	}], carmy.Write, carmy.Name("channel"), r),
	carmy.Tool(run[struct {
		F func() `json:"f"`
	}], carmy.Write, carmy.Name("func"), r),
	carmy.Tool(run[struct {
		Z complex128 `json:"z"`
	}], carmy.Write, carmy.Name("complex"), r),
	carmy.Tool(run[struct {
		P uintptr `json:"p"`
	}], carmy.Write, carmy.Name("uintptr"), r),
	carmy.Tool(run[struct {
		P unsafe.Pointer `json:"p"`
	}], carmy.Write, carmy.Name("unsafe_pointer"), r),
	carmy.Tool(run[struct {
		E error `json:"e"`
	}], carmy.Write, carmy.Name("interface_methods"), r),
	carmy.Tool(run[struct {
		M map[int]string `json:"m"`
	}], carmy.Write, carmy.Name("int_keys"), r),
	carmy.Tool(run[struct {
		H hidden `json:"h"`
	}], carmy.Write, carmy.Name("no_exported_fields"), r),
	carmy.Tool(run[struct {
		XA
		XB
	}], carmy.Write, carmy.Name("same_json_name"), r),
	carmy.Tool(run[struct {
		N int `json:"n,string"`
	}], carmy.Write, carmy.Name("json_string"), r),
	carmy.Tool(run[struct {
		N int `json:"n,bogus"`
	}], carmy.Write, carmy.Name("json_option"), r),
	carmy.Tool(run[struct {
		*Inner
	}], carmy.Write, carmy.Name("embedded_pointer"), r),
	carmy.Tool(run[struct {
		Name
	}], carmy.Write, carmy.Name("embedded_string"), r),
	carmy.Tool(run[struct {
		N int `json:"n" carmy:"bogus"`
	}], carmy.Write, carmy.Name("carmy_tag"), r),
	carmy.Tool(out[chan int], carmy.Read, carmy.Name("output_channel"), r),

	// Request ids.
	carmy.Tool(run[struct {
		ID int `json:"id" carmy:"request_id"`
	}], carmy.Write, carmy.Name("request_id_int"), r),
	carmy.Tool(run[struct {
		A string `json:"a" carmy:"request_id"`
		B string `json:"b" carmy:"request_id"`
	}], carmy.Write, carmy.Name("request_id_twice"), r),
	carmy.Tool(run[struct {
		In struct {
			ID string `json:"id" carmy:"request_id"`
		} `json:"in"`
	}], carmy.Write, carmy.Name("request_id_nested"), r),

	// What only the program knows.
	carmy.Tool(run[struct {
		R Raw `json:"r"`
	}], carmy.Write, carmy.Name("own_schema"), r),
	carmy.Tool(func(ctx context.Context, s carmy.State[*Store], in Inner) error { return nil }, carmy.Write, carmy.Name("state_missing"), r),
	carmy.Tool(run[Inner], carmy.Write, carmy.Name("bad_permission"), carmy.Requires(""), r),
}
