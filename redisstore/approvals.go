package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

var _ store.ApprovalStore = (*Store)(nil)

// Approvals are kept under one Redis Cluster hash tag, {appr}, since they
// are few and listed together:
//
//	prefix + "appr:{appr}:" + id   a hash of the approval's fields
//	prefix + "apprkey:{appr}:" + principal + ":" + tool + ":" + digest
//	                               (each part query-escaped) the id of the
//	                               approval of that call
//	prefix + "apprs:{appr}"        a sorted set of the ids by creation
//	prefix + "apprexp:{appr}"      a sorted set, by expiry, of the ids
//	                               whose input counts against the bounds
//	prefix + "apprsize:{appr}"     a hash: of each such id, its input's
//	                               bytes and principal ("bytes:principal")
//	prefix + "apprbytes:{appr}"    a hash: the bytes counted, by principal
//	                               ("p:" + principal) and in all ("total")
//
// An approval's input counts against [store.DefaultApprovalBytes] per
// principal and [store.DefaultApprovalGlobalBytes] in all from its
// creation to its expiry: Create first gives back the bytes of the
// approvals that expired since (a thousand at most each time) and drops
// their inputs, then refuses an approval beyond either bound.
//
// The hash and the key expire ApprovalRetention after the approval does;
// Create drops from the list the ids created longer ago than that (with the
// same timeout), and List those whose hash is gone. Times are Unix milliseconds; the
// scripts read the clock of Redis, so that hosts with clocks apart agree
// on what expired.

func (s *Store) approvalKey(id string) string { return s.prefix + "appr:{appr}:" + id }
func (s *Store) approvalsKey() string         { return s.prefix + "apprs:{appr}" }
func (s *Store) approvalBytesKeys() []string {
	return []string{s.prefix + "apprexp:{appr}", s.prefix + "apprsize:{appr}", s.prefix + "apprbytes:{appr}"}
}

// approvalFull is what Create returns for an approval beyond the bounds of
// bytes: no id starts with '!'.
const approvalFull = "!capacity"

func (s *Store) approvalIndex(a store.Approval) string {
	return s.prefix + "apprkey:{appr}:" + url.QueryEscape(a.Principal) + ":" + url.QueryEscape(a.Tool) + ":" + url.QueryEscape(a.Digest)
}

// createApprovalScript returns the id in KEYS[1] when its approval is live
// for a call with request id ARGV[3]; otherwise it records the approval
// ARGV[2] (the hash key prefix ARGV[1]; fields ARGV[4..]) and returns its
// id. Live: pending, approved or denied, and not expired; or used by a
// call with that request id.
var createApprovalScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('GET', KEYS[1])
if cur then
	local v = redis.call('HMGET', ARGV[1] .. cur, 'status', 'expires', 'used')
	if v[1] then
		if (v[1] == 'pending' or v[1] == 'approved' or v[1] == 'denied') and now < tonumber(v[2]) then
			return cur
		end
		if v[1] == 'used' and ARGV[3] ~= '' and v[3] == ARGV[3] then
			return cur
		end
	end
end
-- Approvals that expired give their bytes back, and their inputs.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)) do
	local v = redis.call('HGET', KEYS[4], id)
	if v then
		local n, p = string.match(v, '^(%d+):(.*)$')
		redis.call('HINCRBY', KEYS[5], 'p:' .. p, -tonumber(n))
		redis.call('HINCRBY', KEYS[5], 'total', -tonumber(n))
		redis.call('HDEL', KEYS[4], id)
	end
	redis.call('HDEL', ARGV[1] .. id, 'input')
	redis.call('ZREM', KEYS[3], id)
end
local size = string.len(ARGV[6])
local mine = tonumber(redis.call('HGET', KEYS[5], 'p:' .. ARGV[5]) or '0')
local all = tonumber(redis.call('HGET', KEYS[5], 'total') or '0')
if mine + size > tonumber(ARGV[11]) or all + size > tonumber(ARGV[12]) then
	return '` + approvalFull + `'
