// Package redisstore keeps carmy's idempotency records and serialization
// locks in Redis, so that several hosts serving the same tools behind a load
// balancer keep the runtime's promises between them: a request id runs once,
// and a tool that is not parallel-safe never runs on two hosts at once.
//
// It is a module of its own, so that programs that do not use Redis never
// depend on go-redis. A [Store] is a [store.IdempotencyStore], a
// [store.Locker], a [store.ApprovalStore] (so that a call approved on one
// host runs once, on any), and a [store.RateLimiter] and
// [store.ConcurrencyLimiter] (so that a principal's limits hold across
// hosts); give it to the builder as store and locker, and the builder
// keeps its approvals and limits there too:
// host runs once, on any) and a [store.TaskStore] (so that any host answers
// for any task); give it to the builder as store and locker, and the
// builder keeps its approvals and tasks there too:
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379"})
//	s := redisstore.New(client)
//	defer s.Close()
//	reg, err := carmy.New().Tool(tools...).Store(s).Locker(s).Build()
//
// or name it by URL, which the package registers for the schemes redis and
// rediss when it is imported:
//
//	import _ "github.com/carmy-dev/carmy/redisstore"
//
//	reg, err := carmy.New().Tool(tools...).StoreURL("redis://redis:6379/0").Build()
//
// # What is kept where
//
// Every key starts with the prefix ([WithPrefix], default "carmy:"):
//
//   - prefix + "idem:{p:" + principal + "}:" + tool + ":" + request id
//     (each part query-escaped): a hash holding either an in-flight
//     reservation (the input digest and the reservation token), whose lease
//     its host renews until the execution ends, or a recorded outcome that
//     expires after the record TTL.
//   - prefix + "recs:{p:" + principal + "}": a sorted set of the
//     principal's records by the time they were made, by which the oldest
//     beyond the limit per principal are evicted; it expires with the
//     principal's last record.
//   - prefix + "lock:{" + name + "}": a hash of the holder's token and
//     fence, expiring with the lock's lease, which the holder renews while
//     its tool runs.
//   - prefix + "fence:{" + name + "}": the lock's fencing counter, with no
//     TTL: one small key per serialized tool.
//   - prefix + "rfence:{p:" + principal + "}": the counter of the fences of
//     the principal's reservations, expiring a day after the last.
//   - prefix + "appr:{appr}:" + id, prefix + "apprkey:{appr}:" + ... and
//     prefix + "apprs:{appr}": the approvals, their index by call and their
//     list (see approvals.go), kept an hour past their expiry.
//   - prefix + "rate:{" + principal + ":" + tool + "}" (each part
//     query-escaped): a principal's rate limit on a tool, GCRA's
//     theoretical arrival time in microseconds of Redis time, expiring when
//     the allowance is full again.
//   - prefix + "slots:{" + principal + ":" + tool + "}": a sorted set of the
//     tokens of the calls holding a slot of the tool's MaxInFlight, by the
//     end of their lease, which their hosts renew while the calls run.
//   - prefix + "key:" + name: a random key shared by the hosts
//     ([store.KeyStore]): "state" signs the request state of the
//     sessionless MCP protocol, so that a call's next round verifies on
//     any host. It never expires.
//   - prefix + "nonce:{p:" + principal + "}:" + nonce: a one-time nonce
//     used up ([store.NonceStore]), kept for its TTL.
//   - prefix + "task:{tk:T}:" + id, prefix + "taskrid:{tk:T}:" + ... and
//     prefix + "tasks:{tk:T}:" + principal: a task, the index of its
//     request id and its principal's list, under one tag per principal
//     (see tasks.go), kept for the task's TTL once it ended.
//   - prefix + "marker": a hash naming the Redis server (its run id) and
//     the time of the last loss of state found, by which the store sees
//     that Redis restarted or lost its data (not kept in Redis Cluster).
//   - prefix + "done": the pub/sub channel on which the key of a finished
//     reservation that someone awaits, of a released lock, of a decided
//     approval or of a changed task is published, to wake the waiters on
//     every host.
//
// The braces are Redis Cluster hash tags: a lock and its fence counter live
// in one slot, and so do a principal's records and their sorted set. Reservations and locks are taken, completed, renewed and
// released by Lua scripts, atomically, and only by the holder's token.
//
// # Leases and fences
//
// A reservation's lease and a lock's lease are renewed by their host, every
// third of the lease, while the execution lives (waiting for its tool's turn
// and running): a request id runs once however long it waits or runs, and
// the lease only frees a key or a lock whose host died. A host that is only
// paused (a long GC pause, a suspended VM, a partition from Redis) can
// outlive its lease while another host takes the lock: then two executions
// overlap, and only the fence, which grows with every acquisition and
// which the tool reads as the Fence of its carmy.Context, lets the resource
// it writes refuse the stale one. docs/deployment.md explains.
//
// # Lost state
//
// Redis can lose what it held: a restart without persistence, a failover
// to a replica that lagged, a FLUSHALL. Every script of a reservation
// looks at the marker, and after a loss is found the store holds new
// executions ([store.ErrRecovering]) for one lease, or for one renewal
// interval (a third of it) when Redis kept the marker (a promoted replica,
// a restart with AOF), while the hosts restore
// the reservations they hold, record their outcomes, and record again the
// outcomes they remember ([WithJournal]): a request in flight or finished
// before the loss is not run again by its retry, as long as its host
// lived and still remembers it. Redis Cluster keeps no marker, so there
// no loss is found: give its nodes AOF with appendfsync always.
//
// # Bounds
//
// Each principal keeps at most [WithLimit] records (default
// [DefaultLimit]): a principal beyond it loses its own oldest records,
// never another principal's, so a caller flooding the store with fresh
// request ids cannot make another caller's retry run twice; and never one
// younger than the window ([WithWindow], default [store.DefaultWindow]): a
// principal at its limit with only younger records gets
// [store.ErrCapacity] for a new request id.
// In-flight reservations are never evicted. The store does not count its
// records across principals: Redis does, with maxmemory. Each record lives
// for the registry's idempotency TTL, so the number held is at most the
// number of active principals times the limit. Size maxmemory for that and
// set maxmemory-policy to noeviction: when Redis is full, new calls then
// fail with unavailable (retryable) instead of Redis silently evicting an
// in-flight reservation or a lock, which would let a request run twice or
// a serialized tool overlap, or another principal's records.
// docs/deployment.md has the details.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

