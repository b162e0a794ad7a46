package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/carmy-dev/carmy/internal/naming"
)

// EffectPermissions says which permission a call of a tool needs by the
// tool's effect, in addition to those the tool declares with [Requires]:
// for hosts whose identity provider grants scopes by kind of action. An
// effect left out needs none. For example, reads need tools:read and
// anything that changes state tools:write:
//
//	b.EffectPermissions(map[carmy.Effect]string{
//		carmy.None:          "tools:read",
//		carmy.Read:          "tools:read",
//		carmy.Write:         "tools:write",
//		carmy.ExternalWrite: "tools:write",
//		carmy.Destructive:   "tools:write",
//	})
//
// Build reports an unknown effect or a permission that is not one (see
// [Requires]). Called again, it replaces the map.
func (b *Builder) EffectPermissions(perms map[Effect]string) *Builder {
	b.effectPerms = maps.Clone(perms)
	b.effectPermsSite = callerSite(2)
	return b
}

// checkEffectPermissions reports every problem of the map given to
// EffectPermissions.
func (b *Builder) checkEffectPermissions() []error {
	var errs []error
	for _, e := range slices.Sorted(maps.Keys(b.effectPerms)) {
		switch err := naming.CheckPermission(b.effectPerms[e]); {
		case !e.valid():
			errs = append(errs, &BuildError{Site: b.effectPermsSite, Err: fmt.Errorf("EffectPermissions: %s is not an effect; use carmy.None, Read, Write, ExternalWrite or Destructive", e)})
		case err != nil:
			errs = append(errs, &BuildError{Site: b.effectPermsSite, Err: fmt.Errorf("EffectPermissions of %s: %w; leave an effect out to require nothing for it", e, err)})
		}
	}
	return errs
}

// requirements returns every permission a call of a tool needs: those it
// declares and that of its effect, sorted, each once; nil for none.
func (b *Builder) requirements(declared []string, effect Effect) ([]string, []error) {
	var errs []error
	var out []string
	for _, p := range declared {
		if err := naming.CheckPermission(p); err != nil {
			errs = append(errs, fmt.Errorf("Requires: %w", err))
			continue
		}
		out = append(out, p)
	}
	if p, ok := b.effectPerms[effect]; ok && naming.CheckPermission(p) == nil {
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errs
	}
	slices.Sort(out)
	return slices.Compact(out), errs
}

// missingPermissions is the cause of a refusal for permissions the caller
// lacks: the HTTP API names them in its OAuth challenge.
type missingPermissions struct {
	tool     string
	required []string // every permission a call needs
	missing  []string
}

func (m *missingPermissions) Error() string {
	return "missing permissions " + strings.Join(m.missing, " ")
}

// permit is the one decision of whether a caller may call a tool, which
// calls and lists share: the permissions the tool requires, then the
// host's policy. A call asks it before its input is read, so that a caller
// that may not call a tool learns nothing about it but its name.
func (r *Registry) permit(cc *Context, t *tool) *Error {
	if !t.grantedTo(cc.Permissions) {
		return t.permissionError(cc.Permissions)
	}
	return r.authorized(cc, t)
}

// grantedTo reports whether perms hold every permission t requires.
func (t *tool) grantedTo(perms Permissions) bool {
	for _, p := range t.meta.Requires {
		if !perms.Has(p) {
			return false
		}
	}
	return true
}

// authorized asks the host's policy hook, if any, about a call of t.
func (r *Registry) authorized(cc *Context, t *tool) *Error {
	if r.authorize == nil {
		return nil
	}
	if err := r.authorize(*cc, t.meta); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Code: CodePermissionDenied, Message: err.Error(), Err: err}
		}
		return e
	}
	return nil
}

// permissionError is the refusal of a caller holding perms, which lack
// some of those the tool requires. Its message is for the model that made
// the call; details.missing lists the permissions for the host.
func (t *tool) permissionError(perms Permissions) *Error {
	var missing []string
	for _, p := range t.meta.Requires {
		if !perms.Has(p) {
			missing = append(missing, p)
		}
	}
	quoted := make([]string, len(missing))
	for i, p := range missing {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	what := "the permission " + quoted[0]
	if len(quoted) > 1 {
		what = "the permissions " + strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
	}
	return &Error{
		Code:    CodePermissionDenied,
		Message: fmt.Sprintf("%s needs %s, which this caller was not granted; tell the user, who can ask for access", t.meta.Name, what),
		Details: map[string]any{"missing": missing},
		Err:     &missingPermissions{tool: t.meta.Name, required: t.meta.Requires, missing: missing},
	}
}

// ToolsFor returns the metadata of the tools that a caller with the given
// identity may call, sorted by name: those whose required permissions
// ([ToolMetadata.Requires]) it holds and that the host's policy
// ([Builder.Authorize]) allows. The policy is asked with the tool's
// metadata and a [Context] that has the caller's identity and no execution
// or request id, as no call is made; a policy that fails or panics leaves
// the tool out. Every list the registry serves (GET /tools, MCP
// tools/list, the console) is this one, for the caller that asks.
func (r *Registry) ToolsFor(ctx context.Context, id Identity) []ToolMetadata {
	out := make([]ToolMetadata, 0, len(r.tab().names))
	r.eachVisible(ctx, id, func(t *tool) {
		m := t.meta.clone()
		m.Confirmation = r.confirmationFor(t)
		out = append(out, m)
	})
	return out
}

// eachVisible calls f with every tool the caller may call, in name order.
func (r *Registry) eachVisible(ctx context.Context, id Identity, f func(*tool)) {
	v := r.visibility(ctx, id)
	tab := r.tab()
	for _, name := range tab.names {
		if t := tab.tools[name]; v(t) {
			f(t)
		}
	}
}

// visibility returns whether a caller may call a tool, for lists.
func (r *Registry) visibility(ctx context.Context, id Identity) func(*tool) bool {
	if r.authorize == nil && !r.requiring.Load() && r.policies == nil {
		return (*tool).live
	}
	cc := &Context{
		Context:     ctx,
		Session:     id.Session,
		Principal:   id.Principal,
		Permissions: NewPermissions(id.Permissions...),
		Metadata:    id.Metadata,
		log:         r.logger,
	}
	door := doorOf(ctx)
	return func(t *tool) bool { return t.live() && r.listed(cc, t) && r.policyListed(cc, t, door) }
}

// listed asks permit for a list. A policy that panics is logged, and the
// tool left out: a list must not fail because of one tool.
func (r *Registry) listed(cc *Context, t *tool) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.logger.LogAttrs(cc, slog.LevelError, "carmy: the policy panicked while listing tools", slog.String("tool", t.meta.Name), slog.Any("panic", p))
			ok = false
		}
	}()
	// A list asks what permit asks, without making the refusal a call
	// would get: a search over many hidden tools pays for no message.
	return t.grantedTo(cc.Permissions) && r.authorized(cc, t) == nil
}

// declaredPermissions returns every permission some tool requires,
// sorted: the scopes an OAuth client may need to ask for.
func (r *Registry) declaredPermissions() []string {
	var out []string
	for _, t := range r.tab().tools {
		out = append(out, t.meta.Requires...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// union returns a followed by the entries of b it lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
