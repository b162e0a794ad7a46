package carmy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/shape"
	jsonv2 "github.com/go-json-experiment/json"
)

// Every call of a found tool ends at one point, call, whatever stage of the
// pipeline (run) answered it: the request id, the host's policy, the
// limits, the input, confirmation, the request id's reservation, the tool's
// turn or the tool itself. There the runtime reads its decision from the
// outcome, once, and tells every observer, so that the audit and the
// console's recent calls cannot disagree about what happened, and no
// refusal escapes either.

// observer is told of every decided call. It must not keep rec's slices or
// block for long: it runs on the caller's goroutine, inside the middleware.
type observer interface {
	observe(ctx context.Context, rec AuditRecord, took time.Duration)
}

// outcomeCode is the code a call's outcome is reported under: "ok" for a
// success.
func outcomeCode(err error) Code {
	if err == nil {
		return "ok"
	}
	return CodeOf(err)
}

// call runs a call of t and tells the observers what was decided.
func (r *Registry) call(ctx context.Context, t *tool, req *Request) (Result, error) {
	start := time.Now()
	res, err := r.run(ctx, t, req)
	rec := r.auditRecord(t, req, req.decided(), req.ExecutionID, outcomeCode(err))
	for _, o := range r.observers {
		o.observe(ctx, rec, rec.Time.Sub(start))
	}
	return res, err
}

// decided is the runtime's decision about a call, read from its outcome
// once the pipeline has answered it, the one place it is set: replayed (a
// recorded outcome), executed (the tool started, whatever it then
// returned), or refused (the call ended before its tool started).
func (req *Request) decided() AuditDecision {
	switch {
	case req.Replayed:
		return AuditReplayed
	case req.ExecutionID != "":
		return AuditExecuted
	}
	return AuditRefused
}

// auditRecord makes the record of decision d about req. The digest is made only
// for registries that audit: the console's list does not show it.
func (r *Registry) auditRecord(t *tool, req *Request, d AuditDecision, execID string, code Code) AuditRecord {
	rec := AuditRecord{
		Time:        time.Now(),
		Decision:    d,
		ExecutionID: execID,
		RequestID:   req.Call.RequestID,
		Session:     req.Call.Session,
		Principal:   req.Call.Principal,
		Tool:        t.meta.Name,
		Effect:      t.meta.Effect,
		Code:        code,
	}
	if len(r.auditors) > 0 && (d != AuditRefused || code != CodeInvalidInput && code != CodeRateLimited) {
		_, rec.Digest, _ = req.canonical(t)
	}
	if a := req.approval; a != nil {
		rec.ApprovalID, rec.Approver = a.ID, a.Approver
	}
	if p := req.policy; p != nil {
		rec.PolicySet, rec.Policies, rec.Detail = p.set.SHA256, p.ids, p.detail
	}
	return rec
}

// refused logs a refusal of the runtime's (permission, confirmation,
// conflict, busy) at warn and returns it. The record names who asked for
// what and the code; never the input, nor anything from the request that
// could hold a secret. It is logged with the call's context, for handlers
// that add what the context carries about the request.
func (r *Registry) refused(ctx context.Context, t *tool, c *Call, e *Error) *Error {
	r.logger.LogAttrs(ctx, slog.LevelWarn, "carmy: call refused",
		slog.String("principal", c.Principal),
		slog.String("tool", t.meta.Name),
		slog.String("code", string(e.Code)),
		slog.String("request_id", c.RequestID),
		slog.String("remote", remoteAddr(ctx)),
	)
	return e
}

type outcome struct {
	res     Result
	err     error
	expired bool // not an outcome: the deadline passed before one came
}

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
