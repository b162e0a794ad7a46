//lint:file-ignore SA1019 sampling is deprecated from 2026-07-28 on, and still what a mounted upstream may ask its caller for.

package mcpserve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/canon"
	"github.com/carmy-dev/carmy/internal/mcpclient"
	"github.com/carmy-dev/carmy/internal/mcpwire"
	"github.com/carmy-dev/carmy/store"
)

// In the sessionless protocol (2026-07-28) a server asks the client's
// user in the call's result: the questions, and a request state that the
// client echoes with the answers when it calls again. The door's state is
// sealed: signed with the host's key over the principal, the tool and the
// call's input, it names the questions asked and carries what the door
// keeps across rounds (a confirmation asked or given). A call that echoes
// a state that does not verify (tampered with, made by another host, or
// for another principal, tool or input) is refused with invalid params
// before anything runs; an answer to a question the state does not name
// is never taken. Since the tool runs again from the start in every round,
// the state also carries the answers of the rounds before, for the
// questions the tool asks again.

// MinKeySize is the shortest key a [Signer] signs with, in bytes.
const MinKeySize = 32

// Signer signs a host's sessionless request states, with the key the host
// was given, the store's shared key, or a key of its own made at random.
// The store's key is read on first need, and again after a failure, so a
// store that is down when the host starts delays nothing but the first
// confirmation. Safe for concurrent use.
type Signer struct {
	shared store.KeyStore // whose key signs, when key is nil until read

	mu  sync.Mutex
	key []byte
}

// keyName is the name of the signing key in a [store.KeyStore].
const keyName = "state"

// NewSigner is the signer of a host given key (nil for none), whose
// idempotency store is s.
func NewSigner(key []byte, s store.IdempotencyStore) *Signer {
	if key != nil {
		return &Signer{key: key}
	}
	if ks, ok := s.(store.KeyStore); ok {
		return &Signer{shared: ks}
	}
	k := make([]byte, MinKeySize)
	_, _ = rand.Read(k) // crypto/rand's Read never fails
	return &Signer{key: k}
}

// sign signs the parts of a request state.
func (s *Signer) sign(ctx context.Context, parts ...string) (string, error) {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	if key == nil {
		k, err := s.shared.SharedKey(ctx, keyName)
		if err == nil && len(k) < MinKeySize {
			err = fmt.Errorf("the store's shared key is %d bytes long, fewer than %d", len(k), MinKeySize)
		}
		if err != nil {
			return "", err
		}
		s.mu.Lock()
		if s.key == nil {
			s.key = k
		}
		key = s.key
		s.mu.Unlock()
	}
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil)), nil
}

// State is what the door needs of the host to keep state across the
// rounds of the sessionless protocol: its signer, how long a round's state
// holds, and one-time nonces.
type State struct {
	Signer *Signer
	// TTL is how long a round's state holds: as long as an approval waits
	// for a person.
	TTL time.Duration
	// UseOnce reports whether nonce of principal's call of tool is used
	// for the first time, and records its use for ttl; false when the
	// host cannot tell.
	UseOnce func(ctx context.Context, principal, tool, nonce string, ttl time.Duration) bool
	// Logger records a state that cannot be signed.
	Logger *slog.Logger
}

// openRounds binds a call of the sessionless protocol to the host's state
// across rounds, and opens its round: the error is that of a state that
// does not verify, to answer the call with. The round of a call not
// authenticated is not opened: the host refuses the call.
func (s *Server) openRounds(ctx context.Context, c *Call) error {
	if !c.Peer.sessionless || s.cfg.State == nil {
		return nil
	}
	c.Peer.rounds = rounds{state: s.cfg.State, principal: c.Caller.Principal, tool: c.Tool, input: c.Params.Arguments}
	if !c.Authenticated {
		return nil
	}
	return c.Peer.rounds.open(ctx, c.Peer)
}

// rounds is the state of one call's rounds: the call's principal, tool
// and input, and the host's [State].
type rounds struct {
	state     *State
	principal string
	tool      string
	input     json.RawMessage
}

// roundPrefix starts every request state the door hands out.
const roundPrefix = "carmy/round:"

// round is what a sealed request state holds.
type round struct {
	Asked    []string             `json:"q"`
	Answered mcp.InputResponseMap `json:"a,omitempty"`
	State    string               `json:"s,omitempty"`
	Expires  int64                `json:"e"`
}

