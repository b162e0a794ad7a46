package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// An idempotency key is a hash with the fields
//
//	d  the input digest (always)
//	t  the reservation token, while in flight
//	e  the execution id, once recorded
//	o  the output, byte for byte, once recorded ("" for none)
//	x  the recorded error as JSON, once recorded ("" for none)
//	w  set while someone waits for the reservation to end
//	k  the token of the reservation the record replaced
//
// whose expiry is the reservation's lease, renewed while its holder lives,
// then the record's TTL. Each principal's records are also members of a
// sorted set by expiry (the principal's "recs" key, in the same Redis
// Cluster slot as the principal's idempotency keys), by which the oldest
// beyond the store's limit per principal are evicted.

// beginScript reserves KEYS[1] for digest ARGV[1] with token ARGV[2] for
// ARGV[3] ms, unless it exists: then it returns what it holds.
//
// Every script is safe to run twice with the same arguments: go-redis sends
// a command again when a network error or a timeout lost its reply.
var beginScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'd', 't', 'e', 'o', 'x')
if v[1] then
	if v[2] == ARGV[2] then
		return {1} -- this very reservation: the client sent Begin again after losing the reply
	end
	return {0, v[1], v[2], v[3], v[4], v[5]}
end
redis.call('HSET', KEYS[1], 'd', ARGV[1], 't', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1}
`)

// completeScript replaces the reservation of token ARGV[1] with a record
// (digest ARGV[2], execution ARGV[3], output ARGV[4], error ARGV[5]) kept
// for ARGV[6] ms, publishes the key on channel ARGV[7] if someone waits for
// it, and adds it to its principal's records KEYS[2], of which the oldest
// beyond ARGV[8] are evicted. Members whose record expired are dropped
// first; a member whose key holds a reservation again (its record expired
// and the request id came back) is not a record, and is left alone.
var completeScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 't', 'w', 'k', 'e')
if v[1] ~= ARGV[1] then
	if v[3] == ARGV[1] and v[4] == ARGV[3] then
		return 1 -- this very Complete, sent again after its reply was lost
	end
	return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'd', ARGV[2], 'e', ARGV[3], 'o', ARGV[4], 'x', ARGV[5], 'k', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if v[2] then
	redis.call('PUBLISH', ARGV[7], KEYS[1])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
if redis.call('PTTL', KEYS[2]) < ttl then
	redis.call('PEXPIRE', KEYS[2], ttl)
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8])
if over > 0 then
	local old = redis.call('ZPOPMIN', KEYS[2], over)
	for i = 1, #old, 2 do
		if redis.call('HEXISTS', old[i], 't') == 0 then
			redis.call('DEL', old[i])
		end
	end
end
return 1
`)

// releaseScript drops the reservation of token ARGV[1] and publishes the
// key on channel ARGV[2] if someone waits for it.
var releaseScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 't', 'w')
if v[1] ~= ARGV[1] then
	return 0
end
redis.call('DEL', KEYS[1])
if v[2] then
	redis.call('PUBLISH', ARGV[2], KEYS[1])
end
return 1
`)

// waitScript returns the milliseconds left on KEYS[1]'s reservation (-1
// for one with no expiry), marking that someone waits for it, or -2 when
// the key is not in flight. The look and the mark are one step, so the
// end of the reservation is published whenever a waiter saw it in flight.
var waitScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 't') == 0 then
	return -2
end
redis.call('HSET', KEYS[1], 'w', '1')
return redis.call('PTTL', KEYS[1])
`)

