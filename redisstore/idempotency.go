package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
//	f  the reservation's fence, while in flight
//
// whose expiry is the reservation's lease, renewed while its holder lives,
// then the record's TTL. Each principal's records are also members of a
// sorted set by expiry (the principal's "recs" key, in the same Redis
// Cluster slot as the principal's idempotency keys), by which the oldest
// beyond the store's limit per principal are evicted.

// clockLua reads the clock of Redis in milliseconds, so that hosts with
// clocks apart agree on ages.
const clockLua = `
local function clock()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// guardLua notes in the store's marker (a hash: id, the server's run id,
// since, the Redis time of the last loss of state found, 0 for none, made,
// when the marker was made, and kept, "1" when the last loss found kept
// the marker) whether Redis lost its state: the marker is gone while the
// caller knew one (known ~= ”), the server's run id changed (a restart or
// a failover), or another host made the marker anew since the caller last
// saw it. It returns the marker's id, since, and whether the last loss
// kept the marker.
//
// A server that kept the marker (a replica promoted, a restart with AOF)
// kept the state as of some moment: it may lack only what was written
// since, which the hosts that hold reservations restore within one
// renewal. A server without it lost everything.
const guardLua = clockLua + `
local function guard(mk, known, fresh, now)
	local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
	local m = redis.call('HMGET', mk, 'id', 'run', 'since', 'made', 'kept')
	local id, since, kept = m[1], tonumber(m[3] or '0'), m[5] == '1'
	if not id then
		id, kept = fresh, false
		if known ~= '' then
			since = now
		end
		redis.call('HSET', mk, 'id', id, 'run', run, 'since', since, 'made', now, 'kept', '0')
	elseif m[2] ~= run then
		since, kept = now, true
		redis.call('HSET', mk, 'run', run, 'since', since, 'kept', '1')
	elseif known ~= '' and known ~= id and since < tonumber(m[4] or '0') then
		-- made anew by a host that knew no marker: the first host that
		-- knew the old one notes the loss, once
		since, kept = now, false
		redis.call('HSET', mk, 'since', since, 'kept', '0')
	end
	return id, since, kept
end
`

// beginScript reserves KEYS[1] for digest ARGV[1] with token ARGV[2] for
// ARGV[3] ms, unless it exists: then it returns what it holds. A new key
// is refused ({2}) when the principal's records KEYS[2] number ARGV[4] or
// more and the oldest was made less than ARGV[5] ms ago, and held ({3,
// id, ms left}) after the marker KEYS[4] (absent in Redis Cluster) found
// a loss of state: for one lease when Redis lost the marker too, and for
// a third of one, the renewal interval, when it kept it. It answers {1,
// marker id, Redis time, fence, time of the last loss found} when it
// reserved.
//
// The fence is more than every fence of the principal's counter KEYS[3]
// before, and at least ARGV[8] (the caller's clock in microseconds), so it
// grows with every reservation of the key, on every host, and through a
// loss of the counter as long as the hosts' clocks roughly agree: the
// counter expires a day after the principal's last reservation.
//
// Every script is safe to run twice with the same arguments: go-redis sends
// a command again when a network error or a timeout lost its reply.
var beginScript = redis.NewScript(guardLua + `
local now = clock()
local id, since, kept = '', 0, false
if KEYS[4] then
	id, since, kept = guard(KEYS[4], ARGV[6], ARGV[7], now)
end
local v = redis.call('HMGET', KEYS[1], 'd', 't', 'e', 'o', 'x', 'f')
if v[1] then
	if v[2] == ARGV[2] then
		return {1, id, now, tonumber(v[6]), since} -- this very reservation: the client sent Begin again after losing the reply
	end
	return {0, v[1], v[2], v[3], v[4], v[5], id}
end
local hold = tonumber(ARGV[3])
if kept then
	hold = math.ceil(hold / 3)
end
if since > 0 and now < since + hold then
	return {3, id, since + hold - now}
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
	local old = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
	if old[2] and now - tonumber(old[2]) < tonumber(ARGV[5]) then
		return {2, id}
	end
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
local floor = tonumber(ARGV[8])
local fence
if floor > last then
	fence = redis.call('INCRBY', KEYS[3], floor - last)
else
	fence = redis.call('INCR', KEYS[3])
