package mcpserve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// confirmKey is the id of the confirmation question in the sessionless
// protocol's input requests.
const confirmKey = "carmy/confirm"

// errNoState: the door keeps no state across rounds (no [Config].State).
var errNoState = errors.New("mcpserve: the server keeps no request state")

// Confirmation is a call that waits for a person's approval, as the door
// asks the person at the client about it.
type Confirmation struct {
	Tool string
	// Approval is the id of the approval the call waits for.
	Approval string
	// Form lets the client show its user a form to confirm the call by,
	// if it can; Input is the call's input as the form shows it.
	Form  bool
	Input string
	// URL is the page where a person decides the approval, for a client
	// that can send its user to one; "" for none.
	URL string
}

// Answer is what came of asking the person at the client to confirm a
// call.
type Answer int

const (
	// NotAsked: the client cannot be asked (no elicitation that fits, no
	// page to send its user to).
	NotAsked Answer = iota
	// Asking: the question goes back in the round's result (the
	// sessionless protocol); the answer comes in the next round.
	Asking
	// Dismissed: the person closed the form or the page without deciding,
	// or the client failed to show it.
	Dismissed
	// Confirmed: the person confirmed the call by the form.
	Confirmed
	// Declined: the person refused the call, by the form or the page.
	Declined
	// Opened: the person opened the approval's page, where a person
	// decides.
	Opened
	// Broken: the person's answer breaks the form ([BadAnswer]).
	Broken
	// Failed: the form could not be put: in the sessionless protocol, the
	// host's state failing.
	Failed
)

// confirmForm is the form a person confirms a call with.
var confirmForm = map[string]any{
	"type":       "object",
	"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "description": "true to run the call"}},
	"required":   []string{"confirm"},
}

// Confirm asks the person at the client to confirm the call q: by a form
// that shows its input where q allows one and the client shows forms,
// else by sending them to q's page where the client can: the MCP answer
// (the SDK's elicitation result) as an [Answer]. Its error is a
// [*BadAnswer] with Broken, and why with Failed.
func (p *Peer) Confirm(ctx context.Context, q Confirmation) (Answer, error) {
	if q.Form && p.CanElicit() {
		return p.confirmByForm(ctx, q)
	}
	if q.URL == "" || !p.CanElicitURL() {
		return NotAsked, nil
	}
	res, err := p.Ask(ctx, "carmy/approval/"+q.Approval, &mcp.ElicitParams{
		Mode:          "url",
		Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", q.Tool),
		URL:           q.URL,
		ElicitationID: q.Approval,
	})
	switch {
	case errors.Is(err, ErrNeedsInput):
		return Asking, nil
	case err != nil:
		return Dismissed, nil
	case res.Action == "accept":
		return Opened, nil
	case res.Action == "decline":
		return Declined, nil
	}
	return Dismissed, nil
}

// confirmByForm asks the person to confirm q with a form that shows its
// input.
func (p *Peer) confirmByForm(ctx context.Context, q Confirmation) (Answer, error) {
	res, err := p.askForm(ctx, q.Approval, &mcp.ElicitParams{
		Message:         fmt.Sprintf("Allow %s to run with this input?\n%s", q.Tool, q.Input),
		RequestedSchema: confirmForm,
	})
	switch {
	case errors.Is(err, ErrNeedsInput):
		return Asking, nil
	case err != nil && p.sessionless:
		return Failed, err
	case err != nil:
		return Dismissed, nil // the client failed to show the form
	}
	switch res.Action {
	case "accept":
		v, ok := res.Content["confirm"]
		yes, isBool := v.(bool)
		switch {
		case !ok:
			return Broken, &BadAnswer{Field: "confirm", Message: "is required: answer true to run the call, false to refuse it"}
		case !isBool:
			return Broken, &BadAnswer{Field: "confirm", Message: "must be a boolean: true to run the call, false to refuse it"}
		case yes:
			return Confirmed, nil
		}
		return Declined, nil
	case "decline":
		return Declined, nil
	}
	return Dismissed, nil
}

// BadAnswer is a confirmation form's answer that breaks the form: Field
// is the form's field, and Message what is wrong with its value.
type BadAnswer struct {
	Field   string
	Message string
}

func (b *BadAnswer) Error() string { return b.Field + " " + b.Message }

// askForm puts the confirmation form about approval to the person. In a
// session it asks and waits for the answer (an accepted answer that breaks
// the form as the client sent it, as [Peer.Ask] returns it).
//
// In the sessionless protocol the question goes back in the round's result
// ([ErrNeedsInput]), with a request state bound to the principal and to
// that approval (so to the call's tool and input); the answer counts only
// in the next round of the same call, with that state: never an answer
// sent unasked, nor one given about another input. Any other error is the
// host's state failing.
func (p *Peer) askForm(ctx context.Context, approval string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if !p.sessionless {
		return p.Ask(ctx, confirmKey, params)
	}
	if p.rounds.state == nil {
		return nil, errNoState
	}
	ans, ok := p.Answer(confirmKey)
	mac, err := p.rounds.state.Signer.sign(ctx, "ask", p.rounds.principal, approval)
	if err != nil {
		return nil, err
	}
	asked := "carmy/ask:" + mac
	if !ok || !hmac.Equal([]byte(p.RequestState()), []byte(asked)) {
		p.Question(confirmKey, params)
		p.SetState(asked)
		return nil, ErrNeedsInput
	}
	return ans, nil
}

