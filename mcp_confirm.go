package carmy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/canon"
	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// confirmOverMCP handles a confirmation_required refusal of an MCP call.
// Where form confirmation applies ([Registry.asksByForm]: by default over
// a single-client transport) a client that can show its user a form is
// asked to confirm (confirmByElicitation). Otherwise a client that
// supports URL elicitation is sent the approval's page (in a session, as a
// request; in the sessionless protocol, as a question of the call's
// result, answered in the next round): once the user opened it, the call
// waits for a person's decision there (until the approval expires or the
// client gives up), then runs again, which uses the approval up or gets
// the denial. Over a single-client transport that page is a console that
// carmy serves on a loopback port, and its URL carries the console
// secret, for the person at the client. Other clients get the refusal.
func (r *Registry) confirmOverMCP(ctx context.Context, p *mcpserve.Peer, c Call, refusal error) (Result, error) {
	var e *Error
	if !errors.As(refusal, &e) {
		return Result{}, refusal
	}
	if r.asksByForm(p) && p.CanElicit() {
		return r.confirmByElicitation(ctx, p, c, e)
	}
	pending, ok := approve.PendingOf(e)
	if !ok {
		return Result{}, refusal // no pending approval to ask a person about
	}
	id, link := pending.ID, pending.URL
	if p.Single() {
		link = r.personalApprovalURL(ctx, id, link)
	}
	if link == "" || !p.CanElicitURL() {
		return Result{}, refusal
	}
	res, err := p.Ask(ctx, "carmy/approval/"+id, &mcp.ElicitParams{
		Mode:          "url",
		Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", c.Tool),
		URL:           link,
		ElicitationID: id,
	})
	if errors.Is(err, mcpserve.ErrNeedsInput) {
		return Result{}, needsInput()
	}
	if err == nil && res.Action == "decline" {
		return Result{}, r.declined(ctx, r.tools[c.Tool], c, id)
	}
	if err != nil || res.Action != "accept" {
		return Result{}, refusal
	}
	a, err := r.awaitDecision(ctx, id)
	if err != nil || a.Status == store.ApprovalPending {
		return Result{}, refusal
	}
	p.ElicitationComplete(ctx, id)
	return r.executeFor(ctx, c, p)
}

// personalApprovalURL is the page where the person at a single-client
// transport's client decides on approval id: the console of the server
// that link (the approval's URL, if any) is on, else the console that
// carmy serves on a loopback port for the purpose, opened on the first
// need. The URL carries the console secret, if the registry has one: the
// client hands it to its user, not to the model. It is "" when no console
// can be served.
func (r *Registry) personalApprovalURL(ctx context.Context, id, link string) string {
	base, ok := strings.CutSuffix(link, "/console?approval="+url.QueryEscape(id))
	if !ok || base == "" {
		var err error
		if base, err = r.localConsole(ctx); err != nil {
			r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
			return ""
		}
	}
	u, err := url.Parse(r.ConsoleURL(base))
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("approval", id)
	u.RawQuery = q.Encode()
	return u.String()
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

// confirmByElicitation asks the person at the client, with a form that
// shows the call's canonical input, to confirm a call that was refused
// for want of confirmation, and decides the call's pending approval by
// the answer: accepted, the approval is approved and the call runs,
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
func (r *Registry) confirmByElicitation(ctx context.Context, p *mcpserve.Peer, c Call, refusal *Error) (Result, error) {
	t, ok := r.tools[c.Tool]
	if !ok {
		return Result{}, refusal
	}
	form, err := t.canonicalInput(c.Input)
	if err != nil {
		return Result{}, refusal
	}
	digest := canon.Sum(form)
	if expires, ok := r.confirmedBefore(ctx, p, c, digest); ok {
		return r.runConfirmed(ctx, p, c, digest, expires)
	}
	pending, ok := approve.PendingOf(refusal)
	if !ok {
		return Result{}, refusal // no pending approval to decide (one used or expired)
	}
	id := pending.ID
	shown, err := promptInput(form)
	if err != nil {
		return Result{}, refusal
	}
	params := &mcp.ElicitParams{
		Message:         fmt.Sprintf("Allow %s to run with this input?\n%s", c.Tool, shown),
		RequestedSchema: confirmForm,
	}
	var res *mcp.ElicitResult
	if p.Sessionless() {
		// An answer counts only with the state of the question asked about
		// this very approval: never one sent unasked, nor one given about
		// another input.
		ans, ok := p.Answer(confirmKey)
		if !ok || !hmac.Equal([]byte(p.RequestState()), []byte(askState(c.Principal, id))) {
			p.Question(confirmKey, params)
			p.SetState(askState(c.Principal, id))
			return Result{}, needsInput()
		}
		res = ans
	} else if res, err = p.Ask(ctx, confirmKey, params); err != nil {
		return Result{}, refusal
	}
	switch res.Action {
	case "accept":
		yes, bad := confirmAnswer(res.Content)
		if bad != nil {
			return Result{}, r.refused(ctx, t, &c, bad)
		}
		if !yes {
			return Result{}, r.declined(ctx, t, c, id)
		}
		r.decideByElicitation(ctx, id, true, c.Principal)
		if p.Sessionless() {
			p.SetState(r.confirmedState(c, digest, time.Now().Add(r.approvals.timeout)))
		}
		return r.executeFor(ctx, c, p)
	case "decline":
		return Result{}, r.declined(ctx, t, c, id)
	}
	return Result{}, refusal // dismissed: the call still needs a person's confirmation
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
	r.decideByElicitation(ctx, id, false, c.Principal)
	return r.refused(ctx, t, &c, &Error{
		Code:    CodePermissionDenied,
		Message: fmt.Sprintf("The user declined this call of %s. Do not retry it: ask the user what they want instead.", t.meta.Name),
		Details: map[string]any{"tool": t.meta.Name, "approval_id": id, "reason": "declined"},
	})
}

// decideByElicitation records the decision of the person at the MCP
// client of principal on approval id, and wakes the calls that wait for
// it. An approval that is no longer pending keeps its state: the call that
// follows gets what it says.
func (r *Registry) decideByElicitation(ctx context.Context, id string, approve bool, principal string) {
	if err := r.decide(ctx, id, approve, "elicitation:"+principal); err != nil && !errors.Is(err, store.ErrApprovalState) {
		r.logger.Error("carmy: approval store failed", "error", err)
	}
}

// stateKey signs the request states that the server hands clients of the
// sessionless protocol. A restart makes new ones: a client then confirms
// again.
var stateKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand's Read never fails
	return k
}()

