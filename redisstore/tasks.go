package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

var _ store.TaskStore = (*Store)(nil)

// A principal's tasks are kept under one Redis Cluster hash tag, {tk:T},
// where T is 16 hex digits of the SHA-256 of the principal, so that a
// task, the index of its request id and its principal's list (by which
// the per-principal bounds are kept) change together in one script. A
// task's id ends with T, so that any host finds its keys from the id:
//
//	prefix + "task:{tk:T}:" + id      a hash of the task's fields, the
//	                                  answer to each of its questions in
//	                                  a field "answer:" + question id, its
//	                                  size (store.Task.Size) in "size" and
//	                                  its principal's list in "listkey"
//	prefix + "taskrid:{tk:T}:" + principal + ":" + tool + ":" + request id
//	                                  (each part query-escaped) the id of
//	                                  the task of that call
//	prefix + "tasks:{tk:T}:" + principal  a sorted set of the ids by creation
//
// The hash and the index expire the task's TTL after the task ends, or
// after its lease when its host stops renewing it. Times are Unix
// milliseconds of the clock of Redis, so that hosts with clocks apart
// agree on which leases lapsed. Every change but a renewal publishes the
// hash's key on the store's channel, which wakes those who await the task
// on every host: the host running it, to stop it when it is cancelled and
// to hand its tool the answers given.

func taskTag(principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return hex.EncodeToString(sum[:8])
}

// taskKey returns the key of a task's hash, or "" for an id that no store
// made.
func (s *Store) taskKey(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || len(id)-i-1 != 16 {
		return ""
	}
	return s.prefix + "task:{tk:" + id[i+1:] + "}:" + id
}

func (s *Store) taskListKey(principal string) string {
	return s.prefix + "tasks:{tk:" + taskTag(principal) + "}:" + url.QueryEscape(principal)
}

func (s *Store) taskIndexKey(t store.Task) string {
	return s.prefix + "taskrid:{tk:" + taskTag(t.Principal) + "}:" + url.QueryEscape(t.Principal) + ":" + url.QueryEscape(t.Tool) + ":" + url.QueryEscape(t.RequestID)
}

// luaNow is the clock of Redis, in milliseconds.
const luaNow = `local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
`

// createTaskScript records task ARGV[1] (hash KEYS[3]) unless the request
// id ARGV[4] names a task kept (index KEYS[1]): then it returns {0, id}.
// A principal (list KEYS[2]) holding ARGV[7] tasks or ARGV[8] bytes gets
// {2, count}, as does one whose bytes the task (of ARGV[11] bytes of
// input) would take past ARGV[8]. ARGV[9] is the prefix of the hashes'
// keys, ARGV[10] the input's digest.
var createTaskScript = redis.NewScript(luaNow + `
if ARGV[4] ~= '' then
	local cur = redis.call('GET', KEYS[1])
	if cur and redis.call('EXISTS', ARGV[9] .. cur) == 1 then
		return {0, cur}
	end
end
local n, bytes = 0, 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
	local size = redis.call('HGET', ARGV[9] .. id, 'size')
	if size then
		n = n + 1
		bytes = bytes + tonumber(size)
	else
		redis.call('ZREM', KEYS[2], id)
	end
end
local size = #ARGV[1] + #ARGV[3] + #ARGV[4] + tonumber(ARGV[11])
if n >= tonumber(ARGV[7]) or bytes + size > tonumber(ARGV[8]) then
	return {2, n}
end
local lease = now + tonumber(ARGV[5])
local keep = lease + tonumber(ARGV[6])
local ridkey = ''
if ARGV[4] ~= '' then
	ridkey = KEYS[1]
	redis.call('SET', KEYS[1], ARGV[1], 'PXAT', keep)
end
redis.call('HSET', KEYS[3], 'id', ARGV[1], 'principal', ARGV[2], 'tool', ARGV[3], 'rid', ARGV[4], 'ridkey', ridkey,
	'status', 'working', 'created', now, 'updated', now, 'lease', lease, 'ttl', ARGV[6], 'version', 1,
	'digest', ARGV[10], 'size', size, 'input', ARGV[11], 'listkey', KEYS[2])
redis.call('PEXPIREAT', KEYS[3], keep)
redis.call('ZADD', KEYS[2], now, ARGV[1])
return {1, ARGV[1]}
`)

