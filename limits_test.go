package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// limitClock is a clock that moves only when told, for the in-process
// limiter of a registry built with carmy.SetLimitClock.
type limitClock struct {
	mu  sync.Mutex
	now time.Time
}

func newLimitClock() *limitClock {
	return &limitClock{now: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
}

func (c *limitClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *limitClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type OrderIn struct {
	SKU string `json:"sku"`
}

type OrderOut struct {
	ID int64 `json:"id"`
}

// limitedOrders builds a registry whose create_order has opts, next to an
// unlimited list_orders, on clock.
func limitedOrders(t *testing.T, clock *limitClock, b *carmy.Builder, opts ...carmy.Option) (*carmy.Registry, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	create := func(in OrderIn) (OrderOut, error) { return OrderOut{ID: runs.Add(1)}, nil }
	list := func() ([]string, error) { return nil, nil }
	if b == nil {
		b = carmy.New()
	}
	b.Logger(quietLogger())
	if clock != nil {
		carmy.SetLimitClock(b, clock.Now)
	}
	reg, err := b.Tool(
		carmy.Tool(create, carmy.Write, append([]carmy.Option{carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Register(false)}, opts...)...),
		carmy.Tool(list, carmy.Read, carmy.Name("list_orders"), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg, &runs
}

// callAs calls tool as principal with input, and returns the error's code
// ("" on success) and the *carmy.Error, if any.
func callAs(t *testing.T, reg *carmy.Registry, principal, tool, input string) (carmy.Code, *carmy.Error) {
	t.Helper()
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: tool, Principal: principal, Input: json.RawMessage(input)})
	var e *carmy.Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("Execute = %v; want a *carmy.Error", err)
	}
	return carmy.CodeOf(err), e
}

const anOrder = `{"sku":"A-1"}`

func TestRateLimitPerPrincipalAndTool(t *testing.T) {
	t.Parallel()
	clock := newLimitClock()
	reg, runs := limitedOrders(t, clock, nil, carmy.RateLimit(2, time.Minute))

	for i := range 2 {
		if code, _ := callAs(t, reg, "alice", "create_order", anOrder); code != "" {
			t.Fatalf("alice's call %d = %s; want it to run, within the burst of 2", i+1, code)
		}
	}
	code, e := callAs(t, reg, "alice", "create_order", anOrder)
	if code != carmy.CodeRateLimited || !e.Retryable || e.Details["retry_after_ms"] != int64(30_000) {
		t.Fatalf("alice's third call = %v; want rate_limited, retryable, retry_after_ms 30000", e)
	}
	if want := "call create_order again in 30 s"; !strings.Contains(e.Message, want) || !strings.Contains(e.Message, "2 times per minute") {
		t.Errorf("message %q; want it to say the limit and %q", e.Message, want)
	}
	if runs.Load() != 2 {
		t.Fatalf("create_order ran %d times; want 2", runs.Load())
	}
	if code, _ := callAs(t, reg, "bob", "create_order", anOrder); code != "" {
		t.Errorf("bob's first call = %s; alice's calls must not count against bob", code)
	}
	for range 10 {
		if code, _ := callAs(t, reg, "alice", "list_orders", ""); code != "" {
			t.Fatalf("alice's list_orders = %s; a tool without a limit is not limited", code)
		}
	}

	clock.Advance(20 * time.Second)
	if code, e := callAs(t, reg, "alice", "create_order", anOrder); code != carmy.CodeRateLimited || e.Details["retry_after_ms"] != int64(10_000) {
		t.Fatalf("20 s later = %v; want rate_limited, 10 s to go", e)
	}
	clock.Advance(10 * time.Second)
	if code, _ := callAs(t, reg, "alice", "create_order", anOrder); code != "" {
		t.Fatalf("30 s later = %s; want one call refilled", code)
	}
	if code, _ := callAs(t, reg, "alice", "create_order", anOrder); code != carmy.CodeRateLimited {
		t.Fatalf("a second call 30 s later = %s; want rate_limited: only one refilled", code)
	}
	clock.Advance(time.Hour)
	for i := range 3 {
		code, _ := callAs(t, reg, "alice", "create_order", anOrder)
		if want := carmy.Code(""); i == 2 {
			if code != carmy.CodeRateLimited {
				t.Fatalf("call %d an hour later = %s; the burst is never more than 2", i+1, code)
			}
		} else if code != want {
			t.Fatalf("call %d an hour later = %s; want the whole burst back", i+1, code)
		}
	}
}

// Builder.RateLimit limits every tool that has no limit of its own; a
// tool's RateLimit replaces it.
func TestBuilderRateLimit(t *testing.T) {
	t.Parallel()
	clock := newLimitClock()
	reg, _ := limitedOrders(t, clock, carmy.New().RateLimit(1, time.Hour), carmy.RateLimit(3, time.Hour))
	for i := range 3 {
		if code, _ := callAs(t, reg, "alice", "create_order", anOrder); code != "" {
			t.Fatalf("create_order call %d = %s; its own limit is 3 an hour", i+1, code)
		}
	}
	if code, _ := callAs(t, reg, "alice", "list_orders", ""); code != "" {
		t.Fatalf("list_orders = %s; want the builder's 1 an hour", code)
	}
	code, e := callAs(t, reg, "alice", "list_orders", "")
	if code != carmy.CodeRateLimited || !strings.Contains(e.Message, "once per hour; call list_orders again in 3600 s") {
		t.Fatalf("second list_orders = %v; want rate_limited by the builder's limit", e)
	}
}

func TestLimitBuildErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opt  carmy.Option
		want string
	}{
		{"no calls", carmy.RateLimit(0, time.Minute), "RateLimit(0, 1m0s): the number of calls must be positive"},
		{"negative calls", carmy.RateLimit(-1, time.Minute), "the number of calls must be positive"},
		{"zero period", carmy.RateLimit(10, 0), "RateLimit(10, 0s): the period must be positive"},
		{"negative period", carmy.RateLimit(10, -time.Second), "the period must be positive"},
		{"too fast", carmy.RateLimit(10_000, time.Millisecond), "more than one call per microsecond"},
		{"no slots", carmy.MaxInFlight(0), "MaxInFlight(0) must be positive"},
		{"negative slots", carmy.MaxInFlight(-2), "MaxInFlight(-2) must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("bad_tool"), tt.opt, carmy.Register(false))
			other := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("other_tool"), carmy.Timeout(-1), carmy.Register(false))
			_, err := carmy.New().Tool(bad, other).Build()
			var be *carmy.BuildError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), `tool "bad_tool"`) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v; want a BuildError of bad_tool saying %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), `tool "other_tool"`) {
				t.Errorf("Build = %v; want the other tool's problem too, joined", err)
			}
		})
	}
	t.Run("builder", func(t *testing.T) {
		_, err := carmy.New().RateLimit(0, time.Minute).Build()
		if err == nil || !strings.Contains(err.Error(), "Builder.RateLimit(0, 1m0s): the number of calls must be positive") {
			t.Fatalf("Build = %v; want Builder.RateLimit's problem", err)
		}
	})
}

