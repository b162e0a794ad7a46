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

// scriptRun is a script with its keys and arguments.
type scriptRun struct {
	script *redis.Script
	keys   []string
	args   []any
}

// scriptCall is one script to run in the next pipeline, and its answer.
type scriptCall struct {
	scriptRun
	ctx  context.Context
	n    int64
	err  error
	done chan struct{}
}

// run runs script in the next pipeline and returns its integer answer, or
// ctx's error when ctx is done first.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (int64, error) {
	c := &scriptCall{scriptRun: scriptRun{script, keys, args}, ctx: ctx, done: make(chan struct{})}
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
	runs := make([]scriptRun, len(live))
	for i, c := range live {
		runs[i] = c.scriptRun
	}
	for i, cmd := range evalScripts(ctx, b.s.upkeep.get(), runs) {
		n, err := cmd.Int64()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		live[i].finish(n, err)
	}
}

// evalScripts runs scripts in one pipeline and returns their commands, in
// order, each with its answer or its error. A Redis that restarted, or
// never ran these scripts, knows none of them: it loads each once and
// sends what Redis refused again, together.
func evalScripts(ctx context.Context, client redis.UniversalClient, runs []scriptRun) []*redis.Cmd {
	if len(runs) == 0 {
		return nil
	}
	cmds := pipeline(ctx, client, runs)
	var again []int
	loaded := map[*redis.Script]bool{}
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && isNoScript(err) {
			if !loaded[runs[i].script] {
				loaded[runs[i].script] = true
				_ = runs[i].script.Load(ctx, client).Err() // a failure shows in the commands sent again
			}
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	retry := make([]scriptRun, len(again))
	for j, i := range again {
		retry[j] = runs[i]
	}
	for j, cmd := range pipeline(ctx, client, retry) {
		cmds[again[j]] = cmd
	}
	return cmds
}

// pipeline sends runs in one pipeline and returns their commands.
func pipeline(ctx context.Context, client redis.UniversalClient, runs []scriptRun) []*redis.Cmd {
	p := client.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		cmds[i] = r.script.EvalSha(ctx, p, r.keys, r.args...)
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
