package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// DefaultApprovalTimeout is how long a pending approval waits for a
// person, and an approved one for its call, unless [Builder.ApprovalTimeout]
// says otherwise.
const DefaultApprovalTimeout = 15 * time.Minute

// ApprovalTimeout sets how long an approval stays open: a person must
// decide within it, and the approved call must come within it. The default
// is [DefaultApprovalTimeout].
//
// A call of a tool that needs confirmation, made without a grant for it,
// is refused with [CodeConfirmationRequired] and records a pending
// approval of that call: its details carry approval_id and approval_url, a
// page where a person sees the tool, the caller and the canonical input,
// and approves or denies. Once approved, the same principal's next call of
// the same tool with the same input runs, once: the approval is then used
// up. Once denied, that call gets [CodePermissionDenied] with the approval
// id and status "denied" in its details until the approval expires.
//
// Approvals are kept in the idempotency store when it also implements
// [store.ApprovalStore] (redisstore does), so that every host sees them;
// otherwise in this process. Those holding the permission
// "approve:<tool>", or "approve:*" for every tool, decide them (see
// [Registry.Handler]), except the approvals of their own calls: the
// principal that made a call never decides its approval, whatever it
// holds. A server without an [Authenticator] gives that right to the
// holder of its console secret only ([Registry.ConsoleURL]).
func (b *Builder) ApprovalTimeout(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.ApprovalTimeout(%v) must be positive", d)
		return b
	}
	b.approvalTimeout = d
	return b
}

// approvalStore is where a registry keeps approvals: in the idempotency
// store when it keeps them too, else in memory.
func approvalStore(idem store.IdempotencyStore) store.ApprovalStore {
	if a, ok := idem.(store.ApprovalStore); ok {
		return a
	}
	return store.NewMemoryApprovals()
}

// approvals is what a registry needs for approvals.
type approvals struct {
	store   store.ApprovalStore
	timeout time.Duration
	base    atomic.Pointer[string] // the URL the server listens on, for calls that came by no HTTP request

	mu      sync.Mutex
	decided chan struct{} // closed and replaced when a decision is made here
	// tasks are the approvals that a task of this host waits for, which
	// resumes once approved: the approvals API says so to the person.
	tasks sync.Map // approval id → struct{}
}

func newApprovals(s store.ApprovalStore, timeout time.Duration) *approvals {
	if timeout <= 0 {
		timeout = DefaultApprovalTimeout
	}
	return &approvals{store: s, timeout: timeout, decided: make(chan struct{})}
}

// woken returns a channel closed at the next decision made on this host.
func (a *approvals) woken() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.decided
}

func (a *approvals) wake() {
	a.mu.Lock()
	close(a.decided)
	a.decided = make(chan struct{})
	a.mu.Unlock()
}

// requestBase is the URL of the server as the request reached it. The Host
// passed the boundary's check.
func requestBase(req *http.Request) string {
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + req.Host
}

// approvalURL is the page where a person decides on approval id: at the
// public URL, else on the server the call came through, else the one this
// registry listens on. It is "" when none is known (a call in process, or
// over stdio): never a relative link, nor one to a console nobody serves.
func (r *Registry) approvalURL(ctx context.Context, id string) string {
	base := r.publicURL
	if base == "" {
		if req := httpRequestOf(ctx); req != nil {
			base = requestBase(req)
		} else if p := r.approvals.base.Load(); p != nil {
			base = *p
		}
	}
	if base == "" {
		return ""
	}
	return base + "/console?approval=" + url.QueryEscape(id)
}

// personalApprovalURL is the page where the person at a single-client
// transport's client decides on approval id: the console of the server
// that link (the approval's URL, if any) is on, else the console that
// carmy serves on a loopback port for the purpose, opened on the first
// need. The URL carries a one-time code that the page exchanges for the
// console secret, if the console has one: the client hands it to its
// user, not to the model. It is "" when no console can be served.
func (r *Registry) personalApprovalURL(ctx context.Context, id, link string) string {
	u, err := r.http.srv.PersonalLink(ctx, id, link)
	if err != nil {
		r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
		return ""
	}
	return u
}

