package redisstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

// The shared contract: the same suites the in-memory store passes.
func TestIdempotencyStoreConformance(t *testing.T) {
	c := newClient(t)
	storetest.TestIdempotencyStore(t, func(t *testing.T, limit int) store.IdempotencyStore {
		return newStore(t, c, testPrefix(t, c), WithLimit(limit))
	})
}

func TestLockerConformance(t *testing.T) {
	c := newClient(t)
	storetest.TestLocker(t, func(t *testing.T) store.Locker {
		return newStore(t, c, testPrefix(t, c), WithLogger(quiet))
	})
}

// The suites again with each call on its own "host": a Store of its own
// over one Redis and prefix, so that every wake-up crosses hosts.
func TestConformanceAcrossHosts(t *testing.T) {
	c := newClient(t)
	t.Run("store", func(t *testing.T) {
		storetest.TestIdempotencyStore(t, func(t *testing.T, limit int) store.IdempotencyStore {
			return &roundRobin{hosts: hosts(t, c, testPrefix(t, c), 3, WithLimit(limit))}
		})
	})
	t.Run("locker", func(t *testing.T) {
		storetest.TestLocker(t, func(t *testing.T) store.Locker {
			return &roundRobin{hosts: hosts(t, c, testPrefix(t, c), 3)}
		})
	})
}

func hosts(t *testing.T, c redis.UniversalClient, prefix string, n int, opts ...Option) []*Store {
	out := make([]*Store, n)
	for i := range out {
		out[i] = newStore(t, c, prefix, append([]Option{WithLogger(quiet)}, opts...)...)
	}
	return out
}

// roundRobin sends each call to the next host.
type roundRobin struct {
	hosts []*Store
	next  atomic.Uint32
	// began is the host that began each reservation, by token.
	began sync.Map
}

func (r *roundRobin) host() *Store { return r.hosts[int(r.next.Add(1))%len(r.hosts)] }

func (r *roundRobin) Begin(ctx context.Context, key store.Key, digest string, lease time.Duration) (store.Reservation, error) {
	h := r.host()
	res, err := h.Begin(ctx, key, digest, lease)
	if res.Owned {
		r.began.Store(res.Token, h)
	}
	return res, err
}
func (r *roundRobin) Wait(ctx context.Context, key store.Key) error {
	return r.host().Wait(ctx, key)
}
func (r *roundRobin) Complete(ctx context.Context, key store.Key, token string, rec store.Record, ttl time.Duration) error {
	return r.holder(token).Complete(ctx, key, token, rec, ttl)
}
func (r *roundRobin) Release(ctx context.Context, key store.Key, token string) error {
	return r.holder(token).Release(ctx, key, token)
}

// holder is the host that began the reservation of token, which ends it
// and checks it as carmy's hosts do; the next host for a token no host
// began.
func (r *roundRobin) holder(token string) *Store {
	if h, ok := r.began.Load(token); ok {
		return h.(*Store)
	}
	return r.host()
}
func (r *roundRobin) Find(ctx context.Context, key store.Key) (store.Reservation, bool, error) {
	return r.host().Find(ctx, key)
}
func (r *roundRobin) UseNonce(ctx context.Context, principal, nonce string, ttl time.Duration) (bool, error) {
	return r.host().UseNonce(ctx, principal, nonce, ttl)
}
func (r *roundRobin) AbandonReservation(key store.Key, token string) {
	for _, h := range r.hosts { // the one that began it renews it
		h.AbandonReservation(key, token)
	}
}
func (r *roundRobin) SetWindow(d time.Duration) {
	for _, h := range r.hosts {
		h.SetWindow(d)
	}
}
func (r *roundRobin) Acquire(ctx context.Context, name string, lease time.Duration) (store.Lock, error) {
	return r.host().Acquire(ctx, name, lease)
}
func (r *roundRobin) Check(ctx context.Context, key store.Key, token string) error {
	return r.holder(token).Check(ctx, key, token)
}
func (r *roundRobin) Ping(ctx context.Context) error { return r.host().Ping(ctx) }

// The optional interfaces the store and locker suites look for: the
// round-robin wrapper forwards each, so that their cases run across hosts
// and on a Cluster instead of skipping.
var suiteCapabilities = []reflect.Type{
	reflect.TypeFor[store.Checker](), reflect.TypeFor[store.Pinger](), reflect.TypeFor[store.Finder](),
	reflect.TypeFor[store.NonceStore](), reflect.TypeFor[store.Windowed](), reflect.TypeFor[store.ReservationAbandoner](),
}

func TestRoundRobinForwardsEveryCapability(t *testing.T) {
	for _, it := range suiteCapabilities {
		if !reflect.TypeFor[*Store]().Implements(it) {
			t.Errorf("Store does not implement %v", it)
		}
		if !reflect.TypeFor[*roundRobin]().Implements(it) {
			t.Errorf("roundRobin does not implement %v, which Store does: the suites skip its cases", it)
		}
	}
}