// decodeCount is an input field that counts its decodings.
type decodeCount struct{}

var decodings atomic.Int64

func (*decodeCount) UnmarshalText([]byte) error { decodings.Add(1); return nil }

func (decodeCount) MarshalText() ([]byte, error) { return nil, nil }

type CountedIn struct {
	Note decodeCount `json:"note"`
}

// The limit is checked after the permission check and before the input is
// read: a caller that may not call the tool never learns its limit, and
// one past it gets rate_limited whatever its input, which is never read.
func TestRateLimitOrder(t *testing.T) {
	clock := newLimitClock()
	b := carmy.New().Logger(quietLogger()).Authorize(func(c carmy.Context, _ carmy.ToolMetadata) error {
		if c.Principal == "mallory" {
			return errors.New("mallory may not")
		}
		return nil
	})
	carmy.SetLimitClock(b, clock.Now)
	reg, err := b.Tool(
		carmy.Tool(func(in CountedIn) error { return nil }, carmy.Write, carmy.Name("note"),
			carmy.Requires("notes:write"), carmy.RateLimit(1, time.Hour), carmy.ParallelSafe(), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	call := func(principal, input string, perms ...string) carmy.Code {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "note", Principal: principal, Permissions: perms, Input: json.RawMessage(input)})
		return carmy.CodeOf(err)
	}

	for range 3 {
		if code := call("alice", `{"note":"x"}`); code != carmy.CodePermissionDenied {
			t.Fatalf("a call without the permission = %s; want permission_denied, never rate_limited", code)
		}
		if code := call("mallory", `{"note":"x"}`, "notes:write"); code != carmy.CodePermissionDenied {
			t.Fatalf("a call the policy refuses = %s; want permission_denied, never rate_limited", code)
		}
	}
	if code := call("alice", `{"note":"x"}`, "notes:write"); code != "" {
		t.Fatalf("alice's first permitted call = %s; refused calls must not count", code)
	}
	before := decodings.Load()
	for _, input := range []string{`{"note":"y"}`, `{"note":`, `{"unknown":1}`, `[]`} {
		if code := call("alice", input, "notes:write"); code != carmy.CodeRateLimited {
			t.Errorf("call with input %s past the limit = %s; want rate_limited, not a verdict on the input", input, code)
		}
	}
	if n := decodings.Load() - before; n != 0 {
		t.Errorf("the input was decoded %d times past the limit; want never", n)
	}
	if code := call("bob", `{"note":`, "notes:write"); code != carmy.CodeInvalidInput {
		t.Errorf("bob's malformed call within his limit = %s; want invalid_input", code)
	}
}

