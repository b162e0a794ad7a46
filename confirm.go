package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// Confirmation says whether a tool's calls need a grant from the host.
type Confirmation uint8

const (
	// ConfirmationNone: calls run without a grant.
	ConfirmationNone Confirmation = iota
	// ConfirmationRequired: calls need the permission "confirm:<name>", or
	// "confirm:<name>:<digest>" for one input.
	ConfirmationRequired
	// ConfirmationPossible, in a list: the tool declares none, but a
	// policy with @confirm may ask a person's approval of a call
	// ([Builder.Policies]). A tool never declares it.
	ConfirmationPossible
)

// String returns "none", "required" or "possible".
func (c Confirmation) String() string {
	switch c {
	case ConfirmationRequired:
		return "required"
	case ConfirmationPossible:
		return "possible"
	}
	return "none"
}

// MarshalText implements [encoding.TextMarshaler].
func (c Confirmation) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]: "none", "required"
// or "possible".
func (c *Confirmation) UnmarshalText(text []byte) error {
	switch string(text) {
	case "none":
		*c = ConfirmationNone
	case "required":
		*c = ConfirmationRequired
	case "possible":
		*c = ConfirmationPossible
	default:
		return fmt.Errorf("unknown confirmation %q; want none, required or possible", text)
	}
	return nil
}

// ElicitConfirmation lets MCP clients over HTTP, too, be asked to confirm
// a call that needs confirmation, with a form that shows the person at the
// client the call's input: accepted, the call runs once; declined, it is
// refused. Clients of a single-client transport (stdio, [Registry.ServeMCP])
// are asked by default, as their application is the person's own channel;
// over HTTP it is off by default, because a client there may answer forms
// on its own, which would hand the decision to the client instead of a
// person. [Builder.NoFormConfirmation] turns forms off on every transport;
// the two contradict each other.
func (b *Builder) ElicitConfirmation() *Builder {
	if b.elicit == formNever {
		b.misuse("Builder.ElicitConfirmation contradicts Builder.NoFormConfirmation")
		return b
	}
	b.elicit = formEverywhere
	return b
}

// NoFormConfirmation turns confirmation by form elicitation off on every
// transport, stdio included, for a host that cannot trust its clients to
// show a form to a person (a client that answers forms by itself could
// confirm anything it is shown). A call that needs confirmation then waits
// for a person's approval in the console: a client that can open a page for
// its user (URL elicitation) is sent there, and a host may still grant
// confirmation by permission. It contradicts [Builder.ElicitConfirmation].
func (b *Builder) NoFormConfirmation() *Builder {
	if b.elicit == formEverywhere {
		b.misuse("Builder.NoFormConfirmation contradicts Builder.ElicitConfirmation")
		return b
	}
	b.elicit = formNever
	return b
}

// formConfirmation is where calls are confirmed by form elicitation.
type formConfirmation int8

const (
	formSingleClient formConfirmation = iota // the default: stdio and other single-client transports
	formEverywhere                           // ElicitConfirmation: over HTTP too
	formNever                                // NoFormConfirmation
)

// confirm is the confirmation stage of a tool that needs one: a grant for
// the tool, or for this input, lets the call on (nil); otherwise a
// person's approval decides (confirmByApproval). The refusal of a call it
// does not let on stands unless the reservation stage finds the recorded
// outcome of the call it retries, or the person, asked in-band where the
// call's door can (askInBand), approves it.
func (r *Registry) confirm(ctx context.Context, t *tool, req *Request) error {
	perms := req.exec.c.Permissions
	if t.meta.Confirmation != ConfirmationRequired && (req.policy == nil || !req.policy.confirm) || perms.Has(t.confirm) {
		return nil
	}
	_, digest, err := req.canonical(t)
	if err != nil {
		return r.internal(t, "", err, "cannot digest a validated input")
	}
	if perms.Has(t.confirm + ":" + digest) {
		return nil
	}
	return r.confirmByApproval(ctx, t, req)
}

// confirmByApproval decides a call that needs confirmation and holds no
// grant, by the approval of a person: it records a pending approval, or
// finds the one recorded for this principal, tool and input. A call with
// an approved one goes on, and uses it up as its execution starts
// (useApproval), so that a call that never starts (busy,
// cancelled while waiting for its turn) leaves it for the next. An
// approval used by an earlier call with this call's request id makes this
// call that call's retry, which may get its recorded outcome but never
// runs: it is refused, unless the reservation stage finds the outcome.
func (r *Registry) confirmByApproval(ctx context.Context, t *tool, req *Request) error {
	c := &req.Call
	form, digest, err := req.canonical(t)
	if err != nil {
		return r.internal(t, "", err, "cannot make the canonical form of a validated input")
	}
	if req.asker != nil {
		if id, ok := req.asker.confirmedBefore(ctx, digest); ok {
			a := r.confirmedBefore(ctx, id, c.Principal)
			req.approval = &a
			return nil
		}
	}
	id, err := newExecutionID()
	if err != nil {
		return r.internal(t, "", err, "cannot make an approval id")
	}
	now := time.Now()
	a, err := r.approvals.store.Create(ctx, store.Approval{
		ID: id, Tool: t.meta.Name, Principal: c.Principal, Input: form, Digest: digest, RequestID: c.RequestID,
		Status: store.ApprovalPending, Created: now, Expires: now.Add(r.approvals.timeout),
	})
	if err != nil {
		return r.storeError(ctx, t, err)
	}
	req.approval = &a // for the audit record, refused or not
	if a.ID == id {
		r.auditExpiry(a)
	}
	switch a.Status {
	case store.ApprovalApproved:
		return nil
	case store.ApprovalUsed:
		return usedRefusal(t, a)
	case store.ApprovalDenied:
		return deniedRefusal(t, a)
	}
	return r.approvalRefusal(ctx, t, a)
}