// awaitDecision returns approval id once it is no longer pending, or when
// ctx is done. A store shared by hosts wakes it when a decision is made on
// any of them ([store.DecisionWaiter]); otherwise a decision made on this
// host wakes it at once, and one made elsewhere is seen within a second.
func (r *Registry) awaitDecision(ctx context.Context, id string) (store.Approval, error) {
	if w, ok := r.approvals.store.(store.DecisionWaiter); ok {
		return w.AwaitDecision(ctx, id)
	}
	for {
		woken := r.approvals.woken()
		a, err := r.approvals.store.Get(ctx, id)
		if err != nil || a.Status != store.ApprovalPending {
			return a, err
		}
		t := time.NewTimer(min(time.Second, time.Until(a.Expires)+time.Millisecond))
		select {
		case <-woken:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return a, ctx.Err()
		}
		t.Stop()
	}
}

// Decide records the decision of a person that the host asked itself, in
// process (an agent framework's interrupt, the host's own page), on the
// pending approval id, which a [CodeConfirmationRequired] refusal names in
// its details ("approval_id"). approver names that person for the logs and
// the audit. Once approved, the same principal's next call of the same tool
// with the same input runs, once, as after a decision in the console; once
// denied, it is refused until the approval expires. Calls that wait for the
// decision are woken. The approver is never the principal whose call
// waits ([CodePermissionDenied]): the record names the person, as
// "person:alice" or the like, not the agent that acts for them.
//
// Decide is the host's, like the permissions a call carries: never let a
// model, or the caller whose call waits, reach it. An approval that is no
// longer pending is [CodeConflict], one that does not exist (or expired
// and is gone) [CodeNotFound]. Decide is safe for concurrent use: of two
// decisions on one approval, one wins and the other is a conflict.
func (r *Registry) Decide(ctx context.Context, id string, approve bool, approver string) error {
	if approver == "" {
		f := FieldError{Path: "approver", Message: "is required: name the person who decided"}
		return &Error{Code: CodeInvalidInput, Message: "Decide needs the approver: " + describe(f), Fields: []FieldError{f}}
	}
	a, err := r.approvals.store.Get(ctx, id)
	if err != nil {
		return r.decisionError(id, a, err)
	}
	_, err = r.decideAs(ctx, a, approve, hostApprover(approver), Identity{Principal: approver}, doorOf(ctx))
	return hostDecisionError(err, id, approver)
}

// hostApprover is the person a host names to [Registry.Decide]: the host
// holds every right to decide, but that of the call's own principal.
func hostApprover(name string) approve.Who {
	return approve.Who{Principal: name, Permissions: []string{"approve:*"}}
}

// hostDecisionError is the error of [Registry.Decide] when the gate
// refused approver with err.
func hostDecisionError(err error, id, approver string) error {
	if errors.Is(err, approve.ErrOwnCall) {
		return &Error{Code: CodePermissionDenied,
			Message: "the principal that made a call never decides its approval: name the person who decided, such as \"person:" + approver + "\"",
			Details: map[string]any{"approval_id": id, "reason": "own_call"}}
	}
	return err
}

// decideAs is the one gate of a person's decision, for every door that
// decides (the HTTP API and the console, [Registry.Decide]): who must see
// approval a ([store.ErrApprovalNotFound] otherwise, as for none), hold
// the right to decide it and not be the principal whose call waits
// ([approve.ErrNoRight], [approve.ErrOwnCall]; the door words them), and
// the policies must let decider decide it, asked by door. Each refusal is
// audited with who tried. It then records the decision, with attrs in its
// log line.
func (r *Registry) decideAs(ctx context.Context, a store.Approval, approved bool, who approve.Who, decider Identity, door string, attrs ...slog.Attr) (store.Approval, error) {
	refused := a
	refused.Approver = ""
	if !who.MayView(a) { // one the caller may not see: as for none
		r.auditApproval(ctx, refused, AuditRefused, who.Principal, CodePermissionDenied)
		return a, store.ErrApprovalNotFound
	}
	if why := who.MayDecide(a); why != nil {
		r.auditApproval(ctx, refused, AuditRefused, who.Principal, CodePermissionDenied)
		return a, why
	}
	if e := r.policyApprove(ctx, a, decider, door); e != nil {
		return a, e
	}
	got, err := r.decide(ctx, a.ID, approved, who.Name(), attrs...)
	if err != nil {
		return got, r.decisionError(a.ID, got, err)
	}
	return got, nil
}