// Begin reserves key for an execution of the input with this digest,
// unless the key is reserved or recorded already. The reservation's lease
// is renewed in the background, every third of it, until Complete or
// Release: it lapses only when this host dies or loses Redis for longer
// than the lease.
func (s *Store) Begin(ctx context.Context, key store.Key, digest string, lease time.Duration) (store.Reservation, error) {
	token := newToken()
	k := s.idemKey(key)
	v, err := beginScript.Run(ctx, s.client, []string{k}, digest, token, millis(lease)).Slice()
	if err != nil {
		return store.Reservation{}, failure(ctx, err)
	}
	if owned, _ := v[0].(int64); owned == 1 {
		r := s.keepAlive(k, token, lease, "an idempotency reservation",
			"carmy/redisstore: lost an idempotency reservation while its execution was running: its lease ran out, and a retry may run the request again",
			"principal", key.Principal, "tool", key.Tool, "request_id", key.RequestID)
		s.renewalsMu.Lock()
		s.renewals[token] = r
		s.renewalsMu.Unlock()
		return store.Reservation{Owned: true, Token: token}, nil
	}
	if len(v) < 2 {
		return store.Reservation{}, fmt.Errorf("redisstore: unexpected reply %v to Begin", v)
	}
	str := func(i int) string {
		if i < len(v) {
			if s, ok := v[i].(string); ok {
				return s
			}
		}
		return ""
	}
	r := store.Reservation{Digest: str(1)}
	if str(2) != "" { // in flight
		return r, nil
	}
	rec := &store.Record{Digest: r.Digest, ExecutionID: str(3)}
	if o := str(4); o != "" {
		rec.Output = []byte(o)
	}
	if x := str(5); x != "" {
		rec.Error = []byte(x)
	}
	r.Record = rec
	return r, nil
}

// Wait returns once key is no longer in flight, or with ctx's error when
// ctx is done first. A message wakes it when the reservation is completed
// or released on any host (the reservation is marked as awaited, so that
// only awaited ones cost a message); it also looks again when the
// reservation's lease runs out, and at least every poll interval.
func (s *Store) Wait(ctx context.Context, key store.Key) error {
	k := s.idemKey(key)
	w := s.hub.add(k)
	defer s.hub.remove(k, w)
	for {
		left, err := waitScript.Run(ctx, s.client, []string{k}).Int64()
		if err != nil {
			return failure(ctx, err)
		}
		if left == -2 {
			return nil
		}
		d := s.poll
		if left >= 0 {
			d = min(d, time.Duration(left+1)*time.Millisecond)
		}
		if err := wait(ctx, w.ch, d); err != nil {
			return err
		}
	}
}

// Complete replaces the reservation held by token with rec, kept for ttl,
// and wakes the waiters on every host. When the reservation is no longer
// token's, it changes nothing and returns an error wrapping [store.ErrLostReservation].
//
// The record joins its principal's records; beyond the store's limit per
// principal ([WithLimit]), that principal's oldest records are evicted.
func (s *Store) Complete(ctx context.Context, key store.Key, token string, rec store.Record, ttl time.Duration) error {
	s.forget(token)
	ok, err := completeScript.Run(ctx, s.client, []string{s.idemKey(key), s.recordsKey(key.Principal)}, token, rec.Digest, rec.ExecutionID, rec.Output, rec.Error, millis(ttl), s.channel, s.limit).Int64()
	if err != nil {
		return failure(ctx, err)
	}
	if ok != 1 {
		return lost()
	}
	return nil
}

// Release drops the reservation held by token without a record, and wakes
// the waiters on every host. When the reservation is no longer token's, it
// changes nothing and returns an error wrapping [store.ErrLostReservation].
func (s *Store) Release(ctx context.Context, key store.Key, token string) error {
	s.forget(token)
	ok, err := releaseScript.Run(ctx, s.client, []string{s.idemKey(key)}, token, s.channel).Int64()
	if err != nil {
		return failure(ctx, err)
	}
	if ok != 1 {
		return lost()
	}
	return nil
}

// forget stops renewing the reservation of token, if this host renews it.
// Complete and Release stop it before they run, so that a Complete that
// fails leaves a reservation that lapses with its lease, as a dead
// holder's does, rather than one renewed forever.
func (s *Store) forget(token string) {
	s.renewalsMu.Lock()
	r := s.renewals[token]
	delete(s.renewals, token)
	s.renewalsMu.Unlock()
	if r != nil {
		r.halt()
	}
}

// AbandonReservation stops renewing the reservation of token without
// ending it, as the death of its host would: the key frees itself when the
// lease runs out. It is for tests (see the storetest package).
func (s *Store) AbandonReservation(_ store.Key, token string) { s.forget(token) }

func lost() error {
	return fmt.Errorf("redisstore: %w", store.ErrLostReservation)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