// taskStateCheck returns {0} for a task that does not exist and {2, hash,
// now} for one that is final or whose lease lapsed; h holds status, lease,
// ttl, ridkey, id.
const taskStateCheck = luaNow + `
local h = redis.call('HMGET', KEYS[1], 'status', 'lease', 'ttl', 'ridkey', 'id')
if not h[1] then
	return {0}
end
local function final(st) return st == 'completed' or st == 'failed' or st == 'cancelled' end
if final(h[1]) or now >= tonumber(h[2]) then
	return {2, redis.call('HGETALL', KEYS[1]), now}
end
`

// updateTaskScript applies an update to task KEYS[1]: ARGV[1] a lease in
// ms (0: none), ARGV[2] "1" to free the request id, ARGV[3] the channel,
// ARGV[4] a status (empty for none) and ARGV[5] its approval, ARGV[6] the
// bound of the principal's bytes, then fields and values. An update that
// grows the task past the bound, unless it ends the task without an
// output, changes nothing and returns {3, bytes held}. An output written
// alone changes neither the version nor the time, and wakes nobody.
var updateTaskScript = redis.NewScript(taskStateCheck + `
local status = h[1]
if ARGV[4] ~= '' then
	status = ARGV[4]
end
local set = {}
for i = 7, #ARGV, 2 do
	set[ARGV[i]] = #ARGV[i + 1]
end
local function fieldSize(f)
	local n = set[f] or redis.call('HSTRLEN', KEYS[1], f)
	if n > 0 and string.sub(f, 1, 7) == 'answer:' then
		n = n + #f - 7
	end
	return n
end
local size = 0
for _, f in ipairs({'id', 'tool', 'rid', 'output', 'error', 'progress', 'questions'}) do
	size = size + fieldSize(f)
end
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
	if string.sub(f, 1, 7) == 'answer:' and not set[f] then
		size = size + fieldSize(f)
	end
end
for f in pairs(set) do
	if string.sub(f, 1, 7) == 'answer:' then
		size = size + fieldSize(f)
	end
end
if fieldSize('output') == 0 and not final(status) then
	size = size + tonumber(redis.call('HGET', KEYS[1], 'input') or '0')
end
local old = tonumber(redis.call('HGET', KEYS[1], 'size') or '0')
local list = redis.call('HGET', KEYS[1], 'listkey')
if size > old and list and not (final(status) and not set['output']) then
	local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #h[5])
	local held = 0
	for _, id in ipairs(redis.call('ZRANGE', list, 0, -1)) do
		held = held + tonumber(redis.call('HGET', prefix .. id, 'size') or '0')
	end
	if held - old + size > tonumber(ARGV[6]) then
		return {3, held}
	end
end
local lease = tonumber(h[2])
if tonumber(ARGV[1]) > 0 then
	lease = now + tonumber(ARGV[1])
	redis.call('HSET', KEYS[1], 'lease', lease)
end
if ARGV[2] == '1' and h[4] ~= '' and redis.call('GET', h[4]) == h[5] then
	redis.call('DEL', h[4])
end
local keep = lease + tonumber(h[3])
local loud = ARGV[4] ~= ''
if ARGV[4] ~= '' then
	redis.call('HSET', KEYS[1], 'status', ARGV[4], 'approval', ARGV[5])
	if final(ARGV[4]) then
		keep = now + tonumber(h[3])
	end
end
for i = 7, #ARGV, 2 do
	redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
	if ARGV[i] ~= 'output' then
		loud = true
	end
end
if ARGV[4] ~= '' or #ARGV > 6 then
	redis.call('HSET', KEYS[1], 'size', size)
end
if loud then
	redis.call('HSET', KEYS[1], 'updated', now)
	redis.call('HINCRBY', KEYS[1], 'version', 1)
	redis.call('PUBLISH', ARGV[3], KEYS[1])
end
redis.call('PEXPIREAT', KEYS[1], keep)
if h[4] ~= '' and redis.call('GET', h[4]) == h[5] then
	redis.call('PEXPIREAT', h[4], keep)
end
return {1, redis.call('HGETALL', KEYS[1]), now}
`)

