package redisstore

import (
	"context"
	"net/url"
	"time"

	"github.com/carmy-dev/carmy/store"
)

var (
	_ store.Finder               = (*Store)(nil)
	_ store.NonceStore           = (*Store)(nil)
	_ store.ReservationAbandoner = (*Store)(nil)
)

// Find reports what holds key, without reserving it: the reservation in
// flight (its digest), or the record, read in one command.
func (s *Store) Find(ctx context.Context, key store.Key) (store.Reservation, bool, error) {
	v, err := s.client.HMGet(ctx, s.idemKey(key), "d", "t", "e", "o", "x").Result()
	if err != nil {
		return store.Reservation{}, false, failure(ctx, err)
	}
	str := func(i int) string {
		str, _ := v[i].(string)
		return str
	}
	if v[0] == nil {
		return store.Reservation{}, false, nil
	}
	r := store.Reservation{Digest: str(0)}
	if v[1] != nil { // in flight
		return r, true, nil
	}
	rec := &store.Record{Digest: r.Digest, ExecutionID: str(2)}
	if o := str(3); o != "" {
		rec.Output = []byte(o)
	}
	if x := str(4); x != "" {
		rec.Error = []byte(x)
	}
	r.Record = rec
	return r, true, nil
}

// UseNonce notes nonce as used by principal, under prefix + "nonce:", for
// ttl (at least a millisecond), with one SET NX, so that exactly one use
// on any host is the first.
func (s *Store) UseNonce(ctx context.Context, principal, nonce string, ttl time.Duration) (bool, error) {
	k := s.prefix + "nonce:{p:" + url.QueryEscape(principal) + "}:" + url.QueryEscape(nonce)
	first, err := s.client.SetNX(ctx, k, "1", max(ttl, time.Millisecond)).Result()
	if err != nil {
		return false, failure(ctx, err)
	}
	return first, nil
}
