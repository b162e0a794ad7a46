package carmy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/store"
)

// RateLimit bounds each principal's calls of every tool to n per period
// per, as the tool option [RateLimit] does, for the tools that set no
// limit of their own. It is the default of carmy.toml's [rate_limits].
func (b *Builder) RateLimit(n int, per time.Duration) *Builder {
	if err := naming.CheckRate(int64(n), per); err != nil {
		b.misuse("Builder.RateLimit(%d, %v): %v", n, per, err)
		return b
	}
	b.rate = store.Rate{Calls: n, Per: per}
	return b
}

// toolRate is a rate limit carmy.toml sets for one tool; Calls 0 is
// "unlimited".
type toolRate struct {
	rate store.Rate
	site string // carmy.toml:LINE
}

// setLimits gives a built tool its limits: carmy.toml's entry for it, else
// its own option, else the builder's rate.
func (b *Builder) setLimits(t *tool) {
	t.rate = b.rate
	if o := t.def.opts; t.def.impl == nil || t.def.mount != nil {
		if o.rate.Calls > 0 {
			t.rate = o.rate
		}
		t.maxInFlight = o.maxInFlight
	}
	if c, ok := b.toolRates[t.meta.Name]; ok {
		t.rate = c.rate
	}
}

// checkToolRates reports the entries of [rate_limits] that name no tool.
func (b *Builder) checkToolRates(r *Registry) []error {
	var errs []error
	for name, c := range b.toolRates {
		if _, ok := r.tab().tools[name]; !ok {
			errs = append(errs, &BuildError{Site: c.site, Err: fmt.Errorf("rate_limits.%s: there is no tool named %q", name, name)})
		}
	}
	return errs
}

// limitersOf returns what keeps the limits of a registry with store s:
// the store itself where it can, else the process's memory.
func limitersOf(s store.IdempotencyStore, now func() time.Time) (store.RateLimiter, store.ConcurrencyLimiter) {
	mem := store.NewMemoryLimiter(now)
	var (
		rl store.RateLimiter        = mem
		cl store.ConcurrencyLimiter = mem
	)
	if l, ok := s.(store.RateLimiter); ok {
		rl = l
	}
	if l, ok := s.(store.ConcurrencyLimiter); ok {
		cl = l
	}
	return rl, cl
}

// limit is the pipeline's stage of the caller's limits on t: a slot of
// MaxInFlight, then the rate. A call refused for want of a slot is not
// counted against the rate. The slot is the call's until release frees it,
// when the call is refused or its tool's code returns. A store that cannot
// answer refuses the call as unavailable: a limit never lapses because
// its store is down. A call that comes through the stage again (a task
// that gave its place back while it waited for a person) takes a slot
// again, and is counted against the rate once. So is a call handed off to
// a task (a mounted tool's whose upstream made its task): the task is that
// call, counted as it came.
func (r *Registry) limit(ctx context.Context, t *tool, req *Request) error {
	if t.rate.Calls == 0 && t.maxInFlight == 0 {
		return nil
	}
	c := &req.Call
	if t.maxInFlight > 0 && req.held.slot == nil {
		key := store.LimitKey{Principal: c.Principal, Tool: t.meta.Name}
		slot, err := r.slots.AcquireSlot(ctx, key, t.maxInFlight, t.reservationLease())
		if errors.Is(err, store.ErrNoSlot) {
			return r.refused(ctx, t, c, t.inFlightError())
		}
		if err != nil {
			return r.storeError(ctx, t, err)
		}
		req.held.slot = slot
	}
	if t.rate.Calls > 0 && !req.rated && (req.task == nil || req.task.adopt == nil) {
		d, err := r.limiter.Allow(ctx, store.LimitKey{Principal: c.Principal, Tool: t.meta.Name}, t.rate)
		if err != nil {
			return r.storeError(ctx, t, err)
		}
		if !d.Allowed {
			return r.refused(ctx, t, c, t.rateError(d.RetryAfter))
		}
		req.rated = true
	}
	return nil
}

// rateError is the refusal of a call past t's rate, whose next call is
// allowed after after. Its message tells the model what to do, in whole
// seconds; details.retry_after_ms is exact, for programs.
func (t *tool) rateError(after time.Duration) *Error {
	ms := max(int64((after+time.Millisecond-1)/time.Millisecond), 1)
	return &Error{
		Code:      CodeRateLimited,
		Message:   fmt.Sprintf("%s is rate limited: this caller may call it %s; call %s again in %d s", t.meta.Name, describeRate(t.rate), t.meta.Name, (ms+999)/1000),
		Retryable: true,
		Details:   map[string]any{"retry_after_ms": ms},
	}
}

// inFlightWait is how long a call refused by MaxInFlight is told to wait:
// when one of the calls running ends is not known.
const inFlightWait = time.Second

// inFlightError is the refusal of a call past t's MaxInFlight.
func (t *tool) inFlightError() *Error {
	running := fmt.Sprintf("%d calls", t.maxInFlight)
	if t.maxInFlight == 1 {
		running = "a call"
	}
	return &Error{
		Code:      CodeRateLimited,
		Message:   fmt.Sprintf("%s is rate limited: this caller already has %s of it running, as many as it may at once; call %s again in %d s, once one has finished", t.meta.Name, running, t.meta.Name, int(inFlightWait/time.Second)),
		Retryable: true,
		Details:   map[string]any{"retry_after_ms": inFlightWait.Milliseconds()},
	}
}

// describeRate says a rate in words: "3 times per minute".
func describeRate(r store.Rate) string {
	times := fmt.Sprintf("%d times", r.Calls)
	if r.Calls == 1 {
		times = "once"
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Second, "second"}, {time.Minute, "minute"}, {time.Hour, "hour"}, {24 * time.Hour, "day"}} {
		if r.Per == u.d {
			return times + " per " + u.name
		}
	}
	return times + " per " + r.Per.String()
}

// retryAfterSeconds is the Retry-After of an HTTP answer refusing a call
// for its limits: details.retry_after_ms in whole seconds, rounded up.
func retryAfterSeconds(e *Error) (int64, bool) {
	if e.Code != CodeRateLimited {
		return 0, false
	}
	var ms int64
	switch v := e.Details["retry_after_ms"].(type) {
	case int64:
		ms = v
	case int:
		ms = int64(v)
	case float64:
		ms = int64(v)
	}
	return max((ms+999)/1000, 1), true
}

// configureRateLimits applies carmy.toml's [rate_limits]; a rate that is
// not one is a problem named by its key.
func (b *Builder) configureRateLimits(c config.RateLimits) {
	rate := func(r config.Rate) (store.Rate, bool) {
		if r.Calls == 0 { // unlimited
			return store.Rate{}, true
		}
		if err := naming.CheckRate(int64(r.Calls), r.Per); err != nil {
			b.errs = append(b.errs, &BuildError{Site: r.Site, Err: fmt.Errorf("%s: %w", r.Key, err)})
			return store.Rate{}, false
		}
		return store.Rate{Calls: r.Calls, Per: r.Per}, true
	}
	if c.Default != nil {
		if r, ok := rate(*c.Default); ok {
			b.rate = r
		}
	}
	for name, t := range c.Tools {
		if r, ok := rate(t); ok {
			if b.toolRates == nil {
				b.toolRates = map[string]toolRate{}
			}
			b.toolRates[name] = toolRate{rate: r, site: t.Site}
		}
	}
}