// decisionError is the error of a decision on approval id that the store
// refused with err, the same for every door that decides; a is the
// approval as the store returned it, whose status a conflict names.
func (r *Registry) decisionError(id string, a store.Approval, err error) *Error {
	switch {
	case errors.Is(err, store.ErrApprovalNotFound):
		return &Error{Code: CodeNotFound, Message: fmt.Sprintf("no pending approval %s: it never existed, or it expired", id), Details: map[string]any{"approval_id": id}}
	case errors.Is(err, store.ErrApprovalState) && a.Status != "":
		return &Error{Code: CodeConflict, Message: fmt.Sprintf("approval %s is %s, not pending: it cannot be decided again", id, a.Status),
			Details: map[string]any{"approval_id": id, "status": string(a.Status)}}
	case errors.Is(err, store.ErrApprovalState):
		return &Error{Code: CodeConflict, Message: fmt.Sprintf("approval %s is not pending: it cannot be decided again", id), Details: map[string]any{"approval_id": id}}
	}
	return r.approvalStoreError(err)
}

// decide records approver's decision on approval id, logs and audits it,
// and then wakes the calls that wait for it on this host. attrs add to the
// log line what the door knows of the decider.
func (r *Registry) decide(ctx context.Context, id string, approve bool, approver string, attrs ...slog.Attr) (store.Approval, error) {
	a, err := r.approvals.store.Decide(ctx, id, approve, approver)
	if err != nil {
		return a, err
	}
	decision, audited := "deny", AuditDenied
	if approve {
		decision, audited = "approve", AuditApproved
	}
	r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: approval decided", append([]slog.Attr{
		slog.String("decision", decision), slog.String("approval_id", a.ID), slog.String("tool", a.Tool),
		slog.String("principal", a.Principal), slog.String("approver", a.Approver),
		slog.Time("decided", a.Decided), slog.String("digest", a.Digest)}, attrs...)...)
	// Audited before the waiting calls wake: a trail reads the approval
	// before the run it let through.
	r.auditApproval(ctx, a, audited, a.Principal, "")
	r.approvals.wake()
	return a, nil
}

// decideByElicitation records the decision of the person at the MCP
// client of principal on approval id, and wakes the calls that wait for
// it. It returns the approval as it stands: an approval that is no longer
// pending keeps its state, and the call gets what it says.
func (r *Registry) decideByElicitation(ctx context.Context, id string, approve bool, principal string) (store.Approval, error) {
	a, err := r.decide(ctx, id, approve, elicitationApprover(principal))
	if errors.Is(err, store.ErrApprovalState) {
		return r.approvals.store.Get(ctx, id)
	}
	return a, err
}

// elicitationApprover names the person at the MCP client of principal, who
// decided an approval by answering a confirmation form.
func elicitationApprover(principal string) string { return "elicitation:" + principal }

// auditApproval writes the audit record of what happened to approval a:
// decided, expired, or a refused attempt to decide it by principal.
func (r *Registry) auditApproval(ctx context.Context, a store.Approval, d AuditDecision, principal string, code Code, with ...func(*AuditRecord)) {
	if len(r.auditors) == 0 {
		return
	}
	rec := AuditRecord{Time: time.Now(), Decision: d, RequestID: a.RequestID, Principal: principal, Tool: a.Tool,
		Digest: a.Digest, Code: code, ApprovalID: a.ID, Approver: a.Approver}
	timeout := maxApprovalWait
	if t, ok := r.tab().tools[a.Tool]; ok {
		rec.Effect, timeout = t.meta.Effect, t.meta.Timeout
	}
	for _, f := range with {
		f(&rec)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	_ = r.writeAudit(actx, rec) // a failure is logged and counted
}

// auditExpiry writes, when approval a expires unused, its expired record:
// the host that recorded it looks at it then. A registry closed by then
// writes nothing.
func (r *Registry) auditExpiry(a store.Approval) {
	if len(r.auditors) == 0 {
		return
	}
	time.AfterFunc(time.Until(a.Expires), func() {
		if r.life.Err() != nil {
			return
		}
		ctx := context.Background()
		got, err := r.approvals.store.Get(ctx, a.ID)
		if err == nil && got.Status == store.ApprovalExpired {
			r.auditApproval(ctx, got, AuditExpired, got.Principal, "")
		}
	})
}

// maxApprovalWait bounds how long GET /approvals/{id}?wait= holds a
// request open.
const maxApprovalWait = time.Minute

// approvalStoreError explains a failure of the approval store.
func (r *Registry) approvalStoreError(err error) *Error {
	r.logger.Error("carmy: approval store failed", "error", err)
	return &Error{Code: CodeUnavailable, Message: "approvals are unavailable now; try again", Retryable: true, Err: err}
}
