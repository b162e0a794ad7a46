package carmy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// precedenceInput is the input of the tool TestRefusalPrecedence calls: n
// must be at least 1; n = 99 holds the tool until the test lets it go.
type precedenceInput struct {
	N int `json:"n" validate:"min=1"`
}

// precedenceRig is one registry of TestRefusalPrecedence: its tool, the
// calls its middleware saw, the audit records of the call under test.
type precedenceRig struct {
	reg     *carmy.Registry
	seen    atomic.Int64 // calls the middleware saw
	gate    chan struct{}
	started chan struct{}
	held    sync.WaitGroup

	mu      sync.Mutex
	records []carmy.AuditRecord // of the call under test (session "under-test")
}

const precedenceTool = "ledger_write"

func newPrecedenceRig(t *testing.T, policies string, opts ...carmy.Option) *precedenceRig {
	t.Helper()
	rig := &precedenceRig{gate: make(chan struct{}), started: make(chan struct{}, 4)}
	fn := func(ctx context.Context, in precedenceInput) (int, error) {
		if in.N == 99 {
			rig.started <- struct{}{}
			<-rig.gate // ignores ctx: it keeps its turn until let go
		}
		return in.N, nil
	}
	opts = append([]carmy.Option{carmy.Name(precedenceTool), carmy.Register(false)}, opts...)
	b := carmy.New()
	if policies != "" {
		b.Policies(policies)
	}
	reg, err := b.
		Tool(carmy.Tool(fn, carmy.Write, opts...)).
		Use(func(next carmy.CallFunc) carmy.CallFunc {
			return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
				if req.Call.Session == "under-test" {
					rig.seen.Add(1)
				}
				return next(ctx, req)
			}
		}).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			if rec.Session == "under-test" {
				rig.mu.Lock()
				rig.records = append(rig.records, rec)
				rig.mu.Unlock()
			}
			return nil
		})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(rig.gate)
		rig.held.Wait()
		reg.Close()
	})
	rig.reg = reg
	return rig
}

// call makes a call that must succeed, before the call under test.
func (rig *precedenceRig) call(t *testing.T, c carmy.Call) {
	t.Helper()
	if c.Tool == "" {
		c.Tool = precedenceTool
	}
	if _, err := rig.reg.Execute(context.Background(), c); err != nil {
		t.Fatalf("setup call %+v: %v", c, err)
	}
}

// hold starts a call of n = 99 and returns once its tool runs: it holds
// the tool's turn, its request id and its MaxInFlight place until the
// test ends.
func (rig *precedenceRig) hold(t *testing.T, c carmy.Call) {
	t.Helper()
	c.Tool, c.Input = precedenceTool, []byte(`{"n":99}`)
	rig.held.Add(1)
	go func() {
		defer rig.held.Done()
		_, _ = rig.reg.Execute(context.Background(), c)
	}()
	select {
	case <-rig.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call never started")
	}
}