// Confirmed hands the next round of the sessionless protocol the state of
// a confirmation that the person gave on approval, for the call's input of
// digest (the host's digest of its canonical form), until expires: a tool
// whose own questions add rounds runs in them without asking again, once
// each. It does nothing in a session.
func (p *Peer) Confirmed(ctx context.Context, digest, approval string, expires time.Time) {
	if !p.sessionless || p.rounds.state == nil {
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce, exp := hex.EncodeToString(n[:]), strconv.FormatInt(expires.Unix(), 10)
	mac, err := p.rounds.confirmedMAC(ctx, digest, approval, nonce, exp)
	if err != nil {
		// The next round then asks again.
		if l := p.rounds.state.Logger; l != nil {
			l.Error("carmy: cannot sign a confirmation's state", "tool", p.rounds.tool, "error", err)
		}
		return
	}
	p.SetState("carmy/confirmed:" + nonce + "." + exp + "." + approval + "." + mac)
}

// ConfirmedBefore reports whether this round of the sessionless protocol
// carries the state of a confirmation ([Peer.Confirmed]) that an earlier
// round of this principal's call of this tool, with the input of digest,
// was given, not expired and not used before, and returns the approval it
// was given on. It uses that state up, and hands the next round a new one.
func (p *Peer) ConfirmedBefore(ctx context.Context, digest string) (approval string, ok bool) {
	if !p.sessionless || p.rounds.state == nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(p.RequestState(), "carmy/confirmed:")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 4 {
		return "", false
	}
	nonce, exp, id := parts[0], parts[1], parts[2]
	mac, err := p.rounds.confirmedMAC(ctx, digest, id, nonce, exp)
	if err != nil || !hmac.Equal([]byte(parts[3]), []byte(mac)) {
		return "", false
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	expires := time.Unix(n, 0)
	rs := &p.rounds
	if err != nil || !time.Now().Before(expires) || rs.state.UseOnce == nil ||
		!rs.state.UseOnce(ctx, rs.principal, rs.tool, nonce, max(time.Until(expires), time.Second)) {
		return "", false
	}
	p.Confirmed(ctx, digest, id, expires)
	return id, true
}

// confirmedMAC signs the state of a confirmation given: the principal,
// tool and digest of the input confirmed, the approval the person
// decided, its nonce and when it expires.
func (rs *rounds) confirmedMAC(ctx context.Context, digest, approval, nonce, exp string) (string, error) {
	return rs.state.Signer.sign(ctx, "confirmed", rs.principal, rs.tool, digest, approval, nonce, exp)
}

// PersonWaits is a call over a single-client transport (stdio) that waits
// for a person's approval, as the refusal the model reads names what
// exists for that person: `carmy approvals` in a terminal, and the
// loopback console whose page is Console.
type PersonWaits struct {
	Tool, Approval string
	Console        string // the console's page
	Expires        string // when the approval expires, RFC 3339
	// Permission and ToolPermission are the grants a host may give
	// instead: for this input only, and for every call of the tool.
	Permission, ToolPermission string
	// Asked: the person was asked, and closed the form or the page
	// without deciding.
	Asked bool
}

// Message is the refusal's message, for the model: what to tell the user
// and what to do next.
func (w PersonWaits) Message() string {
	if w.Asked {
		return fmt.Sprintf("The user did not decide on %s (approval %s). They can still decide with `carmy approvals` in a terminal or at %s; then make the same call again before %s.",
			w.Tool, w.Approval, w.Console, w.Expires)
	}
	return fmt.Sprintf("%s needs the user's approval (approval %s): ask them to decide with `carmy approvals` in a terminal or at %s, then make the same call again before %s.",
		w.Tool, w.Approval, w.Console, w.Expires)
}

// HostHelp is what only a host can do about the call, for the refusal's
// details.
func (w PersonWaits) HostHelp() string {
	return fmt.Sprintf("a person approves or denies approval %s with `carmy approvals` in a terminal, or in the console at %s; a host may instead grant the permission %q, for this input only, or %q",
		w.Approval, w.Console, w.Permission, w.ToolPermission)
}

// TaskWaits is the status message of a task that waits for a person's
// approval; link, if not "", is the loopback console's page of it, which
// grants nothing by itself: the person decides there with the console's
// secret, or with `carmy approvals`.
func TaskWaits(approval, link string) string {
	msg := "waiting for a person to approve the call (approval " + approval + ")"
	if link != "" {
		msg += ": the user decides with `carmy approvals` in a terminal, or at " + link
	}
	return msg
}