// MaxInFlight bounds one principal's calls running at once; a call holds
// its place until its tool's code returns, and a call refused before it
// runs gives its place back.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var running atomic.Int64
	work := func(ctx context.Context, in OrderIn) (OrderOut, error) {
		running.Add(1)
		defer running.Add(-1)
		if in.SKU == "block" {
			<-release // ignores ctx, as a careless tool does
		}
		return OrderOut{}, nil
	}
	reg, err := carmy.New().Logger(quietLogger()).Tool(carmy.Tool(work, carmy.Write, carmy.Name("work"), carmy.ParallelSafe(),
		carmy.MaxInFlight(1), carmy.Timeout(50*time.Millisecond), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	for range 3 {
		if code, _ := callAs(t, reg, "alice", "work", `{"sku":1}`); code != carmy.CodeInvalidInput {
			t.Fatalf("a bad input = %s; want invalid_input", code)
		}
	}
	if code, _ := callAs(t, reg, "alice", "work", anOrder); code != "" {
		t.Fatalf("alice's call after refused ones = %s; refused calls must give their place back", code)
	}

	// alice's blocking call is answered at its deadline, and its code runs on.
	if code, _ := callAs(t, reg, "alice", "work", `{"sku":"block"}`); code != carmy.CodeTimeout {
		t.Fatalf("the blocking call = %s; want timeout", code)
	}
	code, e := callAs(t, reg, "alice", "work", anOrder)
	if code != carmy.CodeRateLimited || !e.Retryable || e.Details["retry_after_ms"] != int64(1000) ||
		!strings.Contains(e.Message, "already has a call of it running") || !strings.Contains(e.Message, "call work again in 1 s") {
		t.Fatalf("alice's call while her first runs = %v; want rate_limited, in words a model acts on", e)
	}
	if code, _ := callAs(t, reg, "bob", "work", anOrder); code != "" {
		t.Fatalf("bob's call = %s; alice's call must not hold bob's place", code)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := callAs(t, reg, "alice", "work", anOrder)
		if code == "" {
			break
		}
		if code != carmy.CodeRateLimited || time.Now().After(deadline) {
			t.Fatalf("alice's call once her first returned = %s; want it to run", code)
		}
		time.Sleep(time.Millisecond)
	}
}

// Each refusal is one audit record and passes the middleware once; its
// record holds no digest, as the input is not read.
func TestRateLimitAuditAndMiddleware(t *testing.T) {
	t.Parallel()
	sink := &auditLog{}
	var seen []string
	var mu sync.Mutex
	mw := func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			res, err := next(ctx, req)
			mu.Lock()
			seen = append(seen, req.Tool.Name+" "+string(carmy.CodeOf(err)))
			mu.Unlock()
			return res, err
		}
	}
	reg, _ := limitedOrders(t, newLimitClock(), carmy.New().Audit(sink).Use(mw), carmy.RateLimit(1, time.Minute))
	callAs(t, reg, "alice", "create_order", anOrder)
	callAs(t, reg, "alice", "create_order", anOrder)
	recs := sink.take()
	if got := decisions(recs); got != "executed create_order ok, refused create_order rate_limited" {
		t.Fatalf("audit = %s; want the execution, then the refusal", got)
	}
	if r := recs[1]; r.Principal != "alice" || r.Digest != "" {
		t.Errorf("refusal record %+v; want alice's, with no digest of an unread input", r)
	}
	if got := strings.Join(seen, ", "); got != "create_order , create_order rate_limited" {
		t.Errorf("middleware saw %s; want each call once", got)
	}
}

