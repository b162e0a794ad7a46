package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/carmy-dev/carmy"
)

// Remind is the input of remind.
type Remind struct {
	Text string `json:"text" validate:"required"`
	// How long from now.
	In time.Duration `json:"in"`
}

// Reminder is the output of remind.
type Reminder struct {
	Text  string        `json:"text"`
	After time.Duration `json:"after"`
}

func remind(_ context.Context, in Remind) (Reminder, error) {
	return Reminder{Text: in.Text, After: in.In}, nil
}

// A time.Duration travels as a string in Go's syntax, in inputs and
// outputs alike.
func ExampleInvoke_duration() {
	reg, err := carmy.New().Tool(carmy.Tool(remind, carmy.Write, carmy.Register(false))).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	ctx := context.Background()

	res, err := reg.Execute(ctx, carmy.Call{Tool: "remind", Input: json.RawMessage(`{"text":"stretch","in":"1h30m"}`)})
	fmt.Println(string(res.Output), err)

	out, err := carmy.Invoke[Reminder](ctx, reg, "remind", Remind{Text: "tea", In: 250 * time.Millisecond})
	fmt.Println(out.After, err)

	_, err = reg.Execute(ctx, carmy.Call{Tool: "remind", Input: json.RawMessage(`{"text":"x","in":5400}`)})
	fmt.Println(err)
	// Output:
	// {"text":"stretch","after":"1h30m0s"} <nil>
	// 250ms <nil>
	// carmy: invalid_input: invalid input for remind: in must be a duration string such as "1h30m", not a number
}

// UpdateProfile is the input of update_profile: optional fields that must
// be valid when given.
type UpdateProfile struct {
	Homepage string `json:"homepage,omitempty" validate:"omitempty,url"`
	Nick     string `json:"nick,omitempty" validate:"omitempty,min=3,max=40"`
}

func updateProfile(context.Context, UpdateProfile) error { return nil }

// Rules after omitempty hold unless the value is empty, and the schema says
// so.
func ExampleRegistry_Execute_optional() {
	reg, err := carmy.New().Tool(carmy.Tool(updateProfile, carmy.Write, carmy.Register(false))).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	for _, in := range []string{`{}`, `{"nick":""}`, `{"nick":"Ann"}`, `{"nick":"Al"}`, `{"homepage":"not a url"}`} {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "update_profile", Input: json.RawMessage(in)})
		fmt.Println(in, err)
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(carmy.SchemaFor[UpdateProfile](), &s)
	fmt.Println(string(s.Properties["nick"]))
	// Output:
	// {} <nil>
	// {"nick":""} <nil>
	// {"nick":"Ann"} <nil>
	// {"nick":"Al"} carmy: invalid_input: invalid input for update_profile: nick must have at least 3 characters, not 2
	// {"homepage":"not a url"} carmy: invalid_input: invalid input for update_profile: homepage must be a valid URL
	// {"type":"string","anyOf":[{"type":"string","maxLength":0},{"type":"string","minLength":3,"maxLength":40}]}
}

// Decimal is an amount of money with two decimal places: "12.50". It
// reads and writes its own JSON and declares its schema.
type Decimal struct{ Cents int64 }

// MarshalJSON writes the amount as a string; amounts are not negative.
func (d Decimal) MarshalJSON() ([]byte, error) {
	return json.Marshal(fmt.Sprintf("%d.%02d", d.Cents/100, d.Cents%100))
}

// UnmarshalJSON reads what MarshalJSON writes; the schema has checked the
// form already.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	whole, frac, _ := strings.Cut(s, ".")
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	d.Cents = w*100 + f
	return nil
}

// JSONSchema declares the form of a Decimal.
func (Decimal) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: `^(0|[1-9][0-9]{0,12})\.[0-9]{2}$`,
		Description: `An amount with two decimal places, such as "12.50"`}
}

// Cart is the input of total.
type Cart struct {
	Lines []struct {
		SKU   string  `json:"sku"`
		Price Decimal `json:"price"`
	} `json:"lines"`
}

func total(_ context.Context, in Cart) (Decimal, error) {
	var sum Decimal
	for _, l := range in.Lines {
		sum.Cents += l.Price.Cents
	}
	return sum, nil
}

// A type with its own JSON and a JSONSchema method is used as it declares:
// its schema is published and checked on every value, and its own methods
// read and write it.
func ExampleSchemaFor_opaque() {
	fmt.Println(string(carmy.SchemaFor[Decimal]()))

	reg, err := carmy.New().Tool(carmy.Tool(total, carmy.Read, carmy.Register(false))).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	ctx := context.Background()
	res, err := reg.Execute(ctx, carmy.Call{Tool: "total", Input: json.RawMessage(`{"lines":[{"sku":"A","price":"12.50"},{"sku":"B","price":"0.75"}]}`)})
	fmt.Println(string(res.Output), err)
	_, err = reg.Execute(ctx, carmy.Call{Tool: "total", Input: json.RawMessage(`{"lines":[{"sku":"A","price":"12.50"},{"sku":"B","price":"0.7"}]}`)})
	fmt.Println(err)
	// Output:
	// {"type":"string","pattern":"^(0|[1-9][0-9]{0,12})\\.[0-9]{2}$","description":"An amount with two decimal places, such as \"12.50\""}
	// "13.25" <nil>
	// carmy: invalid_input: invalid input for total: lines[1].price does not match its schema: '0.7' does not match pattern '^(0|[1-9][0-9]{0,12})\\.[0-9]{2}$'
}