// cancelTaskScript asks for the cancel of task KEYS[1], publishing on
// channel ARGV[1].
var cancelTaskScript = redis.NewScript(taskStateCheck + `
if redis.call('HGET', KEYS[1], 'cancel') ~= '1' then
	redis.call('HSET', KEYS[1], 'cancel', '1', 'updated', now)
	redis.call('HINCRBY', KEYS[1], 'version', 1)
	redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return {1, redis.call('HGETALL', KEYS[1]), now}
`)

// getTaskScript returns task KEYS[1] and the time.
var getTaskScript = redis.NewScript(luaNow + `
return {redis.call('HGETALL', KEYS[1]), now}
`)

// summaryTaskScript returns the fields ARGV of task KEYS[1], as HGETALL
// does, and the time: a summary that leaves the task's output, questions
// and answers in Redis.
var summaryTaskScript = redis.NewScript(luaNow + `
local out = {}
for _, f in ipairs(ARGV) do
	local v = redis.call('HGET', KEYS[1], f)
	if v then
		out[#out + 1] = f
		out[#out + 1] = v
	end
end
return {out, now}
`)

// taskSummaryFields are the fields of a task's summary (store.Task.Summary).
var taskSummaryFields = []any{"id", "principal", "tool", "rid", "digest", "status", "created", "updated", "lease", "ttl",
	"exec", "error", "progress", "approval", "cancel", "version", "input"}

// CreateTask records a task, unless its request id names one kept.
func (s *Store) CreateTask(ctx context.Context, t store.Task, lease time.Duration) (store.Task, bool, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return store.Task{}, false, fmt.Errorf("redisstore: cannot make a task id: %w", err)
	}
	id := hex.EncodeToString(b[:]) + "-" + taskTag(t.Principal)
	v, err := createTaskScript.Run(ctx, s.client, []string{s.taskIndexKey(t), s.taskListKey(t.Principal), s.taskKey(id)},
		id, t.Principal, t.Tool, t.RequestID, millis(lease), millis(t.TTL), store.DefaultTaskLimit, store.DefaultTaskBytes,
		strings.TrimSuffix(s.taskKey(id), id), t.Digest, t.InputSize).Slice()
	if err != nil {
		return store.Task{}, false, failure(ctx, err)
	}
	code, _ := v[0].(int64)
	switch code {
	case 2:
		return store.Task{}, false, fmt.Errorf("%w: %v tasks kept", store.ErrTaskCapacity, v[1])
	case 0:
		cur, _ := v[1].(string)
		got, err := s.GetTask(ctx, cur)
		return got, false, err
	}
	got, err := s.GetTask(ctx, id)
	return got, true, err
}

// GetTask returns the task with that id.
func (s *Store) GetTask(ctx context.Context, id string) (store.Task, error) {
	k := s.taskKey(id)
	if k == "" {
		return store.Task{}, store.ErrTaskNotFound
	}
	v, err := getTaskScript.Run(ctx, s.client, []string{k}).Slice()
	if err != nil {
		return store.Task{}, failure(ctx, err)
	}
	return taskReply(v[0], v[1])
}

