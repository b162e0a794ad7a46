package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// pausable is one host's store with a short lease, which a test stops as
// SIGSTOP would: its renewals stop, and so does the call that pauses.
type pausable struct {
	*Store
	lease time.Duration
	// pauseInBegin, when set, is closed by the test to resume a host that
	// Begin paused right after reserving.
	pauseInBegin chan struct{}
	paused       chan struct{} // receives when the host pauses
}

func (p *pausable) Begin(ctx context.Context, key store.Key, digest string, _ time.Duration) (store.Reservation, error) {
	r, err := p.Store.Begin(ctx, key, digest, p.lease)
	if err == nil && r.Owned && p.pauseInBegin != nil {
		p.pause(p.pauseInBegin)
	}
	return r, err
}

// pause stops the host's renewals and waits for resume.
func (p *pausable) pause(resume chan struct{}) {
	p.renewalsMu.Lock()
	held := make([]*renewal, 0, len(p.renewals))
	for _, r := range p.renewals {
		held = append(held, r)
	}
	p.renewalsMu.Unlock()
	for _, r := range held {
		r.halt()
	}
	p.paused <- struct{}{}
	<-resume
}

// ledger is a downstream that remembers the highest fence it saw per
// request id, and refuses a write with a lower one.
type ledger struct {
	mu      sync.Mutex
	highest map[string]uint64
	applied map[string]int
	refused int
}

func (l *ledger) write(id string, fence uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fence == 0 || fence < l.highest[id] {
		l.refused++
		return fmt.Errorf("stale fence %d for %s: %d was seen", fence, id, l.highest[id])
	}
	l.highest[id] = fence
	l.applied[id]++
	return nil
}

// A host stopped past its lease while another host took its request id
// over applies no effect twice: stopped before its tool started, it
// refuses the call when it resumes; stopped while its tool ran, its stale
// write carries a lower fence, which the downstream refuses. Stopped while
// nobody took the request id, its outcome is recorded when it resumes, and
// a retry replays it.
func TestHostPausedPastItsLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	for _, tc := range []struct {
		name        string
		inBegin     bool // paused before the tool started, or while it ran
		takenOver   bool // another host runs the request id meanwhile
		firstFails  carmy.Code
		refusals    int
		replayFirst bool // the retry replays the paused host's outcome
	}{
		{"before the tool starts", true, true, carmy.CodeUnavailable, 0, false},
		{"while the tool runs", false, true, carmy.CodeConflict, 1, false},
		{"while the tool runs, nobody takes the key", false, false, "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newClient(t)
			prefix := testPrefix(t, base)
			l := &ledger{highest: map[string]uint64{}, applied: map[string]int{}}
			resume := make(chan struct{})
			var hosts [2]*pausable
			var regs [2]*carmy.Registry
			for i := range hosts {
				c := redis.NewClient(base.Options())
				t.Cleanup(func() { _ = c.Close() })
				p := &pausable{Store: newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond)), lease: lease, paused: make(chan struct{}, 1)}
				if i == 0 && tc.inBegin {
					p.pauseInBegin = resume
				}
				pay := carmy.Tool(func(ctx carmy.Context, in countIn) (string, error) {
					if i == 0 && !tc.inBegin {
						p.pause(resume)
					}
					if err := l.write(ctx.RequestID, ctx.Fence); err != nil {
						return "", carmy.Errorf(carmy.CodeConflict, "%v", err)
					}
					return ctx.ExecutionID, nil
				}, carmy.Write, carmy.Name("pay"), carmy.ParallelSafe(), carmy.Register(false))
				reg := build(t, carmy.New().Tool(pay).Store(p).Logger(quiet))
				hosts[i], regs[i] = p, reg
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			call := carmy.Call{Tool: "pay", Input: []byte(`{}`), RequestID: "r1", Principal: "agent"}
			type answer struct {
				res carmy.Result
				err error
			}
			first := make(chan answer, 1)
			go func() {
				res, err := regs[0].Execute(ctx, call)
				first <- answer{res, err}
			}()
			<-hosts[0].paused
			key := hosts[0].idemKey(store.Key{Principal: "agent", Tool: "pay", RequestID: "r1"})
			for base.Exists(ctx, key).Val() == 1 { // the lease runs out
				time.Sleep(10 * time.Millisecond)
			}
			var other carmy.Result
			if tc.takenOver {
				var err error
				if other, err = regs[1].Execute(ctx, call); err != nil || other.Replayed {
					t.Fatalf("the other host's call = %+v, %v; want it to run", other, err)
				}
			}
			close(resume)
			a := <-first
			if got := carmy.CodeOf(a.err); got != tc.firstFails {
				t.Fatalf("the paused host answered %+v, %v; want code %q", a.res, a.err, tc.firstFails)
			}
			retry, err := regs[1].Execute(ctx, call)
			if err != nil || !retry.Replayed {
				t.Fatalf("retry = %+v, %v; want a replay", retry, err)
			}
			want := other.ExecutionID
			if tc.replayFirst {
				want = a.res.ExecutionID
			}
			if retry.ExecutionID != want {
				t.Fatalf("retry replayed execution %s; want %s", retry.ExecutionID, want)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.applied["r1"] != 1 || l.refused != tc.refusals {
				t.Fatalf("the downstream applied %d writes and refused %d; want 1 and %d", l.applied["r1"], l.refused, tc.refusals)
			}
		})
	}
}
