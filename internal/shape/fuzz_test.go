package shape

import (
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/uuid"
)

type fuzzItem struct {
	SKU   string  `json:"sku" validate:"required,max=8"`
	Qty   uint8   `json:"qty" validate:"min=1"`
	Price float32 `json:"price,omitempty" validate:"gte=0"`
}

type fuzzInput struct {
	Name  string            `json:"name" validate:"min=1"`
	Kind  string            `json:"kind,omitempty" validate:"omitempty,oneof=a b c"`
	N     int16             `json:"n,omitempty"`
	Big   uint64            `json:"big,omitempty"`
	F     float64           `json:"f,omitempty" validate:"lt=1e6"`
	On    *bool             `json:"on"`
	Items []fuzzItem        `json:"items,omitempty" validate:"max=4"`
	Tags  map[string]string `json:"tags,omitempty"`
	ID    uuid.UUID         `json:"id,omitzero"`
	Raw   []byte            `json:"raw,omitempty"`
	Arr   [2]int8           `json:"arr,omitzero"`
	Any   any               `json:"any,omitempty"`
}

// FuzzDecode decodes arbitrary bytes. It never panics, and what it accepts
// survives a round trip: encoded again and decoded, it is accepted and
// equal.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 5m ./internal/shape
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"x","on":null}`,
		`{"name":"x","on":true,"items":[{"sku":"a","qty":1.0,"price":1e-3}],"tags":{"a.b":"c"},"arr":[1,-2]}`,
		`{"name":"x","on":false,"big":18446744073709551615,"n":-32768,"f":999999.99999}`,
		`{"name":"x","on":null,"id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","raw":"AAEC"}`,
		`{"name":"x","on":null,"any":{"k":[1,"2",null,{}]}}`,
		`{"name":"","Name":"y","on":1}`, `[`, `{"name":"x","on":null}{}`,
	} {
		f.Add([]byte(s))
	}
	n, err := Of(reflect.TypeFor[fuzzInput]())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := reflect.New(n.Type).Elem()
		problems, fatal := Decode(n, data, v)
		if !fatal {
			problems = append(problems, Check(n, v, problems)...)
		}
		for _, p := range problems {
			if p.Message == "" || len(p.Path) > 2*maxPath {
				t.Fatalf("problem %+v", p)
			}
		}
		if len(problems) > 0 {
			return
		}
		again, err := jsonv2.Marshal(v.Interface())
		if err != nil {
			t.Fatalf("accepted %s, but it does not encode: %v", data, err)
		}
		w := reflect.New(n.Type).Elem()
		problems, _ = Decode(n, again, w)
		problems = append(problems, Check(n, w, problems)...)
		if len(problems) > 0 {
			t.Fatalf("accepted %s, but not its encoding %s: %+v", data, again, problems)
		}
		third, err := jsonv2.Marshal(w.Interface())
		if err != nil || string(third) != string(again) {
			t.Fatalf("round trip changed the value: %s became %s (%v)", again, third, err)
		}
	})
}