end
redis.call('PEXPIRE', KEYS[3], 86400000)
redis.call('HSET', KEYS[1], 'd', ARGV[1], 't', ARGV[2], 'f', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, id, now, fence, since}
`)

// completeScript replaces the reservation of token ARGV[1] with a record
// (digest ARGV[2], execution ARGV[3], output ARGV[4], error ARGV[5]) kept
// for ARGV[6] ms, publishes the key on channel ARGV[7] if someone waits for
// it, and adds it to its principal's records KEYS[2] by the time it was
// made, of which the oldest beyond ARGV[8] and older than ARGV[9] ms are
// evicted. Members whose record expired are dropped first; a member whose
// key holds a reservation again (its record expired and the request id
// came back) is not a record, and is left alone.
//
// A key that is gone is recorded all the same: its reservation's lease
// ran out with nobody taking the key (its host was cut off or paused for
// longer than the lease), or Redis lost it with its state. Either way the
// execution ran, and no other holds the key: refusing its outcome would
// let a retry run the call again.
var completeScript = redis.NewScript(clockLua + `
local now = clock()
local v = redis.call('HMGET', KEYS[1], 't', 'w', 'k', 'e', 'd')
if v[1] ~= ARGV[1] then
	if v[3] == ARGV[1] and v[4] == ARGV[3] then
		return 1 -- this very Complete, sent again after its reply was lost
	end
	if v[5] then
		return 0
	end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'd', ARGV[2], 'e', ARGV[3], 'o', ARGV[4], 'x', ARGV[5], 'k', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if v[2] then
	redis.call('PUBLISH', ARGV[7], KEYS[1])
end
local ttl = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl)
redis.call('ZADD', KEYS[2], now, KEYS[1])
if redis.call('PTTL', KEYS[2]) < ttl then
	redis.call('PEXPIRE', KEYS[2], ttl)
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8])
if over > 0 then
	local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[9]), 'LIMIT', 0, over)
	for i = 1, #old do
		redis.call('ZREM', KEYS[2], old[i])
		if redis.call('HEXISTS', old[i], 't') == 0 then
			redis.call('DEL', old[i])
		end
	end
end
return 1
`)

// renewReservationScript extends the reservation KEYS[1] of token ARGV[1]
// to ARGV[2] ms. A reservation that is gone because Redis lost its state
// since it was made (marker KEYS[2], checked as beginScript does with
// ARGV[4] and ARGV[5]: its id is no longer ARGV[7], or a loss was found
// after ARGV[6], the Redis time of the reservation) is restored with its
// digest ARGV[3] and fence ARGV[8], since its holder lives. It answers 2
// when the reservation's own outcome replaced it: a Complete whose reply
// was late or lost got there first.
var renewReservationScript = redis.NewScript(guardLua + `
local v = redis.call('HMGET', KEYS[1], 't', 'k')
if v[1] == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v[2] == ARGV[1] then
	return 2
end
if not KEYS[2] or ARGV[7] == '' or redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
local id, since = guard(KEYS[2], ARGV[4], ARGV[5], clock())
if id == ARGV[7] and since < tonumber(ARGV[6]) then
	return 0