// open reads the request state that a call of the sessionless protocol
// echoes, and hands the peer the answers to the questions it names and
// the state kept under its seal. A call without a state, or with one past
// its expiry, is a first round: its answers are not taken, and the tool
// asks again. A state that does not verify is the error to answer the
// call with.
func (rs *rounds) open(ctx context.Context, p *Peer) error {
	state, answers := p.req.Params.RequestState, p.req.Params.InputResponses // as the client sent them
	if state == "" {
		return nil
	}
	rest, ok := strings.CutPrefix(state, roundPrefix)
	payload, mac, cut := strings.Cut(rest, ".")
	want, err := rs.mac(ctx, payload)
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

// seal seals the state of the round that the call's run asks for, if it
// asked anything: valid as long as an approval waits for a person.
func (rs *rounds) seal(ctx context.Context, p *Peer) {
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
	b, _ := json.Marshal(round{Asked: ids, Answered: carried, State: state, Expires: time.Now().Add(rs.state.TTL).Unix()})
	payload := base64.RawURLEncoding.EncodeToString(b)
	mac, err := rs.mac(ctx, payload)
	if err != nil {
		// Without the key nothing can be sealed: the next round asks again.
		return
	}
	p.Seal(roundPrefix + payload + "." + mac)
}

// mac signs a round's payload, for the call's principal, tool and input.
func (rs *rounds) mac(ctx context.Context, payload string) (string, error) {
	return rs.state.Signer.sign(ctx, "round", rs.principal, rs.tool, inputDigest(rs.input), payload)
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

// A mounted upstream's prompt or resource may ask the caller first, in
// the rounds of the sessionless protocol: its questions reach the caller under the
// upstream's keys, and the caller's next round reaches the upstream with
// the answers and the upstream's request state. The caller never holds
// the upstream's state as it is: the door wraps it, signed over the
// principal, the prompt and its arguments (or the resource) and the
// questions asked, so that a caller cannot forge an upstream's state,
// replay one another caller or another read was given, or slip in an answer to a question the
// upstream did not ask. The upstream's state stays opaque to the door; the
// upstream checks it as its own.

// upstreamPrefix starts every request state that wraps an upstream's.
const upstreamPrefix = "carmy/upstream:"

// upstreamRound is what a wrapped state holds: the upstream's state, the
// keys of the questions the caller was asked, those of the roots
// questions the mount answers itself, and its expiry.
type upstreamRound struct {
	State   string   `json:"s,omitempty"`
	Asked   []string `json:"q"`
	Roots   []string `json:"r,omitempty"`
	Expires int64    `json:"e"`
}

// readRound is the round of a caller of the sessionless protocol that
// reads a mount's prompt or resource (nil for a caller of a session): what
// it declared, and, when it echoes a state, the answers to the questions
// that state names with the upstream's state unwrapped. what names the
// prompt or resource and binds the state to it. A state that does not
// verify is refused with invalid params.
func (s *Server) readRound(ctx context.Context, id Identity, req mcp.Request, what, state string, answers mcp.InputResponseMap) (*mcpclient.Round, error) {
	if !sessionlessRequest(req) {
		return nil, nil
	}
	r := &mcpclient.Round{}
	if c, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	}); ok {
		r.Caller = callerOf(c.ClientCapabilities(), mcpwire.SessionlessProtocol)
	}
	if state == "" {
		return r, nil
	}
	if s.cfg.State == nil {
		return nil, badState("this server keeps no state across rounds; call again without it")
	}
	rest, ok := strings.CutPrefix(state, upstreamPrefix)
	payload, mac, cut := strings.Cut(rest, ".")
	want, err := s.readMAC(ctx, id, what, payload)
	if err != nil {
		return nil, err
	}
	if !ok || !cut || !hmac.Equal([]byte(mac), []byte(want)) {
		return nil, badState("the request state is not one this server handed out for this " + what + "; ask again without it")
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	var ur upstreamRound
	if err != nil || json.Unmarshal(b, &ur) != nil {
		return nil, badState("the request state cannot be read")
	}
	if time.Now().Unix() >= ur.Expires {
		return nil, badState("the request state has expired; ask again without it")
	}
	r.State, r.Roots, r.Answers = ur.State, ur.Roots, mcp.InputResponseMap{}
	for _, k := range ur.Asked {
		if a, ok := answers[k]; ok {
			r.Answers[k] = a
		}
	}
	return r, nil
}

// wrap is the state of the caller's next round with a mount's prompt or
// resource, what, that asks questions: the upstream's state, wrapped.
func (s *Server) wrap(ctx context.Context, id Identity, what string, questions mcp.InputRequestMap, state string, r *mcpclient.Round) (string, error) {
	if s.cfg.State == nil {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the " + what + " asks for input, and this server keeps no state across rounds"}
	}
	ur := upstreamRound{State: state, Roots: r.Roots, Expires: time.Now().Add(s.cfg.State.TTL).Unix()}
	for k := range questions {
		ur.Asked = append(ur.Asked, k)
	}
	slices.Sort(ur.Asked)
	b, _ := json.Marshal(ur)
	payload := base64.RawURLEncoding.EncodeToString(b)
	mac, err := s.readMAC(ctx, id, what, payload)
	if err != nil {
		return "", err
	}
	return upstreamPrefix + payload + "." + mac, nil
}

// readMAC signs a wrapped state's payload for the principal and what is
// read.
func (s *Server) readMAC(ctx context.Context, id Identity, what, payload string) (string, error) {
	return s.cfg.State.Signer.sign(ctx, "upstream", id.Principal, what, payload)
}
