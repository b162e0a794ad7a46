package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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
	c := r.http.console
	base, ok := strings.CutSuffix(link, "/console?approval="+url.QueryEscape(id))
	if !ok || base == "" {
		var err error
		if base, c, err = r.http.localConsole(ctx); err != nil {
			r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
			return ""
		}
	}
	return linkWithCode(base, c, url.Values{"approval": {id}})
}

// confirmByApproval decides a call that needs confirmation and holds no
// grant, by the approval of a person: it records a pending approval, or
// finds the one recorded for this principal, tool and input. A call with
// an approved one goes on, and uses it up as its execution starts
// (useApproval), so that a call that never starts (busy,
// cancelled while waiting for its turn) leaves it for the next.
// replayOnly reports an approval used by an earlier call with this call's
// request id: this call is that call's retry, which may get its recorded
// outcome but not run.
func (r *Registry) confirmByApproval(ctx context.Context, t *tool, req *Request) (replayOnly bool, err error) {
	c := &req.Call
	if req.asker != nil {
		// Made before: the confirmation stage checks for a grant of it.
		_, digest, _ := req.canonical(t)
		if a, ok := req.asker.confirmedBefore(ctx, req.Call, digest); ok {
			req.approval = &a
			return false, nil
		}
	}
	form, digest, err := req.canonical(t)
	if err != nil {
		return false, r.internal(t, "", err, "cannot make the canonical form of a validated input")
	}
	id, err := newExecutionID()
	if err != nil {
		return false, r.internal(t, "", err, "cannot make an approval id")
	}
	now := time.Now()
	a, err := r.approvals.store.Create(ctx, store.Approval{
		ID: id, Tool: t.meta.Name, Principal: c.Principal, Input: form, Digest: digest, RequestID: c.RequestID,
		Status: store.ApprovalPending, Created: now, Expires: now.Add(r.approvals.timeout),
	})
	if err != nil {
		return false, r.storeError(ctx, t, err)
	}
	req.approval = &a // for the audit record, refused or not
	if a.ID == id {
		r.auditExpiry(a)
	}
	switch a.Status {
	case store.ApprovalApproved:
		return false, nil
	case store.ApprovalUsed:
		return true, nil
	case store.ApprovalDenied:
		return false, r.refused(ctx, t, c, deniedRefusal(t, a))
	}
	if req.asker != nil {
		// Logged as refused only if asking the person in-band does not
		// decide it (askInBand).
		return false, r.approvalRefusal(ctx, t, a)
	}
	return false, r.refused(ctx, t, c, r.approvalRefusal(ctx, t, a))
}

// deniedRefusal is the refusal of a call whose approval a a person denied.
func deniedRefusal(t *tool, a store.Approval) *Error {
	return &Error{
		Code:    CodePermissionDenied,
		Message: fmt.Sprintf("a person denied this call of %s (approval %s); do not retry it: ask the user what to do instead", t.meta.Name, a.ID),
		Details: map[string]any{"tool": t.meta.Name, "approval_id": a.ID, "status": string(a.Status)},
	}
}

// personAsker asks the person at the client of a door that reaches them
// in-band (an MCP client that elicits) to decide a call's pending
// approval, within the call's one pass through the pipeline: once the
// person approves, the call goes on from the confirmation stage, and the
// middleware and the audit see it once. The door puts one on the call's
// [Request], and a task waits for the person through one (taskAsker);
// calls over the HTTP API and in process have none.
type personAsker interface {
	// confirmedBefore returns the approval that confirmed an earlier
	// round of this very call, if the call carries such a confirmation
	// (the sessionless protocol, where a tool's own questions add rounds
	// after the person confirmed).
	confirmedBefore(ctx context.Context, c Call, digest string) (store.Approval, bool)
	// ask asks the person to decide pending, the approval that refusal
	// (confirmation_required) waits for, and returns it once a person
	// approved it; otherwise the refusal that stands: the person declined
	// or dismissed the question, the client cannot ask, or the question
	// goes back to the client in the round's result. form and digest are
	// the call's canonical input and its digest.
	ask(ctx context.Context, t *tool, c Call, form []byte, digest string, refusal *Error, pending *approve.Pending) (store.Approval, error)
}

