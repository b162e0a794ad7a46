package carmy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/canon"
	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// In the sessionless protocol (2026-07-28) a server asks the client's
// user in the call's result: the questions, and a request state that the
// client echoes with the answers when it calls again. carmy's state is
// sealed: signed with the registry's key over the principal, the tool and
// the call's input, it names the questions asked and carries what the
// server keeps across rounds (a confirmation asked or given). A call that
// echoes a state that does not verify (tampered with, made by another
// server, or for another principal, tool or input) is refused with
// invalid params before anything runs; an answer to a question the state
// does not name is never taken. Since the tool runs again from the start
// in every round, the state also carries the answers of the rounds
// before, for the questions the tool asks again.

// roundPrefix starts every request state carmy hands out.
const roundPrefix = "carmy/round:"

// round is what a sealed request state holds.
type round struct {
	Asked    []string             `json:"q"`
	Answered mcp.InputResponseMap `json:"a,omitempty"`
	State    string               `json:"s,omitempty"`
	Expires  int64                `json:"e"`
}

// openRound reads the request state that a call of the sessionless
// protocol echoes, and hands the peer the answers to the questions it
// names and the state kept under its seal. A call without a state, or
// with one past its expiry, is a first round: its answers are not taken,
// and the tool asks again. A state that does not verify is the error to
// answer the call with.
func (r *Registry) openRound(ctx context.Context, p *mcpserve.Peer, c Call) error {
	state, answers := p.Echoed()
	if state == "" {
		return nil
	}
	rest, ok := strings.CutPrefix(state, roundPrefix)
	payload, mac, cut := strings.Cut(rest, ".")
	want, err := r.roundMAC(ctx, c, payload)
	if err != nil {
		return err
	}
	if !ok || !cut || !hmac.Equal([]byte(mac), []byte(want)) {
		return badState("the request state is not one this server handed out for this call; call again without it")
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	var rd round
	if err != nil || json.Unmarshal(b, &rd) != nil {
		return badState("the request state cannot be read")
	}
	if time.Now().Unix() >= rd.Expires {
		return nil
	}
	taken := mcp.InputResponseMap{}
	for id, a := range rd.Answered {
		taken[id] = a
	}
	for _, id := range rd.Asked {
		if a, ok := answers[id]; ok {
			taken[id] = a
		}
	}
	p.Take(taken, rd.State)
	return nil
}

// sealRound seals the state of the round that the call's run asks for,
// if it asked anything: valid as long as an approval waits for a person.
func (r *Registry) sealRound(ctx context.Context, p *mcpserve.Peer, c Call) {
	ids, answered, state := p.Asked()
	if ids == nil {
		return
	}
	// A confirmation answered is kept as the state it led to, never as an
	// answer: it counts once, in the round that answers the question.
	carried := mcp.InputResponseMap{}
	for id, a := range answered {
		if id != confirmKey {
			carried[id] = a
		}
	}
	b, _ := json.Marshal(round{Asked: ids, Answered: carried, State: state, Expires: time.Now().Add(r.approvals.timeout).Unix()})
	payload := base64.RawURLEncoding.EncodeToString(b)
	mac, err := r.roundMAC(ctx, c, payload)
	if err != nil {
		// Without the key nothing can be sealed: the next round asks again.
		return
	}
	p.Seal(roundPrefix + payload + "." + mac)
}

// roundMAC signs a round's payload with the registry's key, for the call's
// principal, tool and input.
func (r *Registry) roundMAC(ctx context.Context, c Call, payload string) (string, error) {
	return r.signer.mac(ctx, "round", c.Principal, c.Tool, inputDigest(c.Input), payload)
}

// inputDigest identifies a call's input whatever the spacing and order of
// its JSON: the digest of its canonical form, or of its bytes when it has
// none.
func inputDigest(input []byte) string {
	if form, err := canon.Form(input, nil); err == nil {
		return canon.Sum(form)
	}
	sum := sha256.Sum256(input)
	return hex.EncodeToString(sum[:])
}

// badState is the error of a call whose request state does not verify.
func badState(why string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid request state: " + why}
}

// missingCapability is the protocol error of a sessionless call that ended
// with a question its client cannot answer, if err is one.
func missingCapability(p *mcpserve.Peer, err error) (*jsonrpc.Error, bool) {
	var m *mcpserve.MissingCapability
	if !p.Sessionless() || !errors.As(err, &m) {
		return nil, false
	}
	return m.RPCError(), true
}