func init() {
	store.Register("redis", open)
	store.Register("rediss", open)
}

// DefaultPrefix starts every key the store writes.
const DefaultPrefix = "carmy:"

// DefaultLimit is how many idempotency records the store keeps per
// principal unless told otherwise ([WithLimit]): enough for a principal
// making 1,000 calls a second with request ids to keep every record for
// the default window, [store.DefaultWindow], with room to spare.
const DefaultLimit = 1_000_000

// DefaultPollInterval is how long a waiter sleeps at most between two
// looks at Redis when no message wakes it first.
const DefaultPollInterval = time.Second

// Store is a [store.IdempotencyStore] and a [store.Locker] kept in Redis.
// It is safe for concurrent use. Several Stores, in one process or many,
// that use the same Redis and prefix share their records and locks.
type Store struct {
	client redis.UniversalClient
	owned  bool // Close closes client: it was opened from a URL
	prefix string
	poll   time.Duration
	logger *slog.Logger

	upkeep  *upkeep
	batch   batcher // of the renewals, on upkeep
	channel string  // prefix + "done"
	hub     *hub

	gatesMu sync.Mutex
	gates   map[string]chan struct{} // one waiter per lock name in this process goes to Redis

	replicas       int           // WithReplicas: replicas that confirm each outcome
	replicaTimeout time.Duration // how long Complete waits for them

	limit      int                    // records per principal
	window     atomic.Int64           // ms below which no record is evicted
	marker     string                 // the key of the marker of lost state; "" in Redis Cluster
	epoch      atomic.Pointer[string] // the marker's id as last seen
	renewalsMu sync.Mutex
	renewals   map[string]*renewal // of the reservations this process holds, by token

	journal   journal        // the outcomes this process recorded, to record again after a loss
	watchOnce sync.Once      // starts watch with the first outcome remembered
	watching  sync.WaitGroup // watch, until the store closes
	poke      chan struct{}  // wakes watch at once
	lost      signal         // fired by watch when Redis lost its state, to renew every reservation now
	closed    chan struct{}  // closed by Close

	closeOnce sync.Once
	closeErr  error

	// firstSince is the time of the last loss found, as the first
	// reservation learned it (-1 before): watch takes a later one for news.
	firstSince atomic.Int64
}

var (
	_ store.IdempotencyStore = (*Store)(nil)
	_ store.Locker           = (*Store)(nil)
	_ io.Closer              = (*Store)(nil)
)

// Option configures a [Store].
type Option func(*Store)

// WithPrefix sets the prefix of every key and channel the store uses, so
// that several applications can share one Redis: stores with different
// prefixes share nothing. The default is [DefaultPrefix]. A prefix may hold
// a complete Redis Cluster hash tag, such as "{app}:", to put every key in
// one slot; New panics on a prefix with an unmatched brace, which would
// split a lock from its fence counter.
func WithPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = prefix }
}

// WithPollInterval bounds how long a caller waiting for an execution in
// flight or for a lock sleeps between two looks at Redis when no message
// wakes it first. Messages wake waiters at once; the poll only covers a
// message that was lost. The default is [DefaultPollInterval].
func WithPollInterval(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.poll = d
		}
	}
}

