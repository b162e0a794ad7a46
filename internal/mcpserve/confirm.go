package mcpserve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// ConfirmByForm asks the person at the client, with a form, to confirm
// the call that waits for the approval named approval. In a session it
// asks and waits for the answer (an accepted answer that breaks the form
// as the client sent it, as [Peer.Ask] returns it).
//
// In the sessionless protocol the question goes back in the round's result
// ([ErrNeedsInput]), with a request state bound to the principal and to
// that approval (so to the call's tool and input); the answer counts only
// in the next round of the same call, with that state: never an answer
// sent unasked, nor one given about another input. Any other error is the
// host's state failing.
func (p *Peer) ConfirmByForm(ctx context.Context, approval string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if !p.sessionless {
		return p.Ask(ctx, confirmKey, params)
	}
	if p.rounds == nil {
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
	if !p.sessionless || p.rounds == nil {
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
	if !p.sessionless || p.rounds == nil {
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
	rs := p.rounds
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