// ListTasks returns a page of a principal's tasks, newest first.
func (s *Store) ListTasks(ctx context.Context, principal, before string, limit int) ([]store.Task, error) {
	list := s.taskListKey(principal)
	start := int64(0)
	if before != "" {
		rank, err := s.client.ZRevRank(ctx, list, before).Result()
		if err == redis.Nil {
			return nil, nil
		}
		if err != nil {
			return nil, failure(ctx, err)
		}
		start = rank + 1
	}
	ids, err := s.client.ZRevRange(ctx, list, start, start+int64(limit)*2).Result()
	if err != nil {
		return nil, failure(ctx, err)
	}
	var out []store.Task
	for _, id := range ids {
		if len(out) == limit {
			break
		}
		k := s.taskKey(id)
		if k == "" {
			continue
		}
		v, err := summaryTaskScript.Run(ctx, s.client, []string{k}, taskSummaryFields...).Slice()
		if err != nil {
			return nil, failure(ctx, err)
		}
		t, err := taskReply(v[0], v[1])
		if err == store.ErrTaskNotFound {
			continue // gone; the next CreateTask forgets it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// UpdateTask applies u to a task that is not final.
func (s *Store) UpdateTask(ctx context.Context, id string, u store.TaskUpdate) (store.Task, error) {
	k := s.taskKey(id)
	if k == "" {
		return store.Task{}, store.ErrTaskNotFound
	}
	release := ""
	if u.Release {
		release = "1"
	}
	args := []any{millis(u.Lease), release, s.channel, string(u.Status), u.ApprovalID, store.DefaultTaskBytes}
	if u.Lease <= 0 {
		args[0] = 0
	}
	for _, f := range []struct {
		name  string
		value []byte
	}{{"exec", []byte(u.ExecutionID)}, {"output", u.Output}, {"error", u.Error}, {"progress", u.Progress}, {"questions", u.Questions}} {
		if len(f.value) > 0 {
			args = append(args, f.name, f.value)
		}
	}
	for id, a := range u.Answers { // a field each, so that answers given at once on several hosts are all kept
		args = append(args, answerField+id, a)
	}
	return s.taskTransition(ctx, updateTaskScript, k, args...)
}

// CancelTask asks the host running a task to stop it.
func (s *Store) CancelTask(ctx context.Context, id string) (store.Task, error) {
	k := s.taskKey(id)
	if k == "" {
		return store.Task{}, store.ErrTaskNotFound
	}
	return s.taskTransition(ctx, cancelTaskScript, k, s.channel)
}

func (s *Store) taskTransition(ctx context.Context, script *redis.Script, key string, args ...any) (store.Task, error) {
	v, err := script.Run(ctx, s.client, []string{key}, args...).Slice()
	if err != nil {
		return store.Task{}, failure(ctx, err)
	}
	code, _ := v[0].(int64)
	if code == 3 {
		return store.Task{}, fmt.Errorf("%w: %v bytes held", store.ErrTaskCapacity, v[1])
	}
	if code == 0 || len(v) < 3 {
		return store.Task{}, store.ErrTaskNotFound
	}
	t, err := taskReply(v[1], v[2])
	if err == nil && code != 1 {
		err = store.ErrTaskState
	}
	return t, err
}

// AwaitTask returns the task once it changed, is final or lost. A change
// on any host wakes it by a message on the store's channel; it also looks
// again when the lease lapses, and at least every poll interval.
func (s *Store) AwaitTask(ctx context.Context, id string, version int64) (store.Task, error) {
	k := s.taskKey(id)
	if k == "" {
		return store.Task{}, store.ErrTaskNotFound
	}
	w := s.hub.add(k)
	defer s.hub.remove(k, w)
	for {
		t, err := s.GetTask(ctx, id)
		if err != nil || t.Version != version || t.Status.Final() {
			return t, err
		}
		if err := wait(ctx, w.ch, min(s.poll, time.Until(t.Lease)+time.Millisecond)); err != nil {
			return t, err
		}
	}
}

// taskReply reads a script's HGETALL reply and the time of Redis.
func taskReply(hash, now any) (store.Task, error) {
	flat, _ := hash.([]any)
	if len(flat) == 0 {
		return store.Task{}, store.ErrTaskNotFound
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		m[k], _ = flat[i+1].(string)
	}
	n, _ := now.(int64)
	return taskOf(m).At(time.UnixMilli(n)), nil
}

// answerField prefixes the hash field of the answer to a task's question,
// by the question's id.
const answerField = "answer:"

// taskOf reads a task's hash.
func taskOf(m map[string]string) store.Task {
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	ms := func(k string) time.Time {
		if n := num(k); n != 0 {
			return time.UnixMilli(n)
		}
		return time.Time{}
	}
	bytesOf := func(k string) []byte {
		if v, ok := m[k]; ok {
			return []byte(v)
		}
		return nil
	}
	var answers map[string][]byte
	for k, v := range m {
		if id, ok := strings.CutPrefix(k, answerField); ok {
			if answers == nil {
				answers = map[string][]byte{}
			}
			answers[id] = []byte(v)
		}
	}
	return store.Task{
		Questions: bytesOf("questions"), Answers: answers,
		ID: m["id"], Principal: m["principal"], Tool: m["tool"], RequestID: m["rid"], Digest: m["digest"], Status: store.TaskStatus(m["status"]),
		Created: ms("created"), Updated: ms("updated"), Lease: ms("lease"), TTL: time.Duration(num("ttl")) * time.Millisecond,
		ExecutionID: m["exec"], Output: bytesOf("output"), Error: bytesOf("error"), Progress: bytesOf("progress"),
		ApprovalID: m["approval"], CancelRequested: m["cancel"] == "1", Version: num("version"), InputSize: int(num("input")),
	}
}