// stateMAC signs the parts of a request state.
func stateMAC(parts ...string) string {
	m := hmac.New(sha256.New, stateKey)
	for _, s := range parts {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// askState is the request state of the confirmation question about
// approval id, asked of principal.
func askState(principal, id string) string {
	return "carmy/ask:" + stateMAC("ask", principal, id)
}

// confirmedState is the request state of a confirmation given: the
// principal, tool and digest of the input confirmed, when it expires, and
// a nonce that lets it be used once.
func (r *Registry) confirmedState(c Call, digest string, expires time.Time) string {
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce, exp := hex.EncodeToString(n[:]), strconv.FormatInt(expires.Unix(), 10)
	return "carmy/confirmed:" + nonce + "." + exp + "." + stateMAC("confirmed", c.Principal, c.Tool, digest, nonce, exp)
}

// confirmedBefore reports whether the call, in the sessionless protocol,
// carries the state of a confirmation the server gave this principal for
// this tool and input in an earlier round, not expired and not used
// before, and when it expires; it uses it up.
func (r *Registry) confirmedBefore(ctx context.Context, p *mcpserve.Peer, c Call, digest string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(p.RequestState(), "carmy/confirmed:")
	parts := strings.Split(rest, ".")
	if !p.Sessionless() || !ok || len(parts) != 3 || !hmac.Equal([]byte(parts[2]), []byte(stateMAC("confirmed", c.Principal, c.Tool, digest, parts[0], parts[1]))) {
		return time.Time{}, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	expires := time.Unix(exp, 0)
	if err != nil || !time.Now().Before(expires) {
		return time.Time{}, false
	}
	return expires, r.useOnce(ctx, c, parts[0], time.Until(expires))
}

// runConfirmed runs a call whose confirmation an earlier round gave, with
// a grant bound to its input, and hands the next round a new state.
func (r *Registry) runConfirmed(ctx context.Context, p *mcpserve.Peer, c Call, digest string, expires time.Time) (Result, error) {
	p.SetState(r.confirmedState(c, digest, expires))
	c.Permissions = append(slices.Clip(c.Permissions), r.tools[c.Tool].confirm+":"+digest)
	return r.executeFor(ctx, c, p)
}

// useOnce records the nonce of a request state as used, in the
// idempotency store so that every host sees it, and reports whether this
// was its first use. The key's request id has a space, which no call's
// request id has.
func (r *Registry) useOnce(ctx context.Context, c Call, nonce string, ttl time.Duration) bool {
	key := store.Key{Principal: c.Principal, Tool: c.Tool, RequestID: "confirmed " + nonce}
	res, err := r.store.Begin(ctx, key, "", time.Minute)
	if err != nil || !res.Owned {
		return false
	}
	if err := r.store.Complete(ctx, key, res.Token, store.Record{}, max(ttl, time.Second)); err != nil {
		r.logger.Error("carmy: cannot record a confirmation's use", "tool", c.Tool, "error", err)
		return false
	}
	return true
}

// loopbackConsole is the registry's [Registry.Handler] served on a
// loopback port that the system picks, for the person at the client of a
// single-client transport (stdio) to decide approvals in the console:
// opened the first time such a client needs it, closed with the registry.
type loopbackConsole struct {
	once sync.Once
	base string
	err  error
}

// localConsole returns the base URL of the registry's loopback console,
// opening it on the first call.
func (r *Registry) localConsole(ctx context.Context) (string, error) {
	lc := &r.loopback
	lc.once.Do(func() {
		if r.streams.Err() != nil {
			lc.err = errors.New("the registry is closed")
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lc.err = err
			return
		}
		srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: r.tuning.readHeader(), IdleTimeout: r.tuning.idle()}
		go func() { _ = srv.Serve(ln) }()
		context.AfterFunc(r.streams, func() { _ = srv.Close() })
		lc.base = "http://" + ln.Addr().String()
		r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: serving the console for approvals", slog.String("addr", ln.Addr().String()))
	})
	return lc.base, lc.err
}

// promptInput is an input as a person confirms it: its canonical form (the
// document the confirmation digest is over), indented, with every character
// that could hide or disguise text (controls, bidirectional overrides,
// zero-width and other format characters, line separators) escaped.
func promptInput(form []byte) (string, error) { return approve.Text(form) }

// confirmKey is the id of the confirmation question in the sessionless
// protocol's input requests.
const confirmKey = "carmy/confirm"

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
