package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy/store"
)

// A lock is a hash with the fields t (the holder's token) and f (its
// fence), expiring with the lease. The scripts are safe to run twice, as
// go-redis does when a network error or a timeout lost a reply.

// acquireScript takes lock KEYS[1] for token ARGV[1] for ARGV[2] ms. It
// returns {1, fence}, the fence being more than every fence of KEYS[2]
// before and at least ARGV[3] (the acquirer's clock in microseconds), or
// {0, ms left on the holder's lease} when the lock is held.
//
// The clock floor keeps fences growing when Redis loses the counter (a
// restart without persistence, a failover to a replica that lagged, an
// eviction): the next fence still exceeds every fence handed out before,
// as long as the hosts' clocks roughly agree.
var acquireScript = redis.NewScript(`
local held = redis.call('HMGET', KEYS[1], 't', 'f')
if held[1] then
	if held[1] == ARGV[1] then
		return {1, tonumber(held[2])} -- taken already by this very call
	end
	return {0, redis.call('PTTL', KEYS[1])}
end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local floor = tonumber(ARGV[3])
local fence
if floor > last then
	fence = redis.call('INCRBY', KEYS[2], floor - last)
else
	fence = redis.call('INCR', KEYS[2])
end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'f', fence)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, fence}
`)

// unlockScript deletes lock KEYS[1] if token ARGV[1] holds it, and
// publishes its key on channel ARGV[2].
var unlockScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
	redis.call('DEL', KEYS[1])
	redis.call('PUBLISH', ARGV[2], KEYS[1])
	return 1
end
return 0
`)

// ErrLockLost is returned by Release of a lock whose lease ran out before
// it was released: another holder may have run at the same time, with a
// higher fence.
var ErrLockLost = errors.New("redisstore: the lock's lease ran out before it was released")

// Acquire blocks until it holds the lock of that name, for lease, or
// returns ctx's error when ctx is done first. The lock is renewed in the
// background, every third of its lease, until released; a host that dies
// stops renewing it, and the lock frees itself when the lease runs out.
//
// Callers in one process queue for a name among themselves first, so that
// one of them at a time contends in Redis with the other hosts. The lock is
// not fair between hosts: a released lock goes to whichever waiter takes
// it first.
func (s *Store) Acquire(ctx context.Context, name string, lease time.Duration) (store.Lock, error) {
	gate := s.gate(name)
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l, err := s.acquire(ctx, name, lease)
	if err != nil {
		<-gate
		return nil, err
	}
	l.gate = gate
	return l, nil
}

// gate returns this process's queue for a lock name.
func (s *Store) gate(name string) chan struct{} {
	s.gatesMu.Lock()
	defer s.gatesMu.Unlock()
	g := s.gates[name]
	if g == nil {
		g = make(chan struct{}, 1)
		s.gates[name] = g
	}
	return g
}

func (s *Store) acquire(ctx context.Context, name string, lease time.Duration) (*lock, error) {
	key := s.lockKey(name)
	token := newToken()
	w := s.hub.add(key)
	defer s.hub.remove(key, w)
	for {
		v, err := acquireScript.Run(ctx, s.client, []string{key, s.fenceKey(name)}, token, millis(lease), time.Now().UnixMicro()).Int64Slice()
		if err != nil {
			return nil, failure(ctx, err)
		}
		if len(v) != 2 {
			return nil, fmt.Errorf("redisstore: unexpected reply %v to Acquire", v)
		}
		if v[0] == 1 {
			fence := uint64(v[1])
			l := &lock{s: s, name: name, key: key, token: token, fence: fence, lease: lease}
			l.renewal = s.keepAlive(key, token, lease, "a lock",
				"carmy/redisstore: lost a lock while its tool was running: its lease ran out, and another execution may hold it now with a higher fence",
				"lock", name, "fence", fence)
			l.renewal.start()
			return l, nil
		}
		d := s.poll
		if v[1] >= 0 {
			d = min(d, time.Duration(v[1]+1)*time.Millisecond)
		}
		if err := wait(ctx, w.ch, d); err != nil {
			return nil, err
		}
	}
}

// lock is a held lock.
type lock struct {
	s     *Store
	name  string
	key   string
	token string
	fence uint64
	lease time.Duration
	gate  chan struct{}

	renewal *renewal

	gateOnce    sync.Once
	releaseOnce sync.Once
}

// Fence returns the lock's fencing token.
func (l *lock) Fence() uint64 { return l.fence }

// stopRenewal ends the renewal and waits for it.
func (l *lock) stopRenewal() { l.renewal.halt() }

// leaveGate lets the next caller of this process at the lock.
func (l *lock) leaveGate() { l.gateOnce.Do(func() { <-l.gate }) }

// Abandon stops renewing the lock without releasing it in Redis, as the
// death of its host would: the lock frees itself when its lease runs out.
// It is for tests (see the storetest package). Release afterwards still
// releases the lock if this holder still holds it.
func (l *lock) Abandon() {
	l.stopRenewal()
	l.leaveGate()
}

// Release gives the lock up, if this holder still holds it, and wakes the
// waiters on every host. It returns [ErrLockLost] when the lease had run
// out first. Releasing twice is harmless.
func (l *lock) Release(ctx context.Context) error {
	var err error
	l.releaseOnce.Do(func() {
		l.stopRenewal()
		defer l.leaveGate()
		var ok int64
		ok, err = unlockScript.Run(ctx, l.s.client, []string{l.key}, l.token, l.s.channel).Int64()
		switch {
		case err != nil:
			err = fmt.Errorf("redisstore: cannot release lock %s; it frees itself when its lease of %v runs out: %w", l.name, l.lease, err)
		case ok != 1:
			err = fmt.Errorf("%w: lock %s, fence %d", ErrLockLost, l.name, l.fence)
		}
	})
	return err
}
