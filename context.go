package carmy

import (
	"context"
	"log/slog"
	"slices"
)

// Context is what a tool knows about the call it serves. It embeds the
// call's [context.Context], which is cancelled when the caller gives up or
// the tool's deadline passes, and which carries the rest of this struct for
// [ContextFrom].
//
// A tool takes a Context (or a plain context.Context) as a parameter; it is
// never a service locator: dependencies come in [State] parameters.
type Context struct {
	context.Context
	// ExecutionID is a fresh UUIDv7 for every execution.
	ExecutionID string
	// RequestID is the caller's idempotency identity, "" when none was sent.
	RequestID string
	// Session identifies the conversation or connection, as the host saw it.
	Session string
	// Principal is who called, as the host authenticated them; "" when the
	// host authenticated nobody.
	Principal string
	// Permissions is the immutable set of grants the host gave this call.
	Permissions Permissions
	// Metadata carries the host's extra facts about the call. Tools must
	// treat it as read-only.
	Metadata map[string]string
	// Fence is the fencing token of the serialization lock this execution
	// holds, for a tool that is not parallel-safe; 0 otherwise. It grows
	// with every acquisition, so a resource that remembers the highest
	// fence it saw can refuse a writer whose lock has since passed to
	// another host.
	Fence uint64

	log *slog.Logger // the registry's logger, for Log
}

type contextKey struct{}

// ContextFrom returns the [Context] of the tool execution that ctx derives
// from, and false when ctx is not derived from one. It lets code deep in a
// tool's call tree, handed only a context.Context, reach the execution id and
// principal.
func ContextFrom(ctx context.Context) (Context, bool) {
	if ctx == nil {
		return Context{}, false
	}
	c, ok := ctx.Value(contextKey{}).(*Context)
	if !ok {
		return Context{}, false
	}
	return *c, true
}

// Permissions is an immutable set of grants, such as "confirm:cancel_order".
// The zero value is the empty set. It is safe for concurrent use.
type Permissions struct {
	sorted []string // sorted, unique, never mutated after construction
}

// NewPermissions returns the set of the given grants; duplicates count once.
func NewPermissions(p ...string) Permissions {
	if len(p) == 0 {
		return Permissions{}
	}
	s := slices.Clone(p)
	slices.Sort(s)
	return Permissions{sorted: slices.Compact(s)}
}

// Has reports whether perm is in the set. The match is exact and
// case-sensitive.
func (p Permissions) Has(perm string) bool {
	_, ok := slices.BinarySearch(p.sorted, perm)
	return ok
}

// List returns the grants, sorted. The slice is a copy.
func (p Permissions) List() []string { return slices.Clone(p.sorted) }

// Len returns the number of grants.
func (p Permissions) Len() int { return len(p.sorted) }

// State is a tool parameter that receives an application dependency, such as
// a database handle, provided once to [Builder.State]. For an interface T it
// receives the one provided value that implements T.
//
//	func getOrder(ctx carmy.Context, db carmy.State[*sql.DB], in GetOrder) (Order, error)
type State[T any] struct {
	Value T
}

// stateType lets the reflection in Tool recognise any State[T] and learn T.
func (State[T]) stateType() stateMarker { return stateMarker{} }

type stateMarker struct{}