func TestRecordKeepsOutputBytes(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, testPrefix(t, c))
	ctx := context.Background()
	key := store.Key{Principal: "a:b", Tool: "t", RequestID: "{x}"}
	r, err := s.Begin(ctx, key, "d", time.Minute)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	out := `{"html":"<b>&</b>", "n": 12345678901234567890}` // spacing and characters a JSON re-encoding would change
	if err := s.Complete(ctx, key, r.Token, store.Record{Digest: "d", ExecutionID: "e", Output: []byte(out)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	r, err = s.Begin(ctx, key, "d", time.Minute)
	if err != nil || r.Record == nil {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	if string(r.Record.Output) != out || r.Record.Error != nil || r.Record.ExecutionID != "e" {
		t.Fatalf("record = %+v; want the output byte for byte", r.Record)
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, testPrefix(t, c))
	ctx := context.Background()
	// Each pair would make the same key if the parts were joined with ":".
	pairs := [][2]store.Key{
		{{Principal: "a:b", Tool: "t", RequestID: "c"}, {Principal: "a", Tool: "b:t", RequestID: "c"}},
		{{Principal: "a", Tool: "t", RequestID: "b:c"}, {Principal: "a:t", Tool: "b", RequestID: "c"}},
	}
	for _, p := range pairs {
		for _, k := range p {
			if r, err := s.Begin(ctx, k, "d", time.Minute); err != nil || !r.Owned {
				t.Fatalf("Begin(%+v) = %+v, %v; want owned", k, r, err)
			}
		}
	}
}

func TestPrefixesAreSeparate(t *testing.T) {
	c := newClient(t)
	a := newStore(t, c, testPrefix(t, c))
	b := newStore(t, c, testPrefix(t, c))
	ctx := context.Background()
	key := store.Key{Tool: "t", RequestID: "1"}
	for _, s := range []*Store{a, b} {
		if r, err := s.Begin(ctx, key, "d", time.Minute); err != nil || !r.Owned {
			t.Fatalf("Begin = %+v, %v; want owned under each prefix", r, err)
		}
	}
	la, err := a.Acquire(ctx, "tool", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(ctx)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lb, err := b.Acquire(cctx, "tool", time.Minute)
	if err != nil {
		t.Fatalf("a lock under one prefix blocked the other: %v", err)
	}
	_ = lb.Release(ctx)
}

// Fences keep growing when Redis loses the counter, as after a restart
// without persistence or a failover to a lagging replica.
func TestFenceSurvivesLostCounter(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, testPrefix(t, c))
	ctx := context.Background()
	var last uint64
	for i := range 5 {
		l, err := s.Acquire(ctx, "tool", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("acquisition %d: fence %d after %d", i, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if err := c.Del(ctx, s.fenceKey("tool")).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A lock whose lease lapsed while its holder still ran (a paused process)
// reports it on Release, and the late Release leaves the new holder alone.
func TestLostLockIsReported(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	paused := newStore(t, c, prefix, WithLogger(quiet))
	other := newStore(t, c, prefix)
	ctx := context.Background()
	l, err := paused.Acquire(ctx, "tool", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	l.(*lock).stopRenewal() // the process stops: no renewal, no release
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	next, err := other.Acquire(cctx, "tool", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if err := l.Release(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Release of a lapsed lock = %v; want ErrLockLost", err)
	}
	if next.Fence() <= l.Fence() {
		t.Fatalf("the new holder's fence %d is not above the lapsed one's %d", next.Fence(), l.Fence())
	}
	if v, _ := c.HGet(ctx, other.lockKey("tool"), "t").Result(); v != next.(*lock).token {
		t.Fatal("the late Release freed the new holder's lock")
	}
}

// Waiters are woken by messages, not by polling: with a poll interval far
// longer than the test, a completion on another host still wakes them.
func TestWaitersWakeByMessage(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	a := newStore(t, c, prefix, WithPollInterval(time.Hour))
	b := newStore(t, c, prefix, WithPollInterval(time.Hour))
	ctx := context.Background()
	key := store.Key{Tool: "t", RequestID: "1"}
	r, err := a.Begin(ctx, key, "d", time.Hour)
	if err != nil || !r.Owned {
		t.Fatalf("Begin = %+v, %v", r, err)
	}
	var wg sync.WaitGroup
	woke := make(chan time.Duration, 8)
	for range 8 {
		wg.Go(func() {
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := b.Wait(cctx, key); err != nil {
				t.Error(err)
				return
			}
			woke <- time.Since(start)
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := a.Complete(ctx, key, r.Token, store.Record{Digest: "d"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(woke)
	n := 0
	for d := range woke {
		n++
		if d > 5*time.Second {
			t.Errorf("a waiter took %v", d)
		}
	}
	if n != 8 {
		t.Fatalf("%d of 8 waiters woke", n)
	}

	// The same for a lock.
	l, err := a.Acquire(ctx, "tool", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l2, err := b.Acquire(cctx, "tool", time.Hour)
		if err == nil {
			_ = l2.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter on another host did not get the released lock: %v", err)
	}
}

func TestNewRefusesSplitHashTag(t *testing.T) {
	for _, p := range []string{"app{", "a}b:", "{x:"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with prefix %q did not panic", p)
				}
			}()
			New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithPrefix(p))
		}()
	}
	s := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithPrefix("{app}:"))
	if s.lockKey("t") != "{app}:lock:{t}" {
		t.Fatalf("lock key = %q", s.lockKey("t"))
	}
}

func TestOpenURL(t *testing.T) {
	for _, bad := range []string{
		"redis://127.0.0.1:6379/0?prefix=a{",
		"redis://127.0.0.1:6379/0?poll_interval=soon",
		"redis://127.0.0.1:6379/0?limit=0",
		"redis://127.0.0.1:6379/0?limit=many",
		"redis://127.0.0.1:6379/0?journal=-1",
		"redis://127.0.0.1:6379/0?journal=32MiB",
		"redis://127.0.0.1:6379/0?no_such_option=1",
		"redis://127.0.0.1:6379/notadb",
		"redis://127.0.0.1:6379/0?replicas=0",
		"redis://127.0.0.1:6379/0?replicas=one",
		"redis://127.0.0.1:6379/0?replica_timeout=1s",
		"redis://127.0.0.1:6379/0?replicas=1&replica_timeout=0s",
		"redis://127.0.0.1:6379/0?replicas=1&replica_timeout=soon",
	} {
		if _, _, err := open(bad); err == nil {
			t.Errorf("open(%q) succeeded", bad)
		}
	}
	st, l, err := open("redis://127.0.0.1:6379/3?prefix=app1:&poll_interval=250ms&limit=50&journal=0&dial_timeout=1s&replicas=2&replica_timeout=250ms")
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*Store)
	if l != store.Locker(s) || s.prefix != "app1:" || s.poll != 250*time.Millisecond || s.limit != 50 || s.journal.budget != 0 || !s.owned || s.replicas != 2 || s.replicaTimeout != 250*time.Millisecond {
		t.Fatalf("opened %+v", s)
	}
	if o := s.client.(*redis.Client).Options(); o.DB != 3 || o.DialTimeout != time.Second || !o.ContextTimeoutEnabled {
		t.Fatalf("client options: db %d, dial timeout %v, context timeouts %v", o.DB, o.DialTimeout, o.ContextTimeoutEnabled)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// Builder.StoreURL opens the store by its scheme, and the registry closes
// the client it opened.
func TestBuilderStoreURL(t *testing.T) {
	u := redisURL(t)
	c := newClient(t)
	prefix := testPrefix(t, c)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	reg, err := carmy.New().Tool(counterTool(new(atomic.Int64))).StoreURL(u + sep + "prefix=" + prefix).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := reg.Execute(ctx, carmy.Call{Tool: "count", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := reg.Execute(ctx, carmy.Call{Tool: "count", RequestID: "r1"})
	if err != nil || !again.Replayed || again.ExecutionID != first.ExecutionID {
		t.Fatalf("repeat = %+v, %v; want the replay of %s", again, err, first.ExecutionID)
	}
	if n, _ := c.Exists(ctx, prefix+"idem:{p:}:count:r1").Result(); n != 1 {
		t.Fatal("the record is not in Redis under the URL's prefix")
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
}

// go-redis sends a script again when a network error or a timeout lost its
// reply; each script then answers as if it had run once.
func TestScriptsAreSafeToRunTwice(t *testing.T) {
	c := newClient(t)
	s := newStore(t, c, testPrefix(t, c))
	ctx := context.Background()
	key, recs := s.idemKey(store.Key{Tool: "t", RequestID: "1"}), s.recordsKey("")
	var begun []any
	for range 2 {
		v, err := beginScript.Run(ctx, c, s.guarded(key, recs, s.reservationFenceKey("")), "d", "tok", 60_000, 10, 0, "", "fresh", time.Now().UnixMicro()).Slice()
		if err != nil || v[0] != int64(1) || len(v) != 5 {
			t.Fatalf("Begin sent twice = %v, %v; want owned both times", v, err)
		}
		begun = append(begun, v[3])
	}
	if begun[0] != begun[1] {
		t.Fatalf("Begin sent twice got fences %v; want the same one", begun)
	}
	for range 2 {
		ok, err := completeScript.Run(ctx, c, []string{key, recs}, "tok", "d", "e1", "1", "", 60_000, s.channel, 10, 0).Int64()
		if err != nil || ok != 1 {
			t.Fatalf("Complete sent twice = %v, %v; want done both times", ok, err)
		}
	}
	if ok, _ := completeScript.Run(ctx, c, []string{key, recs}, "tok", "d", "e2", "2", "", 60_000, s.channel, 10, 0).Int64(); ok != 0 {
		t.Fatal("another Complete with the same token replaced the record")
	}
	lk, fk := s.lockKey("tool"), s.fenceKey("tool")
	var fences []int64
	for range 2 {
		v, err := acquireScript.Run(ctx, c, []string{lk, fk}, "tok", 60_000, time.Now().UnixMicro()).Int64Slice()
		if err != nil || v[0] != 1 {
			t.Fatalf("Acquire sent twice = %v, %v; want held both times", v, err)
		}
		fences = append(fences, v[1])
	}
	if fences[0] != fences[1] {
		t.Fatalf("Acquire sent twice got fences %v; want the same one", fences)
	}
}
