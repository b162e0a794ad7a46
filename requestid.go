package carmy

import (
	"fmt"
	"reflect"

	"github.com/carmy-dev/carmy/internal/shape"
)

// maxRequestIDLen is the longest request id a call may carry. A request id
// is kept in the idempotency store and in logs; the bound keeps a caller
// from storing megabytes under one.
const maxRequestIDLen = 255

// requestIDRule is the rule a request id keeps, as refusals state it.
const requestIDRule = "a request id is 1 to 255 printable ASCII characters (! to ~)"

// checkRequestID refuses a request id that is not 1 to 255 bytes of
// printable ASCII, '!' to '~': no spaces, no control characters, nothing a
// log line or a store key could be confused by. "" means the call has no
// request id and is allowed.
func checkRequestID(id string) *Error {
	if id == "" {
		return nil
	}
	var why string
	if len(id) > maxRequestIDLen {
		why = fmt.Sprintf("this one is %d bytes long", len(id))
	} else {
		for i := 0; i < len(id); i++ {
			if c := id[i]; c < '!' || c > '~' {
				why = fmt.Sprintf("byte %d of this one is %#02x", i, c)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return &Error{Code: CodeInvalidInput, Message: "invalid request id: " + requestIDRule + "; " + why}
}

// requestIDField finds the input field tagged carmy:"request_id", if any,
// and reports the problems with the tag: more than one such field, a field
// that is not a string, one below the input's top level.
func requestIDField(in *shape.Node) (*shape.Field, []error) {
	var found *shape.Field
	var problems []error
	for _, f := range in.Deref().Fields {
		if !f.RequestID {
			continue
		}
		switch {
		case f.Node.Kind != shape.KindString:
			problems = append(problems, fmt.Errorf("input field %s is tagged carmy:\"request_id\" but is not a string; a request id is a string", f.GoName))
		case found != nil:
			problems = append(problems, fmt.Errorf("input fields %s and %s are both tagged carmy:\"request_id\"; tag one", found.GoName, f.GoName))
		default:
			found = f
		}
	}
	seen := map[*shape.Node]bool{}
	var below func(n *shape.Node, top bool)
	below = func(n *shape.Node, top bool) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		for _, f := range n.Fields {
			if f.RequestID && !top {
				problems = append(problems, fmt.Errorf("input field %s, tagged carmy:\"request_id\", is not at the input's top level; move it there", f.GoName))
			}
			below(f.Node, false)
		}
		below(n.Elem, false)
	}
	below(in.Deref(), true)
	return found, problems
}

// requestIDFromInput is the request id a call's input gives in the field
// tagged carmy:"request_id": "" when the tool has no such field or the
// input leaves it empty.
func (t *tool) requestIDFromInput(in reflect.Value) (string, error) {
	if t.requestID == nil {
		return "", nil
	}
	id := in.Elem().FieldByIndex(t.requestID.Index).String()
	if e := checkRequestID(id); e != nil {
		e.Fields = []FieldError{{Path: t.requestID.Name, Message: "must be " + requestIDRule[len("a request id is "):]}}
		e.Message = fmt.Sprintf("invalid input for %s: %s is a request id, and %s", t.meta.Name, t.requestID.Name, e.Message[len("invalid request id: "):])
		return "", e
	}
	return id, nil
}