// confirmedBefore is approval id, which confirmed an earlier round of a
// call of principal (the door carries it, [personAsker]): the round's
// records name that approval and its approver, as those of the round that
// used it do.
func (r *Registry) confirmedBefore(ctx context.Context, id, principal string) store.Approval {
	a, err := r.approvals.store.Get(ctx, id)
	if err != nil || a.Approver == "" {
		// Gone, or kept by another host alone: the door carries the
		// confirmation on only after the person at its client confirmed.
		a = store.Approval{ID: id, Approver: elicitationApprover(principal)}
	}
	return a
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
// calls over the HTTP API and in process have none. An asker asks, and
// says what came of it in a [personAnswer]; what that does to the call is
// decided by askInBand, the same for every door.
type personAsker interface {
	// confirmedBefore returns the id of the approval that confirmed an
	// earlier round of this very call, if the call carries such a
	// confirmation (the sessionless protocol, where a tool's own
	// questions add rounds after the person confirmed); digest is the
	// call's input's.
	confirmedBefore(ctx context.Context, digest string) (approval string, ok bool)
	// ask asks the person to decide q's pending approval, and says what
	// came of it.
	ask(ctx context.Context, q personQuestion) personAnswer
	// accepted tells the door that approval a, which the person at its
	// client accepted, now lets the call run (the sessionless protocol
	// carries it to the call's next rounds).
	accepted(ctx context.Context, q personQuestion, a store.Approval)
	// standing is the refusal that stands for a call nobody decided, in
	// the door's words: q's refusal, or one that names what the person can
	// still use. asked says whether the person was asked (and closed the
	// form or the page without deciding).
	standing(ctx context.Context, q personQuestion, asked bool) error
}

// personQuestion is a call's pending approval, as a door asks a person to
// decide it.
type personQuestion struct {
	tool, principal string
	pending         *approve.Pending // the approval: its id, page (if any), digest and grant
	input           string           // the canonical input as a person reads it (promptInput)
	refusal         *Error           // the confirmation_required refusal that waits for the approval
}

// verdict is what came of asking a person to decide a call's approval,
// whatever asked them: an MCP client's form, the approval's page, a task
// waiting for the console, the approvals API or [Registry.Decide].
type verdict uint8

const (
	// unsupported: nobody could be asked (no form or page the client can
	// show). The refusal stands.
	unsupported verdict = iota
	// nextRound: the question goes back in the round's result (the
	// sessionless protocol); the answer comes in the next round.
	nextRound
	// unanswered: the person was asked and did not decide: they dismissed
	// the form or the page, the client failed to show it, the wait ended
	// first, or another call used the approval. The refusal stands.
	unanswered
	// accepted: the person at the client confirmed the call in-band; the
	// approval is approved in their name.
	accepted
	// declined: the person at the client refused the call in-band; the
	// approval is denied in their name.
	declined
	// decided: a person approved or denied the approval where approvals
	// are decided (the console, the approvals API, Decide) while the call
	// waited.
	decided
	// broken: the person's answer breaks the confirmation form.
	broken
	// failed: asking failed (the door's state, the store).
	failed
)

// personAnswer is what came of asking a person about a call's approval:
// its verdict, and what the verdict carries.
type personAnswer struct {
	verdict  verdict
	approval store.Approval // decided: the approval as a person decided it
	field    FieldError     // broken: what breaks the form
	err      error          // failed: why
}

// askInBand is the end of a call that the confirmation stage did not let
// on, and whose request id has no outcome to replay: it asks the person,
// through the door's asker, to decide the pending approval that refused
// the call, and acts on their answer (answered): approved, the call goes
// on in the same pass, and uses the approval up as its execution starts.
// Any other refusal, and a call with no asker, keeps err. A refusal that
// stands is logged here, once.
func (r *Registry) askInBand(ctx context.Context, t *tool, req *Request, err error) error {
	var e *Error
	var pending *approve.Pending
	if !errors.As(err, &e) || e.Code != CodeConfirmationRequired && e.Code != CodePermissionDenied {
		return err // the stores', or an internal error, logged as they were made
	}
	if req.asker == nil || e.Code != CodeConfirmationRequired || !errors.As(err, &pending) {
		return r.refused(ctx, t, &req.Call, e)
	}
	form, _, _ := req.canonical(t) // made before the approval was
	input, perr := promptInput(form)
	if perr != nil {
		return r.refused(ctx, t, &req.Call, e)
	}
	q := personQuestion{tool: t.meta.Name, principal: req.Call.Principal, pending: pending, input: input, refusal: e}
	// A task waiting for a person is not running: it gives its place
	// under MaxInFlight back through release while it waits (it holds
	// nothing else yet), and takes one again in the limits stage once
	// approved.
	if req.task != nil {
		r.release(ctx, t, &req.held)
	}
	a, err := r.answered(ctx, t, req, q, req.asker.ask(ctx, q))
	if err == nil {
		// The wait may have lasted as long as the approval lives: the
		// caller's permission (the tool's Requires, the Authorize policy)
		// is checked again before the tool starts, as of now.
		if pe := r.permit(&req.exec.c, t); pe != nil {
			err = pe
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

// answered is the confirmation decision table: what a person's answer ans
// to q does to the call, whichever door asked. It returns the approval the
// call goes on by, or the refusal that stands.
func (r *Registry) answered(ctx context.Context, t *tool, req *Request, q personQuestion, ans personAnswer) (store.Approval, error) {
	id := q.pending.ID
	switch ans.verdict {
	case nextRound:
		return store.Approval{}, q.refusal // the question goes back in the round's result
	case accepted:
		a, err := r.decideByElicitation(ctx, id, true, req.Call.Principal)
		if err != nil {
			return store.Approval{}, r.storeError(ctx, t, err)
		}
		switch a.Status {
		case store.ApprovalApproved:
			req.asker.accepted(ctx, q, a)
			return a, nil
		case store.ApprovalDenied: // another person decided first
			return store.Approval{}, deniedRefusal(t, a)
		}
		return store.Approval{}, q.refusal // used by another call, or expired
	case declined:
		return store.Approval{}, r.declined(ctx, t, req.Call, id)
	case decided:
		if ans.approval.Status == store.ApprovalApproved {
			return ans.approval, nil
		}
		return store.Approval{}, deniedRefusal(t, ans.approval)
	case broken:
		f := ans.field
		return store.Approval{}, &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the confirmation form: " + describe(f), Fields: []FieldError{f}}
	case failed:
		return store.Approval{}, r.storeError(ctx, t, ans.err)
	}
	// Nobody decided: the refusal stands, in the door's words.
	return store.Approval{}, req.asker.standing(ctx, q, ans.verdict == unanswered)
}

// awaitPerson waits until a person decides approval id where approvals
// are decided (the console, the approvals API, Decide), for a door that
// sent the person there or a task that waits, and says what came of it:
// decided, approved or denied; unanswered, when the approval expired or
// another call used it first; failed, when ctx is done or the store
// failed.
func (r *Registry) awaitPerson(ctx context.Context, id string) personAnswer {
	a, err := r.awaitDecision(ctx, id)
	switch {
	case err != nil && ctx.Err() != nil:
		return personAnswer{verdict: failed, err: err} // the call's context: cancelled, or its deadline passed
	case err != nil:
		return personAnswer{verdict: failed, err: r.approvalStoreError(err)}
	case a.Status == store.ApprovalApproved || a.Status == store.ApprovalDenied:
		return personAnswer{verdict: decided, approval: a}
	}
	return personAnswer{verdict: unanswered}
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
	msg += t.redefinedNote()
	// The doors that reach a person read the approval from Err; the
	// details are the caller's copy.
	pending := &approve.Pending{ID: a.ID, Tool: t.meta.Name, URL: link, Digest: a.Digest, Permission: grant, Expires: a.Expires}
	return &Error{Code: CodeConfirmationRequired, Message: msg, Details: details, Err: pending}
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

// usedRefusal refuses to run the retry of a call that ran by approval a,
// used up, when the reservation stage finds no outcome of it to replay:
// the approval let one call run, and it did.
func usedRefusal(t *tool, a store.Approval) *Error {
	return &Error{
		Code:    CodeConfirmationRequired,
		Message: fmt.Sprintf("approval %s of %s was used by an earlier call with this request id, whose outcome is no longer kept; send a new request id to ask for a new approval", a.ID, t.meta.Name),
		Details: map[string]any{"tool": t.meta.Name, "approval_id": a.ID, "status": string(a.Status)},
	}
}

// declined denies the approval of a call whose confirmation the person
// declined, so that the call stays refused until the approval expires,
// and refuses it.
func (r *Registry) declined(ctx context.Context, t *tool, c Call, id string) error {
	if _, err := r.decideByElicitation(ctx, id, false, c.Principal); err != nil {
		r.logger.Error("carmy: approval store failed", "error", err)
	}
	return &Error{
		Code:    CodePermissionDenied,
		Message: fmt.Sprintf("The user declined this call of %s. Do not retry it: ask the user what they want instead.", t.meta.Name),
		Details: map[string]any{"tool": t.meta.Name, "approval_id": id, "reason": "declined"},
	}
}

// promptInput is an input as a person confirms it: its canonical form (the
// document the confirmation digest is over), indented, with every character
// that could hide or disguise text (controls, bidirectional overrides,
// zero-width and other format characters, line separators) escaped.
func promptInput(form []byte) (string, error) { return approve.Text(form) }
