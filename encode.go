package carmy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/carmy-dev/carmy/internal/shape"
)

// encodeOptions encode the host's own documents (metadata, errors); tool
// outputs go through encodeValue.
var encodeOptions = jsonv2.JoinOptions(jsonv2.Deterministic(true))

// encode turns a tool's output into JSON that matches its schema: the
// rules are checked, then the value is written from the model that
// published the schema.
func (t *tool) encode(out any) ([]byte, error) {
	if c, ok := out.(Content); ok && t.content {
		return c.MarshalJSON()
	}
	if t.out == nil {
		return []byte("null"), nil
	}
	v := reflect.ValueOf(out)
	if t.out.Checked() && out != nil {
		if problems := shape.CheckOutput(t.out, v); len(problems) > 0 {
			return nil, fmt.Errorf("%s: %s", problems[0].Path, problems[0].Message)
		}
	}
	return encodeValue(t.out, v)
}

// unmarshal decodes an output into a type other than the tool's own
// output type, which Invoke reads with the JSON library's rules.
func unmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }

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

// recordError is the form in which an error is recorded for replay: the
// error as callers receive it, without its cause.
func recordError(e *Error) []byte {
	public := *e
	public.Err = nil
	data, err := json.Marshal(&public)
	if err != nil {
		// Details that do not encode are dropped rather than the record, so
		// that the request id still runs once.
		public.Details = nil
		data, _ = json.Marshal(&public)
	}
	return data
}

// replayError decodes a recorded error; each replay gets its own copy.
func replayError(data []byte) *Error {
	e := new(Error)
	if err := json.Unmarshal(data, e); err != nil {
		return &Error{Code: CodeInternal, Message: "the recorded outcome of this request id cannot be read", Retryable: true, Err: err}
	}
	return e
}
