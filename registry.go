package carmy

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// Registry is a built, validated set of tools. Only a mounted upstream
// changes it once built, as [Builder.Mount] says. It is safe for
// concurrent use; every call runs under its tool's rules.
type Registry struct {
	table     atomic.Pointer[toolTable]
	tableMu   sync.Mutex // serializes the replacements of table
	logger    *slog.Logger
	authorize func(Context, ToolMetadata) error
	requiring atomic.Bool // some tool requires a permission
	policies  *policies   // the Cedar policies; nil for none
	store     store.IdempotencyStore
	locker    store.Locker
	limiter   store.RateLimiter        // of the tools with a RateLimit
	slots     store.ConcurrencyLimiter // of the tools with a MaxInFlight
	ttl       time.Duration
	publicURL string // Builder.PublicURL: the base of approval links
	overruns  atomic.Int64
	workers   *workers
	approvals *approvals
	tasks     tasks
	// searchIndex is search_tools' index of the tools; nil without it.
	searchIndex atomic.Pointer[toolIndex]

	mounts []*mount // the upstreams mounted (mount.go)
	// prepare makes a runnable tool of a declaration as Build does, for
	// the tools a mount's upstream adds or changes after Build.
	prepare func(*ToolDef) (*tool, []error)

	observing
	serving
	lifetime
}

// toolTable is a registry's tools at one moment. A published table never
// changes: a mount's upstream that adds or changes a tool after Build
// replaces it whole, so a call or a list reads one consistent table,
// loaded once, without a lock.
type toolTable struct {
	tools map[string]*tool
	names []string // sorted
}

// tab is the table of tools in force.
func (r *Registry) tab() *toolTable { return r.table.Load() }

// putTools publishes a table with ts added or replacing the tools of
// their names, and tells what follows the tool set. Under policies, the
// policies are validated against ts first: when they fail to, nothing
// changes and the error says why.
func (r *Registry) putTools(ts ...*tool) error {
	r.tableMu.Lock()
	if err := r.policies.recatalog(ts); err != nil {
		r.tableMu.Unlock()
		return err
	}
	old := r.tab()
	next := &toolTable{tools: maps.Clone(old.tools), names: slices.Clone(old.names)}
	for _, t := range ts {
		if _, ok := next.tools[t.meta.Name]; !ok {
			next.names = append(next.names, t.meta.Name)
		}
		next.tools[t.meta.Name] = t
		if len(t.meta.Requires) > 0 {
			r.requiring.Store(true)
		}
	}
	slices.Sort(next.names)
	r.table.Store(next)
	r.reindex()
	r.mcpServer().SetTools(r.mcpTools(ts)...)
	r.tableMu.Unlock()
	r.toolSetChanged()
	return nil
}

// observing is who a registry tells of its calls.
type observing struct {
	// observers are told of every decided call: the console's recent
	// calls, and the audit when there are sinks.
	observers     []observer
	auditors      []Auditor
	auditFailures atomic.Int64
}

// serving is what a registry's doors hold: the HTTP door, and the MCP
// door, built on its first use, with what it is built from.
type serving struct {
	http          *httpDoor // the HTTP API, Handler's, and the console
	bodyLimit     int64     // of a message over MCP, stdio included
	elicit        formConfirmation
	stdioIdentity Identity
	sessions      *mcpserve.Sessions // MCP sessions over HTTP
	signer        *mcpserve.Signer   // signs the sessionless protocol's request states
	mcpOnce       sync.Once
	mcp           *mcpserve.Server
	mcpConfig     mcpConfig // the host's additions to the MCP server
	tuning        tuning
}

// lifetime is a registry's life, and what ends with it.
type lifetime struct {
	// life is done once the registry closes, never before: its streams
	// end (a server's shutdown ends its own), and its tasks stop, as a
	// dying host's do.
	life context.Context
	end  context.CancelFunc

	closers   []func() error
	closeOnce sync.Once
	closeErr  error
}

// Tools returns the metadata of every tool, sorted by name, whoever may
// call it: [Registry.ToolsFor] gives what one caller may call. The slices
// in it are copies.
func (r *Registry) Tools() []ToolMetadata {
	tab := r.tab()
	out := make([]ToolMetadata, len(tab.names))
	for i, name := range tab.names {
		out[i] = tab.tools[name].meta.clone()
	}
	return out
}

// Lookup returns the metadata of the tool with that name.
func (r *Registry) Lookup(name string) (ToolMetadata, bool) {
	t, ok := r.tab().tools[name]
	if !ok {
		return ToolMetadata{}, false
	}
	return t.meta.clone(), true
}

// Close stops the registry's background work, such as the sweeper of the
// default idempotency store, and the tasks it runs (see [Registry.Start]).
// Calls made after Close still run; Close is idempotent. Stores and lockers given to the builder are the caller's to
// close.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		r.workers.close()
		r.end()
		r.sessions.CloseAll()
		errs := []error{r.http.srv.Close()}
		for _, c := range r.closers {
			errs = append(errs, c())
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

// Overruns returns how many executions went on after their caller had been
// answered: tools that ignored their deadline or the caller's
// cancellation. Each is also logged when it finally returns.
func (r *Registry) Overruns() int64 { return r.overruns.Load() }
