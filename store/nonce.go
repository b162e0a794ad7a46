package store

import (
	"context"
	"time"
)

// NonceStore is an optional capability of an [IdempotencyStore]: one-time
// nonces shared by every host that uses the store. UseNonce notes nonce
// as used by principal, for at least ttl, and reports whether this was its
// first use: of any number of calls with the same principal and nonce, on
// any host, before ttl passes, exactly one gets true. A nonce of one
// principal is not another's. A store bounded per principal may refuse a
// nonce with an error wrapping [ErrCapacity], never forget one before its
// ttl. Implementations must be safe for concurrent use.
//
// The runtime uses up with it the nonce of each state it hands a client of
// the sessionless MCP protocol for a confirmed call, so that the state
// lets one round run, on whichever host it lands. A store without it
// keeps the nonce as a record under a request id no call can send.
type NonceStore interface {
	UseNonce(ctx context.Context, principal, nonce string, ttl time.Duration) (bool, error)
}

var _ NonceStore = (*memoryStore)(nil)

// nonceTool is the tool of the keys under which the memory store keeps
// nonces: tool names are identifiers, so no call's key is one of them.
const nonceTool = "\x00nonce"

// UseNonce notes nonce as used, for ttl. Nonces are kept as records of
// their principal, so that they count towards the same bounds, and a
// principal at its limit with no record older than the window is refused
// with [ErrCapacity], as Begin of a new key is.
func (s *memoryStore) UseNonce(_ context.Context, principal, nonce string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := Key{Principal: principal, Tool: nonceTool, RequestID: nonce}
	now := s.now()
	if en, ok := s.entries[key]; ok {
		if now.Before(en.expires) {
			return false, nil
		}
		s.drop(en)
	}
	if err := s.room(principal, now); err != nil {
		return false, err
	}
	en := &entry{key: key, record: &Record{}, kept: now, expires: now.Add(ttl)}
	s.entries[key] = en
	s.keep(en, now)
	s.sweepWithin(ttl)
	return true, nil
}