end
redis.call('HSET', KEYS[1], 'd', ARGV[3], 't', ARGV[1], 'f', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
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
// Release succeed: it lapses only when this host dies or loses Redis for
// longer than the lease. A new key is refused with [store.ErrCapacity]
// when its principal holds the store's limit of records, all younger than
// the window, and with [store.ErrRecovering] after Redis was found to
// have lost its state: for one lease when Redis lost the store's marker
// too (everything was lost), and for a third of the lease, one renewal
// interval, when it kept it (a promoted replica, a restart with AOF),
// since every host restores the reservations it holds as soon as it sees
// the change.
func (s *Store) Begin(ctx context.Context, key store.Key, digest string, lease time.Duration) (store.Reservation, error) {
	token := newToken()
	k := s.idemKey(key)
	sent := time.Now()
	v, err := beginScript.Run(ctx, s.client, s.guarded(k, s.recordsKey(key.Principal), s.reservationFenceKey(key.Principal)),
		digest, token, millis(lease), s.limit, s.windowMillis(), s.knownEpoch(), newToken(), time.Now().UnixMicro()).Slice()
	if err != nil {
		return store.Reservation{}, failure(ctx, err)
	}
	str := func(i int) string {
		if i < len(v) {
			if s, ok := v[i].(string); ok {
				return s
			}
		}
		return ""
	}
	num := func(i int) int64 {
		if i < len(v) {
			n, _ := v[i].(int64)
			return n
		}
		return 0
	}
	switch num(0) {
	case 1:
		epoch := str(1)
		s.learnEpoch(epoch)
		s.firstSince.CompareAndSwap(-1, num(4))
		r := s.keepAlive(k, token, lease, "an idempotency reservation",
			"carmy/redisstore: lost an idempotency reservation while its execution was running: its lease ran out, and a retry may run the request again",
			"principal", key.Principal, "tool", key.Tool, "request_id", key.RequestID)
		r.digest, r.epoch, r.began, r.fence, r.born = digest, epoch, num(2), num(3), sent
		r.renew = s.renewReservation(r)
		s.renewalsMu.Lock()
		s.renewals[token] = r
		s.renewalsMu.Unlock()
		r.start()
		s.startWatch()
		return store.Reservation{Owned: true, Token: token, Fence: uint64(r.fence)}, nil
	case 2:
		s.learnEpoch(str(1))
		return store.Reservation{}, fmt.Errorf("redisstore: principal %q: %w", key.Principal, store.ErrCapacity)
	case 3:
		s.learnEpoch(str(1))
		s.lossSeen()
		return store.Reservation{}, fmt.Errorf("redisstore: Redis lost its state; new executions are held for %v more: %w", time.Duration(num(2))*time.Millisecond, store.ErrRecovering)
	}
	if len(v) < 2 {
		return store.Reservation{}, fmt.Errorf("redisstore: unexpected reply %v to Begin", v)
	}
	s.learnEpoch(str(6))
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
// and wakes the waiters on every host. When another reservation or a
// record holds the key, it changes nothing and returns an error wrapping
// [store.ErrLostReservation]; a key that nobody holds (the lease ran out
// while nobody took the key, or Redis lost it) takes the record. When
// Redis cannot be reached, the reservation stays held and renewed, for the
// caller to try again.
//
// The record joins its principal's records; beyond the store's limit per
// principal ([WithLimit]), that principal's oldest records older than the
// window ([WithWindow]) are evicted.
func (s *Store) Complete(ctx context.Context, key store.Key, token string, rec store.Record, ttl time.Duration) error {
	k, records := s.idemKey(key), s.recordsKey(key.Principal)
	ok, err := s.evalReplicated(ctx, completeScript, []string{k, records}, token, rec.Digest, rec.ExecutionID, rec.Output, rec.Error,
		millis(ttl), s.channel, s.limit, s.windowMillis())
	if err != nil && (ok != 1 || !errors.Is(err, ErrNotReplicated)) {
		return failure(ctx, err)
	}
	first := s.renewalOf(token) != nil // not a Complete called again for the replicas
	s.forget(token)
	if ok != 1 {
		return lost()
	}
	if first {
		s.remember(entry{key: k, records: records, token: token, rec: rec, at: time.Now(), ttl: ttl})
	}
	return err
}

// Release drops the reservation held by token without a record, and wakes
// the waiters on every host. When the reservation is no longer token's, it
// changes nothing and returns an error wrapping [store.ErrLostReservation].
// When Redis cannot be reached, the reservation stays held and renewed,
// for the caller to try again.
func (s *Store) Release(ctx context.Context, key store.Key, token string) error {
	ok, err := releaseScript.Run(ctx, s.client, []string{s.idemKey(key)}, token, s.channel).Int64()
	if err != nil {
		return failure(ctx, err)
	}
	s.forget(token)
	if ok != 1 {
		return lost()
	}
	return nil
}

// renewalOf returns the renewal of the reservation of token, if this host
// holds it.
func (s *Store) renewalOf(token string) *renewal {
	s.renewalsMu.Lock()
	defer s.renewalsMu.Unlock()
	return s.renewals[token]
}

// forget stops renewing the reservation of token, if this host renews it,
// once Complete or Release ended it.
func (s *Store) forget(token string) {
	s.renewalsMu.Lock()
	r := s.renewals[token]
	delete(s.renewals, token)
	s.renewalsMu.Unlock()
	if r != nil {
		r.halt()
	}
}

// renewReservation returns the renewal step of a reservation, which
// restores it when Redis lost it with its state.
func (s *Store) renewReservation(r *renewal) func(ctx context.Context) (int64, error) {
	keys := s.guarded(r.key)
	return func(ctx context.Context) (int64, error) {
		return s.batch.run(ctx, renewReservationScript, keys, r.token, millis(r.lease), r.digest, s.knownEpoch(), newToken(), r.began, r.epoch, r.fence)
	}
}

// AbandonReservation stops renewing the reservation of token without
// ending it, as the death of its host would: the key frees itself when the
// lease runs out ([store.ReservationAbandoner]).
func (s *Store) AbandonReservation(_ store.Key, token string) { s.forget(token) }

func lost() error {
	return fmt.Errorf("redisstore: %w", store.ErrLostReservation)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
