package shape

import (
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
)

type ownNoSchema struct{}

func (ownNoSchema) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

type ownRef struct{}

func (ownRef) MarshalJSON() ([]byte, error)   { return []byte(`1`), nil }
func (*ownRef) UnmarshalJSON([]byte) error    { return nil }
func (ownRef) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Ref: "#/$defs/x"} }

type ownWriteOnly struct{}

func (ownWriteOnly) MarshalJSON() ([]byte, error)   { return []byte(`1`), nil }
func (ownWriteOnly) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "integer"} }

type ownGood struct{ n int }

func (g ownGood) MarshalJSON() ([]byte, error) {
	if g.n < 0 {
		return []byte(`"negative"`), nil // breaks its own schema
	}
	return []byte(`1`), nil
}
func (*ownGood) UnmarshalJSON([]byte) error    { return nil }
func (ownGood) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "integer"} }

func TestOpaque(t *testing.T) {
	for _, tt := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[ownNoSchema](), "add a JSONSchema() *jsonschema.Schema method"},
		{reflect.TypeFor[ownRef](), "uses $ref or $defs"},
		{reflect.TypeFor[ownWriteOnly](), "not both MarshalJSON and UnmarshalJSON"},
	} {
		if _, err := Of(tt.typ); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Of(%v) = %v; want an error saying %q", tt.typ, err, tt.want)
		}
	}
	n, err := Of(reflect.TypeFor[[]ownGood]())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(Schema(n)); got != `{"type":"array","items":{"type":"integer"}}` {
		t.Errorf("schema %s", got)
	}
	if _, err := Encode(nil, n, reflect.ValueOf([]ownGood{{1}, {-1}})); err == nil || !strings.HasPrefix(err.Error(), "[1] does not match its schema") {
		t.Errorf("an output breaking its declared schema: %v", err)
	}
}
