package carmy_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// gauge records the most executions seen at once.
type gauge struct {
	inside, most atomic.Int32
}

func (g *gauge) enter() {
	n := g.inside.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) leave() { g.inside.Add(-1) }

func TestSerialization(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		parallel bool
	}{
		{"a tool that is not parallel-safe runs one at a time", false},
		{"a parallel-safe tool overlaps", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g gauge
			overlap := make(chan struct{}) // closed once two executions overlap
			var once sync.Once
			fn := func(ctx context.Context) error {
				g.enter()
				defer g.leave()
				if g.inside.Load() >= 2 {
					once.Do(func() { close(overlap) })
				}
				select { // a parallel tool waits for company; a serialized one cannot get any
				case <-overlap:
				case <-time.After(2 * time.Millisecond):
				}
				return nil
			}
			opts := []carmy.Option{carmy.Name("work"), carmy.Register(false)}
			if tt.parallel {
				opts = append(opts, carmy.ParallelSafe())
			}
			reg, err := carmy.New().Tool(carmy.Tool(fn, carmy.Write, opts...)).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "work"}); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			most := g.most.Load()
			if !tt.parallel && most != 1 {
				t.Fatalf("%d executions at once; want 1", most)
			}
			if tt.parallel && most < 2 {
				t.Fatalf("at most %d execution at once; want overlap", most)
			}
		})
	}
}

func TestSerializationWaitRespectsCancellation(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var runs atomic.Int32
	fn := func() error {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return nil
	}
	reg, err := carmy.New().Tool(carmy.Tool(fn, carmy.Write, carmy.Name("slow"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	first := make(chan error, 1)
	go func() {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "slow"})
		first <- err
	}()
	<-started
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		code carmy.Code
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, carmy.CodeTimeout},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx, cancel
		}, carmy.CodeCancelled},
	} {
		ctx, cancel := tc.ctx()
		_, err := reg.Execute(ctx, carmy.Call{Tool: "slow"})
		cancel()
		if carmy.CodeOf(err) != tc.code {
			t.Errorf("%s: err = %v; want %s while waiting for the turn", tc.name, err, tc.code)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d executions; the waiters must not have run", n)
	}
}

func TestDeadlines(t *testing.T) {
	t.Parallel()
	block := func(release chan struct{}) func() error {
		return func() error { <-release; return nil } // ignores its context
	}
	t.Run("builder default and tool override", func(t *testing.T) {
		a := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("a"), carmy.Register(false))
		b := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("b"), carmy.Timeout(time.Second), carmy.Register(false))
		reg, err := carmy.New().Timeout(5*time.Second).Tool(a, b).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		ma, _ := reg.Lookup("a")
		mb, _ := reg.Lookup("b")
		if ma.Timeout != 5*time.Second || mb.Timeout != time.Second {
			t.Fatalf("timeouts %v and %v; want 5s (builder) and 1s (tool)", ma.Timeout, mb.Timeout)
		}
		reg2, _ := carmy.New().Tool(a).Build()
		defer reg2.Close()
		if m, _ := reg2.Lookup("a"); m.Timeout != carmy.DefaultTimeout {
			t.Fatalf("default timeout %v; want %v", m.Timeout, carmy.DefaultTimeout)
		}
	})
	t.Run("the caller is answered at the deadline and the turn is kept until the code returns", func(t *testing.T) {
		release := make(chan struct{})
		reg, err := carmy.New().Tool(carmy.Tool(block(release), carmy.Write, carmy.Name("stuck"), carmy.Timeout(20*time.Millisecond), carmy.Register(false))).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Close()
		start := time.Now()
		_, err = reg.Execute(context.Background(), carmy.Call{Tool: "stuck"})
		if carmy.CodeOf(err) != carmy.CodeTimeout {
			t.Fatalf("err = %v; want timeout", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("answered after %v", d)
		}
		// The first execution still runs: the next call cannot get the turn.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "stuck"}); carmy.CodeOf(err) != carmy.CodeTimeout {
			t.Fatalf("second call: %v; want it to time out waiting for the turn", err)
		}
		close(release)
		deadline := time.Now().Add(5 * time.Second)
		for reg.Overruns() < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if reg.Overruns() != 1 {
			t.Fatalf("Overruns = %d; want 1", reg.Overruns())
		}
		// The code returned, so the turn is free again.
		if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "stuck"}); err != nil {
			t.Fatalf("third call: %v; want the turn released", err)
		}
	})
}