// askInBand asks the person, through the door's asker, to decide the
// pending approval that refused a call; approved, the call goes on in the
// same pass, and uses the approval up as its execution starts. Any other
// refusal, and a call with no asker, keeps err.
func (r *Registry) askInBand(ctx context.Context, t *tool, req *Request, err error) error {
	var e *Error
	var pending *approve.Pending
	if req.asker == nil || !errors.As(err, &e) || e.Code != CodeConfirmationRequired || !errors.As(err, &pending) {
		return err
	}
	form, digest, _ := req.canonical(t) // made before the approval was
	// A task waiting for a person is not running: it gives up its place
	// under MaxInFlight while it waits, and takes one again once approved.
	waits := req.task != nil && req.held.slot != nil
	if waits {
		r.freeSlot(ctx, t, req)
	}
	a, err := req.asker.ask(ctx, t, req.Call, form, digest, e, pending)
	if err == nil && waits {
		if busy, serr := r.takeSlot(ctx, t, req); busy != nil {
			err = busy
		} else if serr != nil {
			err = serr
		}
	}
	if err != nil {
		if errors.As(err, &e) {
			r.refused(ctx, t, &req.Call, e)
		}
		return err
	}
	req.approval = &a
	return nil
}

// decided is what a call waiting for approval a, now decided, gets:
// approved, it goes on (nil); denied, the denial; used by another call or
// expired, refusal.
func decided(t *tool, a store.Approval, refusal error) error {
	switch a.Status {
	case store.ApprovalApproved:
		return nil
	case store.ApprovalDenied:
		return deniedRefusal(t, a)
	}
	return refusal
}

// approvalRefusal is the confirmation_required refusal of a call that
// waits for a person's approval a. Its message is for the model: short,
// saying what to tell the user and what to do next. What only a host can
// do (grant a permission) is in its details.
func (r *Registry) approvalRefusal(ctx context.Context, t *tool, a store.Approval) *Error {
	expires := a.Expires.UTC().Format(time.RFC3339)
	grant := t.confirm + ":" + a.Digest
	details := map[string]any{
		"tool": t.meta.Name, "digest": a.Digest, "permission": grant, "tool_permission": t.confirm,
		"approval_id": a.ID, "status": string(a.Status), "expires": expires,
		"host_help": fmt.Sprintf("a person approves or denies approval %s in the console (or at GET/POST /approvals); a host may instead grant the permission %q, for this input only, or %q", a.ID, grant, t.confirm),
	}
	msg := fmt.Sprintf("%s needs a person's approval, and this connection cannot ask them. Tell the user this call waits for their approval (approval %s) and do not retry it until they say they gave it, before %s.",
		t.meta.Name, a.ID, expires)
	link := r.approvalURL(ctx, a.ID)
	if link != "" {
		details["approval_url"] = link
		msg = fmt.Sprintf("%s needs a person's approval. Ask the user to approve or deny it at %s, then make the same call again, with the same input, before %s.",
			t.meta.Name, link, expires)
	}
	// The doors that reach a person read the approval from Err; the
	// details are the caller's copy.
	pending := &approve.Pending{ID: a.ID, Tool: t.meta.Name, URL: link, Digest: a.Digest, Permission: grant, Expires: a.Expires}
	return &Error{Code: CodeConfirmationRequired, Message: msg, Details: details, Err: pending}
}

// recordedOutcome finds the recorded outcome of a call that needs an
// approval it does not have: the retry, with its request id, of a call
// that ran under an approval since used up gets that call's outcome,
// whatever approval the same input waits for now. A call without a
// request id, or whose request id has no record, has none.
func (r *Registry) recordedOutcome(ctx context.Context, t *tool, req *Request) (*store.Record, bool) {
	c := &req.Call
	if c.RequestID == "" {
		return nil, false
	}
	_, digest, err := req.canonical(t)
	if err != nil {
		return nil, false
	}
	key := store.Key{Principal: c.Principal, Tool: t.meta.Name, RequestID: c.RequestID}
	res, err := r.find(ctx, t, key, digest)
	switch {
	case err != nil:
		return nil, false // the refusal stands
	case res.Record != nil && res.Digest == digest:
		return res.Record, true
	}
	return nil, false
}

