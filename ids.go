package carmy

import (
	"crypto/rand"
	"fmt"
	"reflect"
	"sync"
	"time"

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
	for _, f := range nestedFields(in) {
		if f.RequestID {
			problems = append(problems, fmt.Errorf("input field %s, tagged carmy:\"request_id\", is not at the input's top level; move it there", f.GoName))
		}
	}
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

// newExecutionID returns a fresh UUIDv7 (RFC 9562) in its text form: 48 bits
// of Unix milliseconds, 12 bits of sub-millisecond time that keep ids
// increasing within the process (as github.com/google/uuid does), and 62
// random bits from crypto/rand, read in blocks so that an id costs no system
// call. It allocates only the string.
func newExecutionID() (string, error) {
	var u [16]byte
	entropy.mu.Lock()
	milli, seq := entropy.v7time()
	err := entropy.read(u[8:])
	entropy.mu.Unlock()
	if err != nil {
		return "", err
	}
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(milli>>40), byte(milli>>32), byte(milli>>24), byte(milli>>16), byte(milli>>8), byte(milli)
	u[6] = 0x70 | byte(seq>>8)&0x0f // version 7
	u[7] = byte(seq)
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var s [36]byte
	const hex = "0123456789abcdef"
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[j] = '-'
			j++
		}
		s[j], s[j+1] = hex[c>>4], hex[c&0x0f]
		j += 2
	}
	return string(s[:]), nil
}

var entropy randomBlocks

// randomBlocks serves crypto/rand bytes from a refilled buffer, and the
// clock of version 7 ids.
type randomBlocks struct {
	mu   sync.Mutex
	buf  [4096]byte
	pos  int
	last int64 // the last id's milliseconds<<12 | sequence
}

// read fills p; the caller holds mu.
func (r *randomBlocks) read(p []byte) error {
	for n := 0; n < len(p); {
		if r.pos == 0 || r.pos == len(r.buf) {
			if _, err := rand.Read(r.buf[:]); err != nil {
				return err
			}
			r.pos = 0
		}
		c := copy(p[n:], r.buf[r.pos:])
		r.pos += c
		n += c
	}
	return nil
}

// v7time returns the milliseconds and the 12-bit sequence of the next id,
// later than the last one; the caller holds mu.
func (r *randomBlocks) v7time() (milli, seq int64) {
	nano := time.Now().UnixNano()
	milli = nano / 1e6
	seq = (nano - milli*1e6) >> 8 // 0..3906
	now := milli<<12 + seq
	if now <= r.last {
		now = r.last + 1
		milli, seq = now>>12, now&0xfff
	}
	r.last = now
	return milli, seq
}
