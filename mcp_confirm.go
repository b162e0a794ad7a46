package carmy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// mcpAsker asks the person at an MCP client to confirm a call in-band
// (a [personAsker]). Where form confirmation applies
// ([Registry.asksByForm]: by default over a single-client transport) a
// client that can show its user a form is asked to confirm (byForm).
// Otherwise a client that supports URL elicitation is sent the approval's
// page (byURL). Other clients get the refusal.
type mcpAsker struct {
	r *Registry
	p *mcpserve.Peer
}

func (m mcpAsker) ask(ctx context.Context, t *tool, c Call, form []byte, digest string, refusal *Error, pending *approve.Pending) (store.Approval, error) {
	if m.r.asksByForm(m.p) && m.p.CanElicit() {
		return m.byForm(ctx, t, c, form, digest, refusal, pending)
	}
	return m.byURL(ctx, t, c, refusal, pending)
}

// byURL sends the user the page of the approval the call waits for (in a
// session, as a request; in the sessionless protocol, as a question of
// the round's result, answered in the next round): once the user opened
// it, the call waits for a person's decision there (until the approval
// expires or the client gives up), and goes on by it. Over a
// single-client transport that page is a console that carmy serves on a
// loopback port, and its URL carries a one-time code for that console's
// secret, for the person at the client; other clients there get a
// refusal that names what the person can use (personRefusal).
func (m mcpAsker) byURL(ctx context.Context, t *tool, c Call, e *Error, pending *approve.Pending) (store.Approval, error) {
	r, p := m.r, m.p
	id, link := pending.ID, pending.URL
	refusal := error(e)
	if p.Single() {
		link = r.personalApprovalURL(ctx, id, link)
		refusal = r.personRefusal(ctx, e, pending, false)
	}
	if link == "" || !p.CanElicitURL() {
		return store.Approval{}, refusal
	}
	if p.Single() {
		refusal = r.personRefusal(ctx, e, pending, true) // from here, they were asked
	}
	res, err := p.Ask(ctx, "carmy/approval/"+id, &mcp.ElicitParams{
		Mode:          "url",
		Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", t.meta.Name),
		URL:           link,
		ElicitationID: id,
	})
	if errors.Is(err, mcpserve.ErrNeedsInput) {
		return store.Approval{}, e // the question goes back in the round's result
	}
	if err == nil && res.Action == "decline" {
		return store.Approval{}, r.declined(ctx, t, c, id)
	}
	if err != nil || res.Action != "accept" {
		return store.Approval{}, refusal
	}
	a, err := r.awaitDecision(ctx, id)
	if err != nil || a.Status == store.ApprovalPending {
		return store.Approval{}, refusal
	}
	p.ElicitationComplete(ctx, id)
	return a, decided(t, a, refusal)
}

// asksByForm reports whether a call that needs confirmation is confirmed
// by a form that the client shows its user: by default over a
// single-client transport only, everywhere with
// [Builder.ElicitConfirmation], nowhere with [Builder.NoFormConfirmation].
func (r *Registry) asksByForm(p *mcpserve.Peer) bool {
	switch r.elicit {
	case formEverywhere:
		return true
	case formNever:
		return false
	}
	return p.Single()
}

// confirmForm is the form a person confirms a call with.
var confirmForm = map[string]any{
	"type":       "object",
	"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "description": "true to run the call"}},
	"required":   []string{"confirm"},
}

// byForm asks the person at the client, with a form that
// shows the call's canonical input, to confirm a call that was refused
// for want of confirmation, and decides the call's pending approval by
// the answer: accepted, the approval is approved and the call goes on,
// using it up; declined, the approval is denied and the call refused as
// declined; dismissed, the refusal stands. An answer that breaks the form
// is invalid input.
//
// In the sessionless protocol the question goes back in the call's result,
// with a request state bound to the principal and to the pending approval
// of the input shown (so to its tool and digest); the answer counts only
// in the next round of the same call, with that state, while the approval
// is pending. A confirmation given holds, once each, for the rounds that
// the tool's own questions add, until the approval would have expired.
func (m mcpAsker) byForm(ctx context.Context, t *tool, c Call, form []byte, digest string, refusal *Error, pending *approve.Pending) (store.Approval, error) {
	r, p := m.r, m.p
	id := pending.ID
	shown, err := promptInput(form)
	if err != nil {
		return store.Approval{}, refusal
	}
	params := &mcp.ElicitParams{
		Message:         fmt.Sprintf("Allow %s to run with this input?\n%s", c.Tool, shown),
		RequestedSchema: confirmForm,
	}
	res, err := p.ConfirmByForm(ctx, id, params)
	switch {
	case errors.Is(err, mcpserve.ErrNeedsInput):
		return store.Approval{}, refusal // the question goes back in the round's result
	case err != nil && p.Sessionless():
		return store.Approval{}, r.storeError(ctx, t, err) // the key that signs its state
	case err != nil:
		return store.Approval{}, refusal
	}
	switch res.Action {
	case "accept":
		yes, bad := confirmAnswer(res.Content)
		if bad != nil {
			return store.Approval{}, bad
		}
		if !yes {
			return store.Approval{}, r.declined(ctx, t, c, id)
		}
		a, err := r.decideByElicitation(ctx, id, true, c.Principal)
		if err != nil {
			return store.Approval{}, r.storeError(ctx, t, err)
		}
		p.Confirmed(ctx, digest, id, time.Now().Add(r.approvals.timeout))
		return a, decided(t, a, refusal)
	case "decline":
		return store.Approval{}, r.declined(ctx, t, c, id)
	}
	if p.Single() {
		return store.Approval{}, r.personRefusal(ctx, refusal, pending, true)
	}
	return store.Approval{}, refusal // dismissed: the call still needs a person's confirmation
}

