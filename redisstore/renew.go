package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewScript extends KEYS[1] to ARGV[2] ms if token ARGV[1] holds it: a
// lock, or an idempotency reservation in flight (both keep their holder's
// token in the field t).
var renewScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// renewal keeps a holder's lease alive while the holder lives: it extends
// the lease every third of it until stopped, so that only a host that died
// (or lost Redis for longer than the lease) lets the key expire.
type renewal struct {
	s     *Store
	key   string
	token string
	lease time.Duration
	what  string // "a lock" or "an idempotency reservation", for the log
	lost  string // logged when another holder took the key
	attrs []any  // what names the key in the log

	// renew extends the lease once, answering 1 when it did, and 2 when
	// the reservation's own outcome is recorded; for a lock, renewScript.
	// A reservation's restores it after Redis lost its state.
	renew func(ctx context.Context) (int64, error)
	// Of a reservation: its digest, the id of the store's marker when it
	// was made, and the Redis time it was made at, which judge whether
	// Redis lost it with its state.
	digest string
	epoch  string
	began  int64
	fence  int64

	// born is when the lease was taken (before the script was sent), and
	// confirmed how long after born a renewal that succeeded was sent: the
	// lease holds at least until born + confirmed + lease. Both are read
	// on the monotonic clock, which runs on while the process is stopped.
	born      time.Time
	confirmed atomic.Int64

	ctx     context.Context // done when renewal must end, cancelling a renewal in flight
	stop    context.CancelFunc
	stopped chan struct{} // closed when renewal has ended
}

// keepAlive prepares the renewal of the lease of key, held by token, which
// start starts.
func (s *Store) keepAlive(key, token string, lease time.Duration, what, lost string, attrs ...any) *renewal {
	r := &renewal{s: s, key: key, token: token, lease: lease, what: what, lost: lost, attrs: attrs, born: time.Now(), stopped: make(chan struct{})}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.renew = func(ctx context.Context) (int64, error) {
		return s.batch.run(ctx, renewScript, []string{key}, token, millis(lease))
	}
	return r
}

// start starts renewing.
func (r *renewal) start() { go r.run() }

// run extends the lease every third of it until stopped. A renewal that
// fails for want of Redis is tried again sooner, for as long as the lease
// may still hold; one that finds the key taken by another holder ends
// renewal and reports it. Stopping cancels a renewal in flight, so that a
// Redis that hangs does not hold up the holder's release: a renewal that
// reaches Redis after the release finds the key no longer its token's, and
// changes nothing.
func (r *renewal) run() {
	defer close(r.stopped)
	every := max(r.lease/3, time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	renewed := time.Now() // the lease holds until renewed + lease
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.s.lost.wait(): // Redis lost its state: restore the reservation now
		}
		start := time.Now()
		// Give up on this try when the lease would end anyway; once it may
		// have ended, keep asking: Redis may be back, and the key still ours.
		deadline := renewed.Add(r.lease)
		if !deadline.After(start) {
			deadline = start.Add(every)
		}
		ctx, cancel := context.WithDeadline(r.ctx, deadline)
		ok, err := r.renew(ctx)
		cancel()
		switch {
		case r.ctx.Err() != nil: // stopped meanwhile: the key may be gone already
			return
		case err != nil:
			r.s.logger.Warn("carmy/redisstore: cannot renew "+r.what+"; trying again", append(r.attrs, "error", err)...)
			t.Reset(max(every/4, time.Millisecond))
		case ok == 2: // its own outcome is recorded: nothing was lost
			return
		case ok != 1:
			r.s.logger.Error(r.lost, append(r.attrs, "lease", r.lease)...)
			return
		default:
			renewed = start
			r.confirm(start)
			t.Reset(every)
		}
	}
}

// confirm notes that a renewal sent at start succeeded.
func (r *renewal) confirm(start time.Time) {
	d := int64(start.Sub(r.born))
	for {
		old := r.confirmed.Load()
		if d <= old || r.confirmed.CompareAndSwap(old, d) {
			return
		}
	}
}

// fresh reports whether the lease was confirmed less than a third of it
// ago, so that it cannot have run out, whatever paused this process.
func (r *renewal) fresh() bool {
	return time.Since(r.born)-time.Duration(r.confirmed.Load()) < r.lease/3
}

// halt ends the renewal and waits for it. Halting twice is harmless.
func (r *renewal) halt() {
	r.stop()
	<-r.stopped
}

// signal wakes every goroutine waiting on it at once, each time it fires.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed when the signal next fires.
func (g *signal) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	return g.ch
}

// fire wakes those waiting.
func (g *signal) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}