end
redis.call('HINCRBY', KEYS[5], 'p:' .. ARGV[5], size)
redis.call('HINCRBY', KEYS[5], 'total', size)
redis.call('HSET', KEYS[4], ARGV[2], size .. ':' .. ARGV[5])
redis.call('ZADD', KEYS[3], tonumber(ARGV[9]), ARGV[2])
local h = ARGV[1] .. ARGV[2]
local keep = tonumber(ARGV[9]) + tonumber(ARGV[10])
redis.call('HSET', h, 'id', ARGV[2], 'tool', ARGV[4], 'principal', ARGV[5], 'input', ARGV[6], 'digest', ARGV[7],
	'rid', ARGV[3], 'status', 'pending', 'created', ARGV[8], 'expires', ARGV[9])
redis.call('PEXPIREAT', h, keep)
redis.call('SET', KEYS[1], ARGV[2], 'PXAT', keep)
redis.call('ZADD', KEYS[2], tonumber(ARGV[8]), ARGV[2])
-- Ids of approvals created a timeout and the retention ago are gone.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', 2 * tonumber(ARGV[8]) - tonumber(ARGV[9]) - tonumber(ARGV[10]))
return ARGV[2]
`)

// transitionScript moves the approval in KEYS[1] from status ARGV[1] to
// ARGV[2], unless it expired, setting field ARGV[3] to ARGV[4] (and the
// decision time, for a decision), and publishes its key on channel ARGV[5]
// to wake those who await it on every host. It returns 0 and nothing for
// an approval that does not exist; else 1 (moved) or 2 (not in that
// status), and the hash.
var transitionScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'status', 'expires')
if not v[1] then
	return {0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if v[1] ~= ARGV[1] or now >= tonumber(v[2]) then
	return {2, redis.call('HGETALL', KEYS[1])}
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], ARGV[3], ARGV[4])
if ARGV[1] == 'pending' then
	redis.call('HSET', KEYS[1], 'decided', now)
end
redis.call('PUBLISH', ARGV[5], KEYS[1])
return {1, redis.call('HGETALL', KEYS[1])}
`)

// Create records a pending approval, unless the same principal's call of
// the same tool with the same input has a live one: then it returns that.
func (s *Store) Create(ctx context.Context, a store.Approval) (store.Approval, error) {
	id, err := createApprovalScript.Run(ctx, s.client, append([]string{s.approvalIndex(a), s.approvalsKey()}, s.approvalBytesKeys()...),
		s.approvalKey(""), a.ID, a.RequestID, a.Tool, a.Principal, a.Input, a.Digest,
		a.Created.UnixMilli(), a.Expires.UnixMilli(), store.ApprovalRetention.Milliseconds(),
		store.DefaultApprovalBytes, store.DefaultApprovalGlobalBytes).Text()
	if err != nil {
		return store.Approval{}, failure(ctx, err)
	}
	if id == approvalFull {
		return store.Approval{}, fmt.Errorf("redisstore: principal %q: %w", a.Principal, store.ErrApprovalCapacity)
	}
	return s.Get(ctx, id)
}

// Get returns the approval with that id.
func (s *Store) Get(ctx context.Context, id string) (store.Approval, error) {
	m, err := s.client.HGetAll(ctx, s.approvalKey(id)).Result()
	if err != nil {
		return store.Approval{}, failure(ctx, err)
	}
	if len(m) == 0 {
		return store.Approval{}, store.ErrApprovalNotFound
	}
	return approvalOf(m), nil
}

// summaryFields are the fields of an approval's hash but its input.
var summaryFields = []string{"id", "tool", "principal", "digest", "rid", "status", "created", "expires", "decided", "approver", "used"}

