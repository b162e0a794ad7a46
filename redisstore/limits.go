package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

var (
	_ store.RateLimiter        = (*Store)(nil)
	_ store.ConcurrencyLimiter = (*Store)(nil)
)

// The scripts below read the time from Redis itself (TIME), so that hosts
// whose clocks disagree still share one limit. Redis replicates a
// script's effects, not the script, so TIME is safe before a write; the
// guard asks for that on a Redis older than 5, which replicated scripts.

// rateScript is one decision of GCRA, as go-redis/redis_rate makes it,
// for KEYS[1], the key's theoretical arrival time in microseconds of Redis
// time: ARGV[1] calls per ARGV[2] microseconds, with a burst of ARGV[1].
// It answers {1, 0} for a call allowed, which it counts, or {0, µs until
// the next call would be}, counting nothing. The key expires once the
// allowance is full again, when it is the same as no key.
var rateScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local period = tonumber(ARGV[2])
local step = period / tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nxt = tat + step
local at = nxt - period
if at > now then
	return {0, math.ceil(at - now)}
end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000))
return {1, 0}
`)

// A key's slots are a sorted set of the holders' tokens by the Redis time
// (ms) their lease ends; the set expires with its longest lease.

// slotScript takes a slot of KEYS[1] for token ARGV[1], of ARGV[2] slots,
// for ARGV[3] ms, after dropping the slots whose lease ended: 1 when it is
// taken (or was, by this very token: go-redis runs a script again when a
// reply was lost), 0 when every slot is held.
var slotScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
	if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
		return 0
	end
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
	redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
`)

// slotRenewScript extends token ARGV[1]'s slot of KEYS[1] to ARGV[2] ms
// from now, if the token still holds it: 1 when it did.
var slotRenewScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
	return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
	redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
`)

// limitTag is the hash tag of one principal's limits on one tool: each
// script touches one key, which Redis Cluster keeps in one slot, and the
// tag spreads principals and tools over the cluster. The escaping keeps
// braces out of the tag's content, which is never empty.
func limitTag(k store.LimitKey) string {
	return "{" + url.QueryEscape(k.Principal) + ":" + url.QueryEscape(k.Tool) + "}"
}

func (s *Store) rateKey(k store.LimitKey) string  { return s.prefix + "rate:" + limitTag(k) }
func (s *Store) slotsKey(k store.LimitKey) string { return s.prefix + "slots:" + limitTag(k) }

// Allow counts one call of key against rate, if rate allows it now, with
// one script: every host sharing the Redis and prefix shares the limit.
// It implements [store.RateLimiter].
func (s *Store) Allow(ctx context.Context, key store.LimitKey, rate store.Rate) (store.RateDecision, error) {
	if rate.Calls <= 0 || rate.Per <= 0 {
		return store.RateDecision{}, errors.New("redisstore: a rate needs a positive number of calls and a positive period")
	}
	v, err := rateScript.Run(ctx, s.client, []string{s.rateKey(key)}, rate.Calls, rate.Per.Microseconds()).Int64Slice()
	if err != nil {
		return store.RateDecision{}, failure(ctx, err)
	}
	if len(v) != 2 {
		return store.RateDecision{}, fmt.Errorf("redisstore: unexpected reply %v to Allow", v)
	}
	if v[0] == 1 {
		return store.RateDecision{Allowed: true}, nil
	}
	return store.RateDecision{RetryAfter: time.Duration(v[1]) * time.Microsecond}, nil
}

// AcquireSlot takes one of the slots of key, leased for lease and renewed
// in the background, every third of it, until released: a host that dies
// stops renewing its slots, which free themselves when their lease runs
// out. It implements [store.ConcurrencyLimiter].
func (s *Store) AcquireSlot(ctx context.Context, key store.LimitKey, slots int, lease time.Duration) (store.Slot, error) {
	k := s.slotsKey(key)
	token := newToken()
	ok, err := slotScript.Run(ctx, s.client, []string{k}, token, slots, millis(lease)).Int64()
	if err != nil {
		return nil, failure(ctx, err)
	}
	if ok != 1 {
		return nil, fmt.Errorf("redisstore: %w: %d of %s's calls of %s are running", store.ErrNoSlot, slots, key.Principal, key.Tool)
	}
	sl := &slot{s: s, key: k, token: token, lease: lease}
	sl.renewal = s.keepAlive(k, token, lease, "a concurrency slot",
		"carmy/redisstore: lost a concurrency slot while its call was running: its lease ran out, and another call may have taken it",
		"principal", key.Principal, "tool", key.Tool)
	sl.renewal.renew = func(ctx context.Context) (int64, error) {
		return s.batch.run(ctx, slotRenewScript, []string{k}, token, millis(lease))
	}
	sl.renewal.start()
	return sl, nil
}

// slot is a held slot.
type slot struct {
	s       *Store
	key     string
	token   string
	lease   time.Duration
	renewal *renewal
}

// Abandon stops renewing the slot without releasing it, as the death of
// its host would: the slot frees itself when its lease runs out. It is for
// tests (see the storetest package).
func (sl *slot) Abandon() { sl.renewal.halt() }

// Release gives the slot up, if this holder still holds it. Releasing
// twice is harmless.
func (sl *slot) Release(ctx context.Context) error {
	sl.renewal.halt()
	if err := sl.s.client.ZRem(ctx, sl.key, sl.token).Err(); err != nil {
		return fmt.Errorf("redisstore: cannot release a concurrency slot; it frees itself when its lease of %v runs out: %w", sl.lease, err)
	}
	return nil
}
