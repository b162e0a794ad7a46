package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/carmy-dev/carmy"
)

// Search shows what omitempty means on pointers, slices and maps.
type Search struct {
	Category *string           `json:"category,omitempty" validate:"omitempty,oneof=books music"`
	Limit    *int              `json:"limit,omitempty" validate:"omitempty,min=1,max=50"`
	Tags     []string          `json:"tags,omitempty" validate:"omitempty,min=2,dive,oneof=new used"`
	Filters  map[string]string `json:"filters,omitempty" validate:"omitempty,max=3"`
	Page     int               `json:"page,omitempty" validate:"ne=13"`
}

// After omitempty, the validator skips the rules only for an empty value:
// a nil pointer, an absent slice or map, 0 or "". A non-nil pointer keeps
// them, "" and 0 included, and so does a present [] or {}. The schema says
// the same, and rules only the validator checks read as words.
func ExampleSchemaFor_omitempty() {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(carmy.SchemaFor[Search](), &schema)
	for _, name := range []string{"category", "limit", "tags", "filters"} {
		fmt.Printf("%s: %s\n", name, schema.Properties[name])
	}

	search := carmy.Tool(func(in Search) error { return nil }, carmy.Read, carmy.Name("search"), carmy.Register(false))
	reg, _ := carmy.New().Tool(search).Build()
	defer reg.Close()
	for _, input := range []string{`{}`, `{"category":null,"limit":null}`, `{"category":""}`, `{"limit":0}`, `{"tags":[]}`, `{"filters":{}}`, `{"page":13}`} {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "search", Input: []byte(input)})
		var e *carmy.Error
		if errors.As(err, &e) {
			fmt.Printf("%s: %s %s\n", input, e.Fields[0].Path, e.Fields[0].Message)
		} else {
			fmt.Printf("%s: accepted\n", input)
		}
	}
	// Output:
	// category: {"type":["string","null"],"enum":["books","music",null]}
	// limit: {"type":["integer","null"],"minimum":1,"maximum":50}
	// tags: {"type":"array","items":{"type":"string","enum":["new","used"]},"minItems":2}
	// filters: {"type":"object","maxProperties":3,"additionalProperties":{"type":"string"}}
	// {}: accepted
	// {"category":null,"limit":null}: accepted
	// {"category":""}: category must be one of "books", "music"
	// {"limit":0}: limit must be at least 1
	// {"tags":[]}: tags must have at least 2 items, not 0
	// {"filters":{}}: accepted
	// {"page":13}: page must not be 13
}
