package policy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cedar-policy/cedar-go/types"
)

// Engine holds the policy set in force and the catalog of tools it was
// validated against, which a reload or a change of the tools replaces
// together, and the list decisions made under them.
type Engine struct {
	cur atomic.Pointer[version]
	mu  sync.Mutex // serializes the replacements of cur

	// lists caches list decisions per set version, principal (with its
	// permissions and metadata) and door.
	lists     sync.Map // listKey → bool
	listCount atomic.Int64
	// principals caches the Principal entities of callers, by who.
	principals     sync.Map // string → types.Entity
	principalCount atomic.Int64
}

type version struct {
	set *Set
	cat *Catalog
	n   uint64
}

// maxListEntries bounds the list cache: beyond it, it starts over.
const maxListEntries = 100_000

// NewEngine returns an engine with set, validated against cat, in force.
func NewEngine(cat *Catalog, set *Set) *Engine {
	e := &Engine{}
	e.cur.Store(&version{set: set, cat: cat, n: 1})
	return e
}

// Catalog returns the tools the engine decides about.
func (e *Engine) Catalog() *Catalog { return e.cur.Load().cat }

// Set returns the set in force.
func (e *Engine) Set() *Set { return e.cur.Load().set }

// put puts set and cat in force; the caller holds mu.
func (e *Engine) put(set *Set, cat *Catalog) {
	old := e.cur.Load()
	e.cur.Store(&version{set: set, cat: cat, n: old.n + 1})
	e.lists.Clear()
	e.listCount.Store(0)
}

// load parses text against the catalog in force and puts the set in
// force, or leaves the one in force and returns why not.
func (e *Engine) load(path string, text []byte) (*Set, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cat := e.Catalog()
	set, err := Parse(cat, path, text)
	if err != nil {
		return nil, err
	}
	e.put(set, cat)
	return set, nil
}

// Recatalog adds the tools given to the catalog, or replaces those of
// their names, and puts in force the set in force validated against
// them. When a policy does not validate against one of them, nothing
// changes: the error says why, as [Parse]'s do.
func (e *Engine) Recatalog(tools ...Tool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.cur.Load()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	cat := cur.cat.With(tools...)
	set, err := cur.set.With(cat, names)
	if err != nil {
		return err
	}
	e.put(set, cat)
	return nil
}

// Decide answers req under the set in force, which it returns.
func (e *Engine) Decide(req Request) (Decision, *Set) {
	v := e.cur.Load()
	return v.set.decide(v.cat, req, e.principal(req, who(req))), v.set
}

// principal is the caller's entity, made once per caller.
func (e *Engine) principal(req Request, key string) types.Entity {
	if p, ok := e.principals.Load(key); ok {
		return p.(types.Entity)
	}
	p := principalEntity(req.Principal, req.Permissions, req.Metadata)
	if e.principalCount.Add(1) > maxListEntries {
		e.principals.Clear()
		e.principalCount.Store(0)
	}
	e.principals.Store(key, p)
	return p
}

type listKey struct {
	version uint64
	tool    string
	door    string
	who     string // principal, permissions and metadata
}

// Listed reports whether req's principal sees req's tool in a list:
// whether the set in force allows it the list action without error.
func (e *Engine) Listed(req Request) bool {
	v := e.cur.Load()
	k := listKey{version: v.n, tool: req.Tool, door: req.Door, who: who(req)}
	if ok, hit := e.lists.Load(k); hit {
		return ok.(bool)
	}
	req.Action = List
	d := v.set.decide(v.cat, req, e.principal(req, k.who))
	ok := d.Allow && len(d.Errors) == 0
	if e.listCount.Add(1) > maxListEntries {
		e.lists.Clear()
		e.listCount.Store(0)
	}
	e.lists.Store(k, ok)
	return ok
}

// who is a caller as the model sees it: its principal, permissions and
// metadata.
func who(req Request) string {
	if len(req.Permissions) == 0 && len(req.Metadata) == 0 {
		return req.Principal
	}
	var b strings.Builder
	b.WriteString(req.Principal)
	for _, p := range req.Permissions {
		b.WriteString("\x00p")
		b.WriteString(p)
	}
	for _, k := range slices.Sorted(maps.Keys(req.Metadata)) {
		b.WriteString("\x00m" + k + "\x00" + req.Metadata[k])
	}
	return b.String()
}

// Event is what a watched file did.
type Event struct {
	Kind Change
	// Set is the set now in force.
	Set *Set
	Err error // Rejected: why
}

// Change is a kind of [Event].
type Change uint8

const (
	// Reloaded: the file changed, and its new set is in force.
	Reloaded Change = iota + 1
	// Rejected: the file changed to a set that does not parse or
	// validate; the previous set stays in force.
	Rejected
	// Missing: the file is gone; the last set stays in force.
	Missing
	// Unreadable: the file cannot be read; the last set stays in force.
	Unreadable
)

// Watch polls the file at path every poll until ctx is done, and puts in
// force the set it holds once its content changed and stayed the same
// over two polls; text is the content of the set in force. report is told
// of every change.
func (e *Engine) Watch(ctx context.Context, path string, text []byte, poll time.Duration, report func(Event)) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	current := text
	var pending []byte
	gone := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if !gone {
				kind := Unreadable
				if errors.Is(err, fs.ErrNotExist) {
					kind = Missing
				}
				report(Event{Kind: kind, Set: e.Set(), Err: err})
			}
			gone, pending = true, nil
			continue
		}
		gone = false
		switch {
		case bytes.Equal(b, current):
			pending = nil
		case pending == nil || !bytes.Equal(b, pending):
			pending = b // changed: wait for it to settle
		default:
			current, pending = b, nil
			set, err := e.load(path, b)
			if err != nil {
				report(Event{Kind: Rejected, Set: e.Set(), Err: err})
				continue
			}
			report(Event{Kind: Reloaded, Set: set})
		}
	}
}

type doorKey struct{}

// WithDoor returns ctx marked as a call that came by door ("llm",
// "adapter"): the doors outside the root package say so this way.
func WithDoor(ctx context.Context, door string) context.Context {
	return context.WithValue(ctx, doorKey{}, door)
}

// DoorOf returns the door ctx was marked with; "" for none.
func DoorOf(ctx context.Context) string {
	d, _ := ctx.Value(doorKey{}).(string)
	return d
}