// WithLimit sets how many idempotency records the store keeps per
// principal: a principal beyond it loses its own oldest records, never
// another principal's, and only those older than the window
// ([WithWindow]). The default is [DefaultLimit]; n <= 0 keeps it.
func WithLimit(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.limit = n
		}
	}
}

// WithWindow sets the age below which no idempotency record is evicted to
// make room (see [store.Windowed]); the default is [store.DefaultWindow],
// and a builder's IdempotencyWindow replaces it. d < 0 keeps it.
func WithWindow(d time.Duration) Option {
	return func(s *Store) { s.SetWindow(d) }
}

// SetWindow sets the age below which no idempotency record is evicted to
// make room; 0 lets records of any age go. It implements [store.Windowed].
func (s *Store) SetWindow(d time.Duration) {
	if d >= 0 {
		s.window.Store(d.Milliseconds())
	}
}

func (s *Store) windowMillis() int64 { return s.window.Load() }

// guarded returns keys followed by the marker of lost state, when the
// store keeps one: a script can read it only in the slot of the keys, so
// in Redis Cluster it keeps none.
func (s *Store) guarded(keys ...string) []string {
	if s.marker != "" {
		keys = append(keys, s.marker)
	}
	return keys
}

// knownEpoch returns the marker's id as this host last saw it, "" before
// it saw one.
func (s *Store) knownEpoch() string {
	if p := s.epoch.Load(); p != nil {
		return *p
	}
	return ""
}

// learnEpoch notes the marker's id a script answered with. A new id where
// one was known means Redis lost its state: the watch looks at once.
func (s *Store) learnEpoch(id string) {
	if known := s.knownEpoch(); id != "" && id != known {
		s.epoch.Store(&id)
		if known != "" {
			s.lossSeen()
		}
	}
}

// WithLogger sets where the store reports what the caller cannot see, such
// as a lock whose lease ran out while its tool was still running. The
// default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.logger = l
		}
	}
}

// New returns a store on client, which stays the caller's: [Store.Close]
// does not close it. client may be a single node, a failover (Sentinel)
// client or a cluster client. Set its ContextTimeoutEnabled option, so that
// a caller's cancellation or deadline ends a wait for a slow Redis, rather
// than the client's read timeout. The store renews the leases its host
// holds, and watches for a Redis that lost its state, through a small pool
// of its own (up to 4 connections, with client's options), so that calls
// that keep every connection of client busy never hold up a renewal until
// its lease lapses.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{client: client, prefix: DefaultPrefix, poll: DefaultPollInterval, logger: slog.Default(), gates: map[string]chan struct{}{}, limit: DefaultLimit, renewals: map[string]*renewal{},
		journal: journal{budget: DefaultJournal}, poke: make(chan struct{}, 1), closed: make(chan struct{})}
	s.window.Store(store.DefaultWindow.Milliseconds())
	s.firstSince.Store(-1)
	for _, o := range opts {
		o(s)
	}
	_, cluster := client.(*redis.ClusterClient)
	if !cluster {
		s.marker = s.prefix + "marker"
	} else if s.replicas > 0 {
		panic("redisstore: WithReplicas needs one primary (a single-node or failover client), not a cluster client")
	}
	if err := checkPrefix(s.prefix); err != nil {
		panic("redisstore: " + err.Error())
	}
	s.channel = s.prefix + "done"
	s.hub = newHub(client, s.channel)
	s.hub.start()
	s.upkeep = newUpkeep(client)
	s.batch = batcher{s: s, wake: make(chan struct{}, 1)}
	return s
}

// checkPrefix refuses a prefix whose braces would make a hash tag out of
// part of a key's own name.
func checkPrefix(p string) error {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		if strings.IndexByte(p, '}') >= 0 {
			return fmt.Errorf("key prefix %q has a '}' without '{'", p)
		}
		return nil
	}
	if strings.IndexByte(p[open:], '}') < 0 {
		return fmt.Errorf("key prefix %q has a '{' without '}': it would split a lock from its fence counter in Redis Cluster", p)
	}
	return nil
}

// Close stops the store's subscription. A store opened from a URL also
// closes its client. Closing twice is harmless. Locks and reservations
// still held keep being renewed until released or completed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.watching.Wait()
		s.hub.close()
		s.upkeep.close()
		if s.owned {
			s.closeErr = s.client.Close()
		}
	})
	return s.closeErr
}

