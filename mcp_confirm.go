package carmy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// mcpAsker asks the person at an MCP client to confirm a call in-band
// (a [personAsker]), and decides the call's approval by the answer. Where
// form confirmation applies (by default over a single-client transport;
// everywhere with [Builder.ElicitConfirmation], nowhere with
// [Builder.NoFormConfirmation]) a client that can show its user a form is
// asked to confirm with one that shows the call's canonical input:
// accepted, the approval is approved and the call goes on, using it up;
// declined, the approval is denied and the call refused as declined;
// dismissed, the refusal stands; an answer that breaks the form is
// invalid input. Otherwise a client that supports URL elicitation is sent
// the approval's page: once the user opened it, the call waits for a
// person's decision there (until the approval expires or the client gives
// up), and goes on by it. Over a single-client transport that page is a
// console that carmy serves on a loopback port, and its URL carries a
// one-time code for that console's secret, for the person at the client;
// other clients there get a refusal that names what the person can use
// (personRefusal). Other clients get the refusal.
//
// In the sessionless protocol the question goes back in the round's
// result, and the answer counts in the next round of the same call; a
// confirmation given holds, once each, for the rounds that the tool's own
// questions add, until the approval would have expired (confirmedBefore).
type mcpAsker struct {
	r *Registry
	p *mcpserve.Peer
}

func (m mcpAsker) ask(ctx context.Context, t *tool, c Call, form []byte, digest string, refusal *Error, pending *approve.Pending) (store.Approval, error) {
	r, p := m.r, m.p
	id := pending.ID
	q := mcpserve.Confirmation{Tool: t.meta.Name, Approval: id, Form: p.ConfirmsByForm(), URL: pending.URL}
	// personal is the refusal that stands: over a single-client
	// transport, one that names what the person can use, and says whether
	// they were asked.
	personal := func(asked bool) error {
		if p.Single() {
			return r.personRefusal(ctx, refusal, pending, asked)
		}
		return refusal
	}
	if q.Form {
		var err error
		if q.Input, err = promptInput(form); err != nil {
			return store.Approval{}, refusal
		}
	} else if p.Single() {
		q.URL = r.personalApprovalURL(ctx, id, pending.URL)
	}
	defer r.keepWaiting(ctx, p, t.meta.Name)()
	answer, err := p.Confirm(ctx, q)
	switch answer {
	case mcpserve.NotAsked:
		if err != nil && p.Sessionless() {
			return store.Approval{}, r.storeError(ctx, t, err) // the key that signs its state
		}
		if err != nil {
			return store.Approval{}, refusal
		}
		return store.Approval{}, personal(false)
	case mcpserve.Asking:
		return store.Approval{}, refusal // the question goes back in the round's result
	case mcpserve.Broken:
		var bad *mcpserve.BadAnswer
		errors.As(err, &bad)
		f := FieldError{Path: bad.Field, Message: bad.Message}
		return store.Approval{}, &Error{Code: CodeInvalidInput, Message: "the user's answer does not fit the confirmation form: " + describe(f), Fields: []FieldError{f}}
	case mcpserve.Declined:
		return store.Approval{}, r.declined(ctx, t, c, id)
	case mcpserve.Confirmed:
		a, err := r.decideByElicitation(ctx, id, true, c.Principal)
		if err != nil {
			return store.Approval{}, r.storeError(ctx, t, err)
		}
		if a.Status == store.ApprovalApproved { // not when another person decided otherwise first
			p.Confirmed(ctx, digest, id, time.Now().Add(r.approvals.timeout))
		}
		return a, decided(t, a, refusal)
	case mcpserve.Opened:
		a, err := r.awaitDecision(ctx, id)
		if err != nil || a.Status == store.ApprovalPending {
			return store.Approval{}, personal(true)
		}
		p.ElicitationComplete(ctx, id)
		if a.Status != store.ApprovalApproved && a.Status != store.ApprovalDenied {
			return store.Approval{}, personal(true) // used by another call, or expired
		}
		return a, decided(t, a, nil)
	}
	return store.Approval{}, personal(true) // dismissed: the call still needs a person's confirmation
}

// personProgressEvery is how often a call that waits for a person over a
// connection sends its client progress: well within the 30 or 60 seconds
// after which clients give up on a request by default, unless progress
// resets their timeout.
const personProgressEvery = 5 * time.Second

// keepWaiting sends the client of p progress, while a call of tool waits
// for a person (a form the client shows, a page the person opens, their
// decision there), when the client gave the call a progress token, so
// that a client that resets its timeout on progress keeps waiting. The
// function it returns stops it, once the wait is over.
func (r *Registry) keepWaiting(ctx context.Context, p *mcpserve.Peer, tool string) (stop func()) {
	if !p.WantsProgress() {
		return func() {}
	}
	every := cmp.Or(r.tuning.personProgress, personProgressEvery)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.Progress(ctx, float64(n), 0, "waiting for a person to decide on this call of "+tool)
		}
	}()
	return func() {
		cancel()
		<-done
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
	if !p.Sessionless() || !p.ConfirmsByForm() {
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