// useApproval uses up the approval a call runs by, as its execution
// starts: it holds its tool's turn, if any, and its request id's
// reservation, so it runs next. Of two calls that found one approval, the
// one that uses it runs; the other is refused.
func (r *Registry) useApproval(ctx context.Context, t *tool, req *Request) error {
	a := req.approval
	if a == nil || a.Status != store.ApprovalApproved {
		return nil
	}
	if err := r.policyAgain(ctx, t, req); err != nil {
		return err
	}
	used, err := r.approvals.store.Consume(ctx, a.ID, req.Call.RequestID)
	if errors.Is(err, store.ErrApprovalState) {
		return r.refused(ctx, t, &req.Call, &Error{
			Code:    CodeConfirmationRequired,
			Message: fmt.Sprintf("approval %s of %s was used by another call, or expired; make the call again to ask for a new approval", a.ID, t.meta.Name),
			Details: map[string]any{"tool": t.meta.Name, "approval_id": a.ID, "status": string(used.Status)},
		})
	}
	if err != nil {
		return r.storeError(ctx, t, err)
	}
	req.approval = &used
	r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: approved call runs",
		slog.String("approval_id", used.ID), slog.String("tool", used.Tool), slog.String("principal", used.Principal),
		slog.String("approver", used.Approver), slog.String("request_id", req.Call.RequestID))
	return nil
}

// replayOnlyError refuses to run the retry of a call that ran by an
// approval when its outcome is no longer recorded: the approval let one
// call run, and it did.
func (r *Registry) replayOnlyError(ctx context.Context, t *tool, req *Request) error {
	a := req.approval
	return r.refused(ctx, t, &req.Call, &Error{
		Code:    CodeConfirmationRequired,
		Message: fmt.Sprintf("approval %s of %s was used by an earlier call with this request id, whose outcome is no longer kept; send a new request id to ask for a new approval", a.ID, t.meta.Name),
		Details: map[string]any{"tool": t.meta.Name, "approval_id": a.ID, "status": string(a.Status)},
	})
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
	if err == nil && a.Principal == approver {
		refused := a
		refused.Approver = ""
		r.auditApproval(ctx, refused, AuditRefused, approver, CodePermissionDenied)
		return &Error{Code: CodePermissionDenied,
			Message: "the principal that made a call never decides its approval: name the person who decided, such as \"person:" + approver + "\"",
			Details: map[string]any{"approval_id": id, "reason": "own_call"}}
	}
	if err == nil {
		if e := r.policyApprove(ctx, a, Identity{Principal: approver}, doorOf(ctx)); e != nil {
			return e
		}
		a, err = r.decide(ctx, id, approve, approver)
	}
	if err != nil {
		return r.decisionError(id, a, err)
	}
	return nil
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

// decide records approver's decision on approval id, wakes the calls that
// wait for it on this host, and logs and audits it. attrs add to the log
// line what the door knows of the decider.
func (r *Registry) decide(ctx context.Context, id string, approve bool, approver string, attrs ...slog.Attr) (store.Approval, error) {
	a, err := r.approvals.store.Decide(ctx, id, approve, approver)
	if err != nil {
		return a, err
	}
	r.approvals.wake()
	decision, audited := "deny", AuditDenied
	if approve {
		decision, audited = "approve", AuditApproved
	}
	r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: approval decided", append([]slog.Attr{
		slog.String("decision", decision), slog.String("approval_id", a.ID), slog.String("tool", a.Tool),
		slog.String("principal", a.Principal), slog.String("approver", a.Approver),
		slog.Time("decided", a.Decided), slog.String("digest", a.Digest)}, attrs...)...)
	r.auditApproval(ctx, a, audited, a.Principal, "")
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
	if t, ok := r.tools[a.Tool]; ok {
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
		if r.streams.Err() != nil {
			return
		}
		ctx := context.Background()
		got, err := r.approvals.store.Get(ctx, a.ID)
		if err == nil && got.Status == store.ApprovalExpired {
			r.auditApproval(ctx, got, AuditExpired, got.Principal, "")
		}
	})
}
