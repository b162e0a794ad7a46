package carmy

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/carmy-dev/carmy/internal/shape"
)

// SchemaFor returns the JSON Schema that carmy derives for T, the same one
// a tool publishes for an input or output of that type; nil when T has no
// schema (a channel, a func, a type with its own JSON encoding and no
// JSONSchema method to declare it).
func SchemaFor[T any]() json.RawMessage {
	n, err := shape.Of(reflect.TypeFor[T]())
	if err != nil {
		return nil
	}
	return slices.Clone(shape.Schema(n)) // the cached bytes are shared
}

// RegisterComments registers Go doc comments as schema descriptions and
// tool descriptions. Keys are fully qualified names: "example.com/pkg.Type",
// "example.com/pkg.Type.Field" and "example.com/pkg.function". The file
// that `carmy gen` writes calls it from init; tags and Description options
// win over comments. It is safe for concurrent use.
func RegisterComments(comments map[string]string) {
	shape.AddComments(comments)
}
