package carmy

import (
	"fmt"
	"slices"
	"time"

	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/store"
)

// Option configures a tool declared with [Tool].
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// options records what each option set, and every conflict.
type options struct {
	name, description        string
	named                    bool // Name was given, even as ""
	idempotent, parallelSafe bool
	confirm                  bool
	timeout                  time.Duration
	tasks                    TaskSupport
	taskAfterInput           bool
	register                 bool
	requires                 []string
	rate                     store.Rate // RateLimit
	maxInFlight              int
	set                      map[string]any
	conflicts                []error
}

// record notes that option key was given value v, and reports a conflict
// when it was given another value before.
func (o *options) record(key string, v any) bool {
	if o.set == nil {
		o.set = map[string]any{}
	}
	if prev, ok := o.set[key]; ok && prev != v {
		o.conflicts = append(o.conflicts, fmt.Errorf("option %s is given twice with different values (%v and %v); keep one", key, prev, v))
		return false
	}
	o.set[key] = v
	return true
}

// Name sets the tool's name: 1 to 128 ASCII letters, digits, '_', '-' and
// '.'. Without it the name is derived from the function's: createOrder
// becomes create_order, getHTTPStatus get_http_status.
func Name(s string) Option {
	return optionFunc(func(o *options) {
		if o.record("Name", s) {
			o.name, o.named = s, true
		}
	})
}

// Description tells the model what the tool does and when to use it.
// Without it the function's doc comment is used, when `carmy gen` has
// extracted it.
func Description(s string) Option {
	return optionFunc(func(o *options) {
		if o.record("Description", s) {
			o.description = s
		}
	})
}

// Idempotent declares that calling the tool twice with the same input has
// the effect of calling it once. A tool whose effect is [None] or [Read] is
// idempotent without it: its [ToolMetadata], GET /tools and MCP's
// idempotentHint say so.
func Idempotent() Option {
	return optionFunc(func(o *options) { o.record("Idempotent", true); o.idempotent = true })
}

// ParallelSafe declares that executions of the tool may overlap. Without
// it, carmy runs at most one execution of the tool at a time.
func ParallelSafe() Option {
	return optionFunc(func(o *options) { o.record("ParallelSafe", true); o.parallelSafe = true })
}

// RequireConfirmation makes every call of the tool need the permission
// "confirm:<name>", or "confirm:<name>:<digest>" bound to one input, granted
// by the host.
func RequireConfirmation() Option {
	return optionFunc(func(o *options) { o.record("RequireConfirmation", true); o.confirm = true })
}

// Timeout sets the deadline of one execution of the tool, overriding the
// builder's default. It must be positive.
func Timeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.conflicts = append(o.conflicts, fmt.Errorf("Timeout(%v) must be positive", d))
			return
		}
		if o.record("Timeout", d) {
			o.timeout = d
		}
	})
}

// Register(false) keeps the tool out of the automatic registry that
// [App] starts from. Tools declared inside functions, such as tests,
// should say it.
func Register(register bool) Option {
	return optionFunc(func(o *options) {
		if o.record("Register", register) {
			o.register = register
		}
	})
}

// A principal's calls of a tool can be limited in rate ([RateLimit],
// [Builder.RateLimit], carmy.toml's [rate_limits]) and in number at once
// ([MaxInFlight]). The limits are checked in the call's pipeline once the
// caller may call the tool and before its input is read, and they live in
// the store when it keeps them ([store.RateLimiter],
// [store.ConcurrencyLimiter]), so that hosts sharing a store share the
// limits too.

// RateLimit bounds each principal's calls of the tool to n per period
// per, with a burst of n: a principal that made no call for a period may
// make n at once, and then one every per/n. A call past the limit is
// refused with [CodeRateLimited], retryable, its details.retry_after_ms
// saying when the next call would be allowed; it runs nothing, its input
// is not read, and it is not counted. Every call allowed counts, one that
// replays a recorded outcome too. n and per must be positive.
//
// The limit is this tool's own: it replaces the one [Builder.RateLimit]
// gives every tool, and an entry for the tool in carmy.toml's
// [rate_limits] replaces it.
func RateLimit(n int, per time.Duration) Option {
	return optionFunc(func(o *options) {
		if err := naming.CheckRate(int64(n), per); err != nil {
			o.conflicts = append(o.conflicts, fmt.Errorf("RateLimit(%d, %v): %w", n, per, err))
			return
		}
		if o.record("RateLimit", store.Rate{Calls: n, Per: per}) {
			o.rate = store.Rate{Calls: n, Per: per}
		}
	})
}

// MaxInFlight bounds how many calls of the tool one principal has running
// at once, across every host that shares the store: a call past it is
// refused with [CodeRateLimited], retryable, before its input is read. A
// call holds its place from the limit check until its tool's code
// returns, a call answered at its deadline while its code runs on
// included. n must be positive.
func MaxInFlight(n int) Option {
	return optionFunc(func(o *options) {
		if n <= 0 {
			o.conflicts = append(o.conflicts, fmt.Errorf("MaxInFlight(%d) must be positive", n))
			return
		}
		if o.record("MaxInFlight", n) {
			o.maxInFlight = n
		}
	})
}

// Requires makes every call of the tool need each of the given
// permissions, granted by the host (a bearer token's permissions, an
// OAuth token's scopes): a caller that lacks one is refused with
// [CodePermissionDenied], naming what is missing, and the tool is left
// out of the lists that caller sees. Given more than once, a call needs
// every permission named. A permission is what an OAuth scope may be: 1
// to 128 printable ASCII characters other than space, '"' and '\'.
//
// [Builder.EffectPermissions] adds the permission of the tool's effect;
// [ToolMetadata.Requires] lists both.
func Requires(perms ...string) Option {
	return optionFunc(func(o *options) {
		for _, p := range perms {
			if err := naming.CheckPermission(p); err != nil {
				o.conflicts = append(o.conflicts, fmt.Errorf("Requires: %w", err))
				continue
			}
			if !slices.Contains(o.requires, p) {
				o.requires = append(o.requires, p)
			}
		}
	})
}

// Tasks sets whether the tool's calls may run as tasks: [TaskOptional]
// (the default), [TaskForbidden] or [TaskRequired]. A task runs under the
// tool's [Timeout], like any call, so a long-running tool sets a long one.
func Tasks(mode TaskSupport) Option {
	return optionFunc(func(o *options) {
		if mode > TaskRequired {
			o.conflicts = append(o.conflicts, fmt.Errorf("Tasks(%d) is not TaskOptional, TaskForbidden or TaskRequired", mode))
			return
		}
		if o.record("Tasks", mode) {
			o.tasks = mode
		}
	})
}

// TaskAfterInput makes a tool that runs as a task ask its questions before
// its task starts, where the protocol lets a call do both: over MCP's
// sessionless protocol (2026-07-28), a call from a client that takes tasks
// runs first as a call, whose questions ([Context.Elicit]) go back in
// input-required rounds, and the round that brings their answers starts
// the task, the answers with it. A tool with this option asks before it
// works: a first round that asks nothing runs to its end as a call, even
// of a [TaskRequired] tool. Questions asked once the task runs wait for
// the task's input (tasks/update), as any task's do.
//
// Everywhere else (a session, HTTP, Go) it changes nothing: the call is a
// task from the start, as its [Tasks] mode says. With [TaskForbidden] it
// is a mistake that [Builder.Build] reports.
func TaskAfterInput() Option {
	return optionFunc(func(o *options) {
		if o.record("TaskAfterInput", true) {
			o.taskAfterInput = true
		}
	})
}
