package carmy

import (
	"encoding/json"
	"reflect"
	"slices"
	"sync"

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

// encodeBuffers recycles the encoder's scratch space: an output is written
// there, then copied out at its exact size.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// encodeValue writes v, a tool's output or an input given to Invoke, with
// the model n: the JSON its schema describes.
func encodeValue(n *shape.Node, v reflect.Value) ([]byte, error) {
	if !v.IsValid() { // a nil interface
		return []byte("null"), nil
	}
	bp := encodeBuffers.Get().(*[]byte)
	b, err := shape.Encode((*bp)[:0], n, v)
	var out []byte
	if err == nil {
		out = slices.Clone(b)
	}
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		encodeBuffers.Put(bp)
	}
	return out, err
}