// personRefusal is the refusal of a call over a single-client transport
// (stdio) that waits for pending, a person's approval: it names what
// exists for that person, `carmy approvals` in a terminal and the
// loopback console (opened for them, its link with the secret in a file
// only the user can read), and says whether the person was asked already
// (asked: they closed the page or the form without deciding). Without a
// console, e stands.
func (r *Registry) personRefusal(ctx context.Context, e *Error, pending *approve.Pending, asked bool) error {
	base, c, err := r.localConsole(ctx)
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
	details["host_help"] = fmt.Sprintf("a person approves or denies approval %s with `carmy approvals` in a terminal, or in the console at %s%s; a host may instead grant the permission %q, for this input only, or %q",
		pending.ID, page, linkIn(c.fileName()), pending.Permission, details["tool_permission"])
	out := *e
	out.Message, out.Details = msg, details
	return &out
}

// linkIn says where the console link with the secret is: in the file, if
// one was written.
func linkIn(file string) string {
	if file == "" {
		return ""
	}
	return " (its link with the secret is in " + file + ")"
}

// confirmAnswer reads an accepted confirmation form: whether the person
// confirmed, or the invalid input error of an answer that breaks the form.
func confirmAnswer(content map[string]any) (yes bool, bad *Error) {
	v, ok := content["confirm"]
	b, isBool := v.(bool)
	if ok && isBool {
		return b, nil
	}
	msg := "is required: answer true to run the call, false to refuse it"
	if ok {
		msg = "must be a boolean: true to run the call, false to refuse it"
	}
	f := FieldError{Path: "confirm", Message: msg}
	return false, &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the confirmation form: " + describe(f), Fields: []FieldError{f}}
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

// MinStateKeySize is the shortest key [Builder.StateKey] takes, in bytes.
const MinStateKeySize = 32

// The MCP door makes and takes signing keys of the size the builder takes
// (this index is out of range, and does not compile, otherwise).
var _ = [1]struct{}{}[MinStateKeySize-mcpserve.MinKeySize]

// StateKey sets the key that signs the request state the registry hands
// clients of the sessionless MCP protocol (2026-07-28): a confirmation a
// person gave in one round of a call, and the question asked of them, are
// honoured in the next round only when signed with this key. State signed
// by one registry never verifies in another, so a confirmation given to a
// staging registry is never taken by a production one in the same process.
//
// Without StateKey, a registry whose idempotency store keeps shared keys
// ([store.KeyStore]: the in-memory store, redisstore) takes the store's
// key, made at random once: the hosts of one deployment share it, and a
// call's next round verifies on whichever host it lands; registries that
// share no store share no key. Give every host of a deployment the same
// key here (or state_key in carmy.toml, CARMY_STATE_KEY) when their store
// keeps none. The key must be at least [MinStateKeySize] random bytes,
// kept secret; the builder keeps its own copy.
func (b *Builder) StateKey(key []byte) *Builder {
	if len(key) < MinStateKeySize {
		b.misuse("Builder.StateKey was given %d bytes; give at least %d random bytes", len(key), MinStateKeySize)
		return b
	}
	b.stateKey = slices.Clone(key)
	return b
}

// confirmedBefore returns the approval of a confirmation that the server
// gave, in an earlier round of the sessionless protocol, this principal
// for this tool and input, when the call carries its state, not expired
// and not used before; it uses that state up, and hands the next round a
// new one. The call's records name that approval and its approver, as
// those of the round that used it do.
func (m mcpAsker) confirmedBefore(ctx context.Context, c Call, digest string) (store.Approval, bool) {
	r, p := m.r, m.p
	if !p.Sessionless() || !r.asksByForm(p) || !p.CanElicit() {
		return store.Approval{}, false
	}
	id, ok := p.ConfirmedBefore(ctx, digest)
	if !ok {
		return store.Approval{}, false
	}
	a, err := r.approvals.store.Get(ctx, id)
	if err != nil || a.Approver == "" {
		// Gone, or kept by another host alone: the state was handed on
		// only after the person at this client confirmed.
		a = store.Approval{ID: id, Approver: elicitationApprover(c.Principal)}
	}
	return a, true
}

// promptInput is an input as a person confirms it: its canonical form (the
// document the confirmation digest is over), indented, with every character
// that could hide or disguise text (controls, bidirectional overrides,
// zero-width and other format characters, line separators) escaped.
func promptInput(form []byte) (string, error) { return approve.Text(form) }

// needsInput is the error that ends a run of a tool whose question the
// client of the sessionless protocol has not answered yet, as the tool and
// the runtime see it: retryable, so that an idempotency record never keeps
// it. The client gets the question and calls again with the answer, and
// the tool runs again from the start.
func needsInput() *Error {
	return &Error{
		Code:      CodeUnavailable,
		Message:   "the tool needs an answer from the user first; the client asks them and calls again with the answer",
		Retryable: true,
		Err:       mcpserve.ErrNeedsInput,
	}
}
