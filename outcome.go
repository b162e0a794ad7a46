package carmy

import (
	"context"
	"time"
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
