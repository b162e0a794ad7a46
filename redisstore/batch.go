package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batchMax bounds the scripts of one pipeline.
const batchMax = 512

// batchIdle is how long the batcher waits for more work before it exits.
const batchIdle = time.Second

// batchGather is how long the batcher lets renewals gather before it sends
// them: renewals fall due every third of a lease, seconds apart, so a
// millisecond costs them nothing and lets those due together share a
// round trip however the scheduler orders their goroutines.
const batchGather = time.Millisecond

// batcher sends the renewals of a store's leases in pipelines: every
// renewal that falls due while one pipeline is on its way goes in the
// next, so that a host holding thousands of leases renews them in a few
// round trips rather than thousands, and a Redis that answers slowly costs
// each lease one wait, not one wait in a queue of thousands. It runs on
// the store's upkeep client, and its goroutine runs only while there is
// work, so it needs no closing: leases still held after the store closes
// keep being renewed.
type batcher struct {
	s       *Store
	mu      sync.Mutex
	queue   []*scriptCall
	running bool
	wake    chan struct{} // buffered: a call was queued
}

// scriptCall is one script to run in the next pipeline, and its answer.
type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	n      int64
	err    error
	done   chan struct{}
}

// run runs script in the next pipeline and returns its integer answer, or
// ctx's error when ctx is done first.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (int64, error) {
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
		return c.n, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// loop sends what is queued, one pipeline at a time, until nothing has
// been queued for batchIdle.
func (b *batcher) loop() {
	idle := time.NewTimer(batchIdle)
	defer idle.Stop()
	for {
		time.Sleep(batchGather)
		b.mu.Lock()
		n := min(len(b.queue), batchMax)
		calls := b.queue[:n:n]
		b.queue = b.queue[n:]
		if n == 0 {
			b.queue = nil
		}
		b.mu.Unlock()
		if n > 0 {
			b.send(calls)
			idle.Reset(batchIdle)
			continue
		}
		select {
		case <-idle.C:
			b.mu.Lock()
			if len(b.queue) == 0 {
				b.running = false
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
		case <-b.wake:
		}
	}
}

// send runs calls in one pipeline, within the latest of their deadlines.
// A script Redis does not know is loaded and run again.
func (b *batcher) send(calls []*scriptCall) {
	live := calls[:0:0]
	var deadline time.Time
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.finish(0, err)
			continue
		}
		d, ok := c.ctx.Deadline()
		if !ok {
			d = time.Now().Add(10 * time.Second)
		}
		if d.After(deadline) {
			deadline = d
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	client := b.s.upkeep.get()
	results := pipeline(ctx, client, live)
	// A Redis that restarted, or never ran these scripts, knows none of
	// them: load each once and send what it refused again, together.
	var again []*scriptCall
	loaded := map[*redis.Script]bool{}
	for i, c := range live {
		if err := results[i].Err(); err != nil && isNoScript(err) {
			if !loaded[c.script] {
				loaded[c.script] = c.script.Load(ctx, client).Err() == nil
			}
			again = append(again, c)
		}
	}
	retried := pipeline(ctx, client, again)
	for i, c := range live {
		cmd := results[i]
		if len(again) > 0 && again[0] == c {
			cmd, again, retried = retried[0], again[1:], retried[1:]
		}
		n, err := cmd.Int64()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		c.finish(n, err)
	}
}

// pipeline sends calls in one pipeline and returns their commands, each
// with its answer or its error.
func pipeline(ctx context.Context, client redis.UniversalClient, calls []*scriptCall) []*redis.Cmd {
	if len(calls) == 0 {
		return nil
	}
	p := client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
	}
	_, _ = p.Exec(ctx) // each command carries its own error
	return cmds
}

func (c *scriptCall) finish(n int64, err error) {
	c.n, c.err = n, err
	close(c.done)
}

func isNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}