// List returns a page of the approvals kept, newest first, without their
// inputs: each page reads its approvals' other fields only.
func (s *Store) List(ctx context.Context, after string, limit int) ([]store.Approval, error) {
	if limit <= 0 {
		limit = store.DefaultApprovalPage
	}
	start := int64(0)
	if after != "" {
		rank, err := s.client.ZRevRank(ctx, s.approvalsKey(), after).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, failure(ctx, err)
		}
		start = rank + 1
	}
	ids, err := s.client.ZRevRange(ctx, s.approvalsKey(), start, start+int64(limit)-1).Result()
	if err != nil {
		return nil, failure(ctx, err)
	}
	cmds, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HMGet(ctx, s.approvalKey(id), summaryFields...)
		}
		return nil
	})
	if err != nil {
		return nil, failure(ctx, err)
	}
	out := make([]store.Approval, 0, len(ids))
	var gone []any
	for i, c := range cmds {
		vals := c.(*redis.SliceCmd).Val()
		m := make(map[string]string, len(summaryFields))
		for j, f := range summaryFields {
			if v, ok := vals[j].(string); ok {
				m[f] = v
			}
		}
		if m["id"] == "" {
			gone = append(gone, ids[i])
			continue
		}
		a := approvalOf(m)
		a.Input = nil
		out = append(out, a)
	}
	if len(gone) > 0 {
		if err := s.client.ZRem(ctx, s.approvalsKey(), gone...).Err(); err != nil {
			return nil, failure(ctx, err)
		}
	}
	return out, nil
}

// Decide approves or denies a pending approval.
func (s *Store) Decide(ctx context.Context, id string, approve bool, approver string) (store.Approval, error) {
	to := store.ApprovalDenied
	if approve {
		to = store.ApprovalApproved
	}
	return s.transition(ctx, id, store.ApprovalPending, to, "approver", approver)
}

// Consume uses an approved approval up.
func (s *Store) Consume(ctx context.Context, id, requestID string) (store.Approval, error) {
	return s.transition(ctx, id, store.ApprovalApproved, store.ApprovalUsed, "used", requestID)
}

func (s *Store) transition(ctx context.Context, id string, from, to store.ApprovalStatus, field, value string) (store.Approval, error) {
	v, err := transitionScript.Run(ctx, s.client, []string{s.approvalKey(id)}, string(from), string(to), field, value, s.channel).Slice()
	if err != nil {
		return store.Approval{}, failure(ctx, err)
	}
	code, _ := v[0].(int64)
	if code == 0 || len(v) < 2 {
		return store.Approval{}, store.ErrApprovalNotFound
	}
	flat, _ := v[1].([]any)
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		m[k], _ = flat[i+1].(string)
	}
	a := approvalOf(m)
	if code != 1 {
		return a, store.ErrApprovalState
	}
	return a, nil
}

var _ store.DecisionWaiter = (*Store)(nil)

// AwaitDecision returns the approval with that id once it is no longer
// pending, or with ctx's error and the approval as last seen. A decision
// on any host wakes it by a message on the store's channel; it also looks
// again when the approval expires, and at least every poll interval.
func (s *Store) AwaitDecision(ctx context.Context, id string) (store.Approval, error) {
	k := s.approvalKey(id)
	w := s.hub.add(k)
	defer s.hub.remove(k, w)
	for {
		a, err := s.Get(ctx, id)
		if err != nil || a.Status != store.ApprovalPending {
			return a, err
		}
		if err := wait(ctx, w.ch, min(s.poll, time.Until(a.Expires)+time.Millisecond)); err != nil {
			return a, err
		}
	}
}

// approvalOf reads an approval's hash.
func approvalOf(m map[string]string) store.Approval {
	ms := func(k string) time.Time {
		n, err := strconv.ParseInt(m[k], 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	a := store.Approval{
		ID: m["id"], Tool: m["tool"], Principal: m["principal"], Input: []byte(m["input"]), Digest: m["digest"],
		RequestID: m["rid"], Status: store.ApprovalStatus(m["status"]), Created: ms("created"), Expires: ms("expires"),
		Decided: ms("decided"), Approver: m["approver"], UsedBy: m["used"],
	}
	return a.At(time.Now())
}
