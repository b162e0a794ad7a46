package carmy

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/canon"
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

// canonical returns the canonical form of the call's validated input and
// its hex SHA-256, which confirmations, approvals, request ids and audit
// records compare. It is made once per call, when first needed.
func (req *Request) canonical(t *tool) (form []byte, digest string, err error) {
	if req.digest == "" {
		if run := req.task; run != nil && run.digest != "" && bytes.Equal(run.input, req.Call.Input) {
			// Taken as the task started; a middleware that changed the
			// input has its own.
			req.form, req.digest = run.form, run.digest
			return req.form, req.digest, nil
		}
		if req.form, err = t.canonicalInput(req.Call.Input); err != nil {
			return nil, "", err
		}
		req.digest = t.digestOf(req.form)
	}
	return req.form, req.digest, nil
}

// canonicalInput returns the canonical form of a validated input: the
// form its digest is taken over, for showing a person what they approve.
// One validated input has one form: key order, white space and number
// notation aside, and an optional member sent as null the same as one left
// out. Numbers are kept exact.
func (t *tool) canonicalInput(input []byte) ([]byte, error) {
	return canon.Form(input, inputModel(t.in))
}

// inputModel is the type model as the canonical form reads it; nil where
// nothing below can be dropped.
func inputModel(n *shape.Node) canon.Model {
	if n == nil {
		return nil
	}
	switch n.Deref().Kind {
	case shape.KindStruct, shape.KindMap, shape.KindSlice, shape.KindArray:
		return canonModel{n.Deref()}
	}
	return nil
}

// canonModel is a struct, map or array node as a [canon.Model]: a member
// that is not required may be null or absent, one input either way.
type canonModel struct{ n *shape.Node }

func (m canonModel) Member(name string) (canon.Model, bool) {
	switch m.n.Kind {
	case shape.KindStruct:
		if f, ok := m.n.Lookup(name); ok {
			return inputModel(f.Node), !f.Required
		}
	case shape.KindMap:
		return inputModel(m.n.Elem), false
	}
	return nil, false
}

func (m canonModel) Items() canon.Model {
	if m.n.Kind == shape.KindSlice || m.n.Kind == shape.KindArray {
		return inputModel(m.n.Elem)
	}
	return nil
}

// decode decodes and validates an input into a new value of the input
// type, returned as a pointer.
func (t *tool) decode(input []byte) (reflect.Value, error) {
	in, fields := decodeValid(t.in, t.inType, input)
	if fields == nil {
		return in, nil
	}
	e := &Error{Code: CodeInvalidInput, Fields: limitFields(fields)}
	if len(fields) == 1 {
		e.Message = fmt.Sprintf("invalid input for %s: %s", t.meta.Name, describe(fields[0]))
	} else {
		e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", t.meta.Name, len(fields))
	}
	return reflect.Value{}, e
}

// decodeValid decodes data into a new value of typ by node's rules and
// checks it by them: a tool's input and the answer to a tool's question
// pass the same checks. It returns a pointer to the value, or every
// problem found and no value; the caller counts them all, and bounds
// what it sends with limitFields.
func decodeValid(node *shape.Node, typ reflect.Type, data []byte) (reflect.Value, []FieldError) {
	v := reflect.New(typ)
	problems, fatal := shape.Decode(node, data, v.Elem())
	if !fatal {
		problems = append(problems, shape.Check(node, v.Elem(), problems)...)
	}
	if len(problems) == 0 {
		return v, nil
	}
	fields := make([]FieldError, len(problems))
	for i, p := range problems {
		fields[i] = FieldError(p)
	}
	return reflect.Value{}, fields
}

func describe(f FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + " " + f.Message
}
