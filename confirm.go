package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	if req.asker != nil {
		// Made before: the confirmation stage checks for a grant of it.
		_, digest, _ := req.canonical(t)
		if a, ok := req.asker.confirmedBefore(ctx, req.Call, digest); ok {
			req.approval = &a
			return nil
		}
	}
	form, digest, err := req.canonical(t)
	if err != nil {
		return r.internal(t, "", err, "cannot make the canonical form of a validated input")
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

// askInBand is the end of a call that the confirmation stage did not let
// on, and whose request id has no outcome to replay: it asks the person,
// through the door's asker, to decide the pending approval that refused
// the call; approved, the call goes on in the same pass, and uses the
// approval up as its execution starts. Any other refusal, and a call with
// no asker, keeps err. A refusal that stands is logged here, once.
func (r *Registry) askInBand(ctx context.Context, t *tool, req *Request, err error) error {
	var e *Error
	var pending *approve.Pending
	if !errors.As(err, &e) || e.Code != CodeConfirmationRequired && e.Code != CodePermissionDenied {
		return err // the stores', or an internal error, logged as they were made
	}
	if req.asker == nil || e.Code != CodeConfirmationRequired || !errors.As(err, &pending) {
		return r.refused(ctx, t, &req.Call, e)
	}
	form, digest, _ := req.canonical(t) // made before the approval was
	// A task waiting for a person is not running: it gives its place
	// under MaxInFlight back through release while it waits (it holds
	// nothing else yet), and takes one again in the limits stage once
	// approved.
	if req.task != nil {
		r.release(ctx, t, &req.held)
	}
	a, err := req.asker.ask(ctx, t, req.Call, form, digest, e, pending)
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

// personRefusal is the refusal of a call over a single-client transport
// (stdio) that waits for pending, a person's approval: it names what
// exists for that person, `carmy approvals` in a terminal and the
// loopback console (opened for them, its link with the secret in a file
// only the user can read), and says whether the person was asked already
// (asked: they closed the page or the form without deciding). Without a
// console, e stands.
func (r *Registry) personRefusal(ctx context.Context, e *Error, pending *approve.Pending, asked bool) error {
	base, _, err := r.http.localConsole(ctx)
	if err != nil {
		return e
	}
	page, expires := base+"/console", pending.Expires.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("%s needs the user's approval (approval %s): ask them to decide with `carmy approvals` in a terminal or at %s, then make the same call again before %s.",
		pending.Tool, pending.ID, page, expires)
	if asked {
		msg = fmt.Sprintf("The user did not decide on %s (approval %s). They can still decide with `carmy approvals` in a terminal or at %s; then make the same call again before %s.",
			pending.Tool, pending.ID, page, expires)
	}
	details := maps.Clone(e.Details)
	details["console"] = page
	details["host_help"] = fmt.Sprintf("a person approves or denies approval %s with `carmy approvals` in a terminal, or in the console at %s; a host may instead grant the permission %q, for this input only, or %q",
		pending.ID, page, pending.Permission, details["tool_permission"])
	out := *e
	out.Message, out.Details = msg, details
	return &out
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
