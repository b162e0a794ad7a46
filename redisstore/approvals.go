package redisstore

import (
	"context"
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
//
// The hash and the key expire ApprovalRetention after the approval does;
// Create drops from the list the ids created longer ago than that (with the
// same timeout), and List those whose hash is gone. Times are Unix milliseconds; the
// scripts read the clock of Redis, so that hosts with clocks apart agree
// on what expired.

func (s *Store) approvalKey(id string) string { return s.prefix + "appr:{appr}:" + id }
func (s *Store) approvalsKey() string         { return s.prefix + "apprs:{appr}" }
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
	id, err := createApprovalScript.Run(ctx, s.client, []string{s.approvalIndex(a), s.approvalsKey()},
		s.approvalKey(""), a.ID, a.RequestID, a.Tool, a.Principal, a.Input, a.Digest,
		a.Created.UnixMilli(), a.Expires.UnixMilli(), store.ApprovalRetention.Milliseconds()).Text()
	if err != nil {
		return store.Approval{}, failure(ctx, err)
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

// List returns the approvals kept, newest first.
func (s *Store) List(ctx context.Context) ([]store.Approval, error) {
	ids, err := s.client.ZRevRange(ctx, s.approvalsKey(), 0, -1).Result()
	if err != nil {
		return nil, failure(ctx, err)
	}
	cmds, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HGetAll(ctx, s.approvalKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, failure(ctx, err)
	}
	out := make([]store.Approval, 0, len(ids))
	var gone []any
	for i, c := range cmds {
		m := c.(*redis.MapStringStringCmd).Val()
		if len(m) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		out = append(out, approvalOf(m))
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