// Over MCP a refusal is a tool error whose text tells the model when to
// call again; the list is not limited.
func TestRateLimitMCP(t *testing.T) {
	t.Parallel()
	reg, _ := limitedOrders(t, newLimitClock(), carmy.New().StdioIdentity(carmy.Identity{Principal: "local"}), carmy.RateLimit(1, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	session := singleClient(t, reg, "memory", "", nil)

	args := map[string]any{"sku": "A-1"}
	if res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "create_order", Arguments: args}); err != nil || res.IsError {
		t.Fatalf("first call = %+v, %v", res, err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "create_order", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	e := errorObject(t, res)
	details, _ := e["details"].(map[string]any)
	if e["code"] != "rate_limited" || e["retryable"] != true || details["retry_after_ms"] != float64(60_000) {
		t.Fatalf("second call = %v; want rate_limited, retryable, retry_after_ms", e)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "call create_order again in 60 s") {
		t.Errorf("tool error text %s; want the model told when to call again", text)
	}
	for range 3 {
		if list, err := session.ListTools(ctx, nil); err != nil || len(list.Tools) != 2 {
			t.Fatalf("tools/list = %v, %v; lists are not limited", list, err)
		}
	}
}

// HTTP answers a call past its limit with 429 and Retry-After in whole
// seconds, rounded up.
func TestRateLimitHTTP(t *testing.T) {
	t.Parallel()
	reg, _ := limitedOrders(t, newLimitClock(), nil, carmy.RateLimit(3, 10*time.Second))
	srv := serve(t, reg)
	for range 3 {
		if r := do(t, "POST", srv.URL+"/tools/create_order", anOrder); r.status != 200 {
			t.Fatalf("call within the burst = %d %v", r.status, r.body)
		}
	}
	r := do(t, "POST", srv.URL+"/tools/create_order", anOrder)
	details, _ := r.body["error"].(map[string]any)["details"].(map[string]any)
	if r.status != 429 || errCode(r) != "rate_limited" || r.header.Get("Retry-After") != "4" || details["retry_after_ms"] != float64(3334) {
		t.Fatalf("call past the limit = %d, Retry-After %q, %v; want 429, Retry-After 4 (3.334 s rounded up)", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := do(t, "GET", srv.URL+"/tools", ""); r.status != 200 {
		t.Errorf("GET /tools = %d; lists are not limited", r.status)
	}
	if got := carmy.StatusOf(carmy.Errorf(carmy.CodeRateLimited, "slow down")); got != 429 {
		t.Errorf("StatusOf(rate_limited) = %d; want 429", got)
	}
}

// limitStore is an idempotency store whose limits are those of another
// store: shared by several registries, as a store shared by hosts is, or
// failing.
type limitStore struct {
	store.IdempotencyStore
	rates store.RateLimiter
	slots store.ConcurrencyLimiter
}

func (s *limitStore) Allow(ctx context.Context, key store.LimitKey, rate store.Rate) (store.RateDecision, error) {
	return s.rates.Allow(ctx, key, rate)
}

func (s *limitStore) AcquireSlot(ctx context.Context, key store.LimitKey, n int, lease time.Duration) (store.Slot, error) {
	return s.slots.AcquireSlot(ctx, key, n, lease)
}

type downLimiter struct{}

func (downLimiter) Allow(context.Context, store.LimitKey, store.Rate) (store.RateDecision, error) {
	return store.RateDecision{}, errors.New("connection refused")
}

func (downLimiter) AcquireSlot(context.Context, store.LimitKey, int, time.Duration) (store.Slot, error) {
	return nil, errors.New("connection refused")
}

// A store that keeps limits keeps them for every registry that shares it;
// one that cannot answer makes a limited call unavailable, never
// unlimited.
func TestLimitsInTheStore(t *testing.T) {
	t.Parallel()
	t.Run("shared", func(t *testing.T) {
		shared := store.NewMemoryLimiter(nil)
		hosts := make([]*carmy.Registry, 2)
		for i := range hosts {
			mem := store.NewMemoryStore(0, 0)
			t.Cleanup(func() { _ = mem.(interface{ Close() error }).Close() })
			hosts[i], _ = limitedOrders(t, nil, carmy.New().Store(&limitStore{mem, shared, shared}), carmy.RateLimit(3, time.Hour))
		}
		for i := range 3 {
			if code, _ := callAs(t, hosts[i%2], "alice", "create_order", anOrder); code != "" {
				t.Fatalf("call %d = %s", i+1, code)
			}
		}
		for _, h := range hosts {
			if code, _ := callAs(t, h, "alice", "create_order", anOrder); code != carmy.CodeRateLimited {
				t.Fatalf("a fourth call = %s; want rate_limited on every host", code)
			}
		}
	})
	t.Run("down", func(t *testing.T) {
		mem := store.NewMemoryStore(0, 0)
		t.Cleanup(func() { _ = mem.(interface{ Close() error }).Close() })
		reg, runs := limitedOrders(t, nil, carmy.New().Store(&limitStore{mem, downLimiter{}, downLimiter{}}).Logger(quietLogger()), carmy.RateLimit(3, time.Hour))
		code, e := callAs(t, reg, "alice", "create_order", anOrder)
		if code != carmy.CodeUnavailable || !e.Retryable || runs.Load() != 0 {
			t.Fatalf("a limited call with the store down = %v (ran %d); want unavailable, retryable, not run", e, runs.Load())
		}
		if code, _ := callAs(t, reg, "alice", "list_orders", ""); code != "" {
			t.Fatalf("an unlimited call with the limiter down = %s; want it to run", code)
		}
	})
}

// carmy.toml's [rate_limits]: a default for every tool, and entries for
// named tools, which replace even a tool's own limit; a bad value or an
// entry naming no tool is a Build error naming the key.
func TestRateLimitConfig(t *testing.T) {
	t.Setenv("CARMY_CONFIG", writeConfig(t, "[rate_limits]\ndefault = \"1/hour\"\ncreate_order = \"2/min\"\n"))
	reg, _ := limitedOrders(t, newLimitClock(), carmy.App(), carmy.RateLimit(50, time.Minute))
	for i, want := range []carmy.Code{"", "", carmy.CodeRateLimited} {
		if code, _ := callAs(t, reg, "alice", "create_order", anOrder); code != want {
			t.Fatalf("create_order call %d = %q; want %q, by its entry of 2 a minute", i+1, code, want)
		}
	}
	for i, want := range []carmy.Code{"", carmy.CodeRateLimited} {
		if code, _ := callAs(t, reg, "alice", "list_orders", ""); code != want {
			t.Fatalf("list_orders call %d = %q; want %q, by the default of 1 an hour", i+1, code, want)
		}
	}

	t.Run("unlimited", func(t *testing.T) {
		t.Setenv("CARMY_CONFIG", writeConfig(t, "[rate_limits]\ndefault = \"1/hour\"\nlist_orders = \"unlimited\"\n"))
		reg, _ := limitedOrders(t, newLimitClock(), carmy.App())
		for range 5 {
			if code, _ := callAs(t, reg, "alice", "list_orders", ""); code != "" {
				t.Fatalf("list_orders = %s; its entry says unlimited", code)
			}
		}
	})

	for _, tc := range []struct{ file, want string }{
		{"[rate_limits]\n\ncreate_order = \"0/min\"\n", `:3: rate_limits.create_order: "0/min": the number of calls must be a positive integer`},
		{"[rate_limits]\ndefault = \"10000/1ms\"\n", `:2: rate_limits.default: that is more than one call per microsecond`},
		{"[rate_limits]\ncreate_ordr = \"10/min\"\n", `:2: rate_limits.create_ordr: there is no tool named "create_ordr"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			path := writeConfig(t, tc.file)
			t.Setenv("CARMY_CONFIG", path)
			_, err := carmy.App().Tool(carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("create_order"), carmy.Register(false))).Build()
			if err == nil || !strings.Contains(err.Error(), path+tc.want) {
				t.Fatalf("Build = %v; want %q", err, path+tc.want)
			}
		})
	}
}

// BenchmarkLimits measures what a limit costs a call of the in-process
// limiter, next to the same call without one, in one run:
//
//	unlimited  no limit: the call path of every tool without one
//	rate       a RateLimit that never refuses: one GCRA decision
//	in-flight  a MaxInFlight that never refuses: a slot taken and given back
//	refused    a call past its rate: refused before its input is read
//
//	go test -run '^$' -bench BenchmarkLimits -benchmem -count 10 .
func BenchmarkLimits(b *testing.B) {
	create := func(in OrderIn) (OrderOut, error) { return OrderOut{ID: 1}, nil }
	tool := func(name string, opts ...carmy.Option) *carmy.ToolDef {
		return carmy.Tool(create, carmy.Write, append([]carmy.Option{carmy.Name(name), carmy.ParallelSafe(), carmy.Register(false)}, opts...)...)
	}
	reg, err := carmy.New().Logger(quietLogger()).Tool(
		tool("unlimited"),
		tool("rate", carmy.RateLimit(1_000_000_000, time.Hour)),
		tool("in-flight", carmy.MaxInFlight(1_000_000)),
		tool("refused", carmy.RateLimit(1, time.Hour)),
	).Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	for _, name := range []string{"unlimited", "rate", "in-flight", "refused"} {
		b.Run(name, func(b *testing.B) {
			c := carmy.Call{Tool: name, Principal: "alice", Input: json.RawMessage(anOrder)}
			want := carmy.Code("")
			if name == "refused" {
				_, _ = reg.Execute(ctx, c)
				want = carmy.CodeRateLimited
			}
			for b.Loop() {
				if _, err := reg.Execute(ctx, c); carmy.CodeOf(err) != want {
					b.Fatal(err)
				}
			}
		})
	}
}

// Which refusal a call past its limit gets when other refusals apply too,
// and a replay of a recorded outcome is a call that counts.
func TestRateLimitAgainstOtherRefusals(t *testing.T) {
	t.Parallel()
	clock := newLimitClock()
	b := carmy.New().Logger(quietLogger())
	carmy.SetLimitClock(b, clock.Now)
	reg, err := b.Tool(
		carmy.Tool(func(in OrderIn) (OrderOut, error) { return OrderOut{ID: 7}, nil }, carmy.Destructive, carmy.Name("cancel_order"),
			carmy.RequireConfirmation(), carmy.Requires("orders"), carmy.RateLimit(2, time.Hour), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	granted := []string{"orders", "confirm:cancel_order"}
	run := func(c carmy.Call) (carmy.Result, carmy.Code) {
		c.Tool, c.Principal = "cancel_order", "alice"
		res, err := reg.Execute(context.Background(), c)
		return res, carmy.CodeOf(err)
	}
	first, code := run(carmy.Call{Input: json.RawMessage(anOrder), RequestID: "r-1", Permissions: granted})
	if code != "" {
		t.Fatalf("first call = %s", code)
	}
	if res, code := run(carmy.Call{Input: json.RawMessage(anOrder), RequestID: "r-1", Permissions: granted}); code != "" || !res.Replayed || res.ExecutionID != first.ExecutionID {
		t.Fatalf("the retry = %+v, %s; want the replay", res, code)
	}
	for _, tt := range []struct {
		name string
		call carmy.Call
		want carmy.Code
	}{
		{"a malformed request id first", carmy.Call{Input: json.RawMessage(anOrder), RequestID: "bad id", Permissions: granted}, carmy.CodeInvalidInput},
		{"then the permission", carmy.Call{Input: json.RawMessage(anOrder)}, carmy.CodePermissionDenied},
		{"then the limit: a replay is a call", carmy.Call{Input: json.RawMessage(anOrder), RequestID: "r-1", Permissions: granted}, carmy.CodeRateLimited},
		{"the limit before the input", carmy.Call{Input: json.RawMessage(`{"sku":1}`), Permissions: granted}, carmy.CodeRateLimited},
		{"the limit before confirmation", carmy.Call{Input: json.RawMessage(anOrder), Permissions: []string{"orders"}}, carmy.CodeRateLimited},
		{"the limit before a conflicting request id", carmy.Call{Input: json.RawMessage(`{"sku":"B-2"}`), RequestID: "r-1", Permissions: granted}, carmy.CodeRateLimited},
	} {
		if _, code := run(tt.call); code != tt.want {
			t.Errorf("%s: %s; want %s", tt.name, code, tt.want)
		}
	}
}