// TestRefusalPrecedence pins which refusal a call gets when several apply:
// the earliest stage of the pipeline answers, in the order Execute
// states. Each call under test passes the middleware once (an unknown
// tool, never) and leaves one audit record, of the decision that answered
// it.
func TestRefusalPrecedence(t *testing.T) {
	confirmAll := "confirm:" + precedenceTool
	for _, tc := range []struct {
		name     string
		opts     []carmy.Option
		policies string // Cedar policies of the registry, if any
		setup    func(*testing.T, *precedenceRig)
		call     carmy.Call // Tool defaults to the rig's tool
		// want is the code the call gets ("" for a success), reason its
		// details.reason, msg a part of its message.
		want     carmy.Code
		reason   string
		msg      string
		decision carmy.AuditDecision
	}{{
		name: "unknown tool over a malformed request id",
		call: carmy.Call{Tool: "ledger_wirte", RequestID: "not valid", Input: []byte(`{"n":1}`)},
		want: carmy.CodeUnknownTool, msg: precedenceTool,
	}, {
		name: "malformed request id over missing permission and bad input",
		opts: []carmy.Option{carmy.Requires("ledger:write")},
		call: carmy.Call{RequestID: "not valid", Input: []byte(`{"n":0,"extra":1}`)},
		want: carmy.CodeInvalidInput, msg: "request id", decision: carmy.AuditRefused,
	}, {
		name: "permission over bad input",
		opts: []carmy.Option{carmy.Requires("ledger:write")},
		call: carmy.Call{Input: []byte(`{"n":0,"extra":1}`)},
		want: carmy.CodePermissionDenied, decision: carmy.AuditRefused,
	}, {
		name: "permission over rate limit",
		opts: []carmy.Option{carmy.Requires("ledger:write"), carmy.RateLimit(1, time.Hour)},
		setup: func(t *testing.T, rig *precedenceRig) {
			rig.call(t, carmy.Call{Permissions: []string{"ledger:write"}, Input: []byte(`{"n":1}`)})
		},
		call: carmy.Call{Input: []byte(`{"n":1}`)},
		want: carmy.CodePermissionDenied, decision: carmy.AuditRefused,
	}, {
		name: "permission over confirmation",
		opts: []carmy.Option{carmy.Requires("ledger:write"), carmy.RequireConfirmation()},
		call: carmy.Call{Input: []byte(`{"n":1}`)},
		want: carmy.CodePermissionDenied, decision: carmy.AuditRefused,
	}, {
		name: "task only over bad input",
		opts: []carmy.Option{carmy.Tasks(carmy.TaskRequired)},
		call: carmy.Call{Input: []byte(`{"n":0}`)},
		want: carmy.CodeInvalidInput, reason: "task_required", decision: carmy.AuditRefused,
	}, {
		name:  "rate limit over bad input",
		opts:  []carmy.Option{carmy.RateLimit(1, time.Hour)},
		setup: func(t *testing.T, rig *precedenceRig) { rig.call(t, carmy.Call{Input: []byte(`{"n":1}`)}) },
		call:  carmy.Call{Input: []byte(`{"n":0,"extra":1}`)},
		want:  carmy.CodeRateLimited, decision: carmy.AuditRefused,
	}, {
		name:  "max in flight over bad input",
		opts:  []carmy.Option{carmy.MaxInFlight(1), carmy.ParallelSafe()},
		setup: func(t *testing.T, rig *precedenceRig) { rig.hold(t, carmy.Call{}) },
		call:  carmy.Call{Input: []byte(`{"n":0}`)},
		want:  carmy.CodeRateLimited, decision: carmy.AuditRefused,
	}, {
		name: "rate limit over confirmation",
		opts: []carmy.Option{carmy.RateLimit(1, time.Hour), carmy.RequireConfirmation()},
		setup: func(t *testing.T, rig *precedenceRig) {
			rig.call(t, carmy.Call{Permissions: []string{confirmAll}, Input: []byte(`{"n":1}`)})
		},
		call: carmy.Call{Input: []byte(`{"n":1}`)},
		want: carmy.CodeRateLimited, decision: carmy.AuditRefused,
	}, {
		name:     "permission over policy",
		opts:     []carmy.Option{carmy.Requires("ledger:write")},
		policies: `forbid(principal, action, resource);`,
		call:     carmy.Call{Input: []byte(`{"n":1}`)},
		want:     carmy.CodePermissionDenied, msg: "ledger:write", decision: carmy.AuditRefused,
	}, {
		name:     "bad input over policy",
		policies: `forbid(principal, action, resource);`,
		call:     carmy.Call{Input: []byte(`{"n":0}`)},
		want:     carmy.CodeInvalidInput, msg: "n", decision: carmy.AuditRefused,
	}, {
		name: "policy over confirmation",
		opts: []carmy.Option{carmy.RequireConfirmation()},
		policies: `permit(principal, action, resource);
@reason("n = 2 is not for agents")
forbid(principal, action == Action::"call", resource) when { context.input.n == 2 };`,
		call: carmy.Call{Input: []byte(`{"n":2}`)},
		want: carmy.CodePermissionDenied, msg: "n = 2 is not for agents", decision: carmy.AuditRefused,
	}, {
		name: "bad input over confirmation",
		opts: []carmy.Option{carmy.RequireConfirmation()},
		call: carmy.Call{Input: []byte(`{"n":0}`)},
		want: carmy.CodeInvalidInput, msg: "n", decision: carmy.AuditRefused,
	}, {
		name: "malformed request id over bad input and confirmation",
		opts: []carmy.Option{carmy.RequireConfirmation()},
		call: carmy.Call{Input: []byte(`{"n":0}`), RequestID: "bad id"},
		want: carmy.CodeInvalidInput, msg: "request id", decision: carmy.AuditRefused,
	}, {
		name: "confirmation over conflict of request id",
		opts: []carmy.Option{carmy.RequireConfirmation()},
		setup: func(t *testing.T, rig *precedenceRig) {
			rig.call(t, carmy.Call{RequestID: "r1", Permissions: []string{confirmAll}, Input: []byte(`{"n":1}`)})
		},
		call: carmy.Call{RequestID: "r1", Input: []byte(`{"n":2}`)},
		want: carmy.CodeConfirmationRequired, decision: carmy.AuditRefused,
	}, {
		name:  "confirmation over busy",
		opts:  []carmy.Option{carmy.RequireConfirmation(), carmy.Timeout(5 * time.Second)},
		setup: func(t *testing.T, rig *precedenceRig) { rig.hold(t, carmy.Call{Permissions: []string{confirmAll}}) },
		call:  carmy.Call{Input: []byte(`{"n":2}`)},
		want:  carmy.CodeConfirmationRequired, decision: carmy.AuditRefused,
	}, {
		name:  "conflict of request id over busy",
		opts:  []carmy.Option{carmy.Timeout(5 * time.Second)},
		setup: func(t *testing.T, rig *precedenceRig) { rig.hold(t, carmy.Call{RequestID: "r1"}) },
		call:  carmy.Call{RequestID: "r1", Input: []byte(`{"n":2}`)},
		want:  carmy.CodeConflict, decision: carmy.AuditRefused,
	}, {
		name: "replay over busy",
		opts: []carmy.Option{carmy.Timeout(5 * time.Second)},
		setup: func(t *testing.T, rig *precedenceRig) {
			rig.call(t, carmy.Call{RequestID: "r1", Input: []byte(`{"n":1}`)})
			rig.hold(t, carmy.Call{RequestID: "r2"})
		},
		call:     carmy.Call{RequestID: "r1", Input: []byte(`{"n":1}`)},
		decision: carmy.AuditReplayed,
	}, {
		name:  "busy once nothing earlier refuses",
		opts:  []carmy.Option{carmy.Timeout(200 * time.Millisecond)},
		setup: func(t *testing.T, rig *precedenceRig) { rig.hold(t, carmy.Call{}) },
		call:  carmy.Call{Input: []byte(`{"n":2}`)},
		want:  carmy.CodeUnavailable, reason: "busy", decision: carmy.AuditRefused,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newPrecedenceRig(t, tc.policies, tc.opts...)
			if tc.setup != nil {
				tc.setup(t, rig)
			}
			c := tc.call
			if c.Tool == "" {
				c.Tool = precedenceTool
			}
			c.Session = "under-test"
			res, err := rig.reg.Execute(context.Background(), c)
			if got := carmy.CodeOf(err); got != tc.want {
				t.Fatalf("code %q (%v); want %q", got, err, tc.want)
			}
			var e *carmy.Error
			if errors.As(err, &e) {
				if tc.reason != "" && e.Details["reason"] != tc.reason {
					t.Errorf("details.reason %v; want %q", e.Details["reason"], tc.reason)
				}
				if tc.msg != "" && !strings.Contains(e.Message, tc.msg) {
					t.Errorf("message %q does not name %q", e.Message, tc.msg)
				}
			}
			if tc.want == "" && !res.Replayed {
				t.Errorf("result %+v; want a replay", res)
			}
			wantSeen := int64(1)
			if tc.want == carmy.CodeUnknownTool {
				wantSeen = 0
			}
			if got := rig.seen.Load(); got != wantSeen {
				t.Errorf("the middleware saw the call %d times; want %d", got, wantSeen)
			}
			rig.mu.Lock()
			recs := rig.records
			rig.mu.Unlock()
			if wantSeen == 0 {
				if len(recs) != 0 {
					t.Errorf("audit records %+v of a call of an unknown tool; want none", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("audit records %+v; want one", recs)
			}
			if rec := recs[0]; rec.Decision != tc.decision || rec.Code != carmy.CodeOf(err) && !(err == nil && rec.Code == "ok") {
				t.Errorf("audit record %+v; want decision %q, code %q", rec, tc.decision, carmy.CodeOf(err))
			}
		})
	}
}