// open opens the store a URL names, for [store.Open] (and so for the
// builder's StoreURL):
// redis://[user:password@]host:port/db, or rediss:// for TLS, with the
// query parameters of go-redis's ParseURL (dial_timeout, read_timeout,
// max_retries, pool_size, ...), and carmy's own: prefix (the key prefix,
// [WithPrefix]), poll_interval (a Go duration, [WithPollInterval]), limit
// (records per principal, [WithLimit]), window (a Go duration,
// [WithWindow]), journal (bytes, [WithJournal]), and replicas with
// replica_timeout (a count and a Go duration, [WithReplicas]). The client respects its callers' contexts
// (ContextTimeoutEnabled) and is the store's, closed with it.
func open(raw string) (store.IdempotencyStore, store.Locker, error) {
	raw, sentinels := splitSentinels(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: %w", err)
	}
	q := u.Query()
	var opts []Option
	if q.Has("prefix") {
		p := q.Get("prefix")
		if err := checkPrefix(p); err != nil {
			return nil, nil, fmt.Errorf("redisstore: %w", err)
		}
		opts = append(opts, WithPrefix(p))
		q.Del("prefix")
	}
	if q.Has("poll_interval") {
		d, err := time.ParseDuration(q.Get("poll_interval"))
		if err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("redisstore: poll_interval=%q is not a positive duration such as 500ms", q.Get("poll_interval"))
		}
		opts = append(opts, WithPollInterval(d))
		q.Del("poll_interval")
	}
	if q.Has("window") {
		d, err := time.ParseDuration(q.Get("window"))
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("redisstore: window=%q is not a duration such as 10m", q.Get("window"))
		}
		opts = append(opts, WithWindow(d))
		q.Del("window")
	}
	if q.Has("journal") {
		n, err := strconv.ParseInt(q.Get("journal"), 10, 64)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("redisstore: journal=%q is not a number of bytes (0 remembers nothing)", q.Get("journal"))
		}
		opts = append(opts, WithJournal(n))
		q.Del("journal")
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("redisstore: limit=%q is not a positive number of records per principal", q.Get("limit"))
		}
		opts = append(opts, WithLimit(n))
		q.Del("limit")
	}
	replicaOpt, err := replicaOption(q)
	if err != nil {
		return nil, nil, err
	}
	if replicaOpt != nil {
		opts = append(opts, replicaOpt)
	}
	client, err := dial(u, q, sentinels)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: %w", err)
	}
	s := New(client, opts...)
	s.owned = true
	return s, s, nil
}

// dial opens the client of URL u whose carmy parameters were taken out of
// q: a single node, or the primary that the Sentinels at u's host and
// sentinels (the other addresses of the URL) name. The client respects
// its callers' contexts.
func dial(u *url.URL, q url.Values, sentinels []string) (*redis.Client, error) {
	scheme, sentinel := strings.CutSuffix(u.Scheme, "-sentinel")
	if !sentinel {
		u.RawQuery = q.Encode()
		ro, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, err
		}
		ro.ContextTimeoutEnabled = true // a caller's cancellation ends its wait for Redis
		return redis.NewClient(ro), nil
	}
	if q.Has("master") {
		q.Set("master_name", q.Get("master"))
		q.Del("master")
	}
	if q.Get("master_name") == "" {
		return nil, fmt.Errorf("%s URL names no primary: add ?master=NAME, the name the Sentinels monitor it by", u.Scheme)
	}
	for _, a := range sentinels {
		q.Add("addr", a)
	}
	u.Scheme, u.RawQuery = scheme, q.Encode()
	fo, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, err
	}
	fo.ContextTimeoutEnabled = true
	return redis.NewFailoverClient(fo), nil
}

// keys

// idemKey and recordsKey put a principal's keys in one Redis Cluster slot
// by a hash tag of the principal, never empty ("{p:}" for the principal
// ""), since Redis hashes the whole key when the braces hold nothing.
func (s *Store) idemKey(k store.Key) string {
	return s.prefix + "idem:{p:" + url.QueryEscape(k.Principal) + "}:" + url.QueryEscape(k.Tool) + ":" + url.QueryEscape(k.RequestID)
}

func (s *Store) recordsKey(principal string) string {
	return s.prefix + "recs:{p:" + url.QueryEscape(principal) + "}"
}

func (s *Store) lockKey(name string) string  { return s.prefix + "lock:{" + name + "}" }
func (s *Store) fenceKey(name string) string { return s.prefix + "fence:{" + name + "}" }

// reservationFenceKey is the principal's counter of reservation fences, in
// the slot of the principal's idempotency keys.
func (s *Store) reservationFenceKey(principal string) string {
	return s.prefix + "rfence:{p:" + url.QueryEscape(principal) + "}"
}

// millis converts a lease or TTL to whole milliseconds, rounding up, at
// least 1: Redis refuses an expiry of 0.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return max(int64(ms), 1)
}

// wait sleeps until woken, until d passes, or until ctx is done.
func wait(ctx context.Context, woken <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-woken:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure returns ctx's error when ctx is done, which is why a command
// failed, and err otherwise.
func failure(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	return fmt.Errorf("redisstore: %w", err)
}
