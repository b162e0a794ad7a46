package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// ApprovalStatus is where an [Approval] stands.
type ApprovalStatus string

// The states of an approval. An approval is created pending; a person
// approves or denies it once; an approved one is used by the one call it
// lets run. Denied and used are final. A pending or approved approval whose
// expiry passed reads as expired, which is final too.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDenied   ApprovalStatus = "denied"
	ApprovalUsed     ApprovalStatus = "used"
	ApprovalExpired  ApprovalStatus = "expired"
)

// ApprovalRetention is how long a store keeps an approval after its expiry,
// so that those who wait for it learn that it expired.
const ApprovalRetention = time.Hour

// Approval is a person's decision on one call that needs confirmation: one
// principal's call of one tool with one canonical input.
type Approval struct {
	ID        string
	Tool      string
	Principal string
	// Input is the canonical form of the validated input, and Digest its
	// hex SHA-256.
	Input  []byte
	Digest string
	// RequestID is the request id of the call that asked, if any.
	RequestID string
	Status    ApprovalStatus
	Created   time.Time
	Expires   time.Time
	// Decided and Approver say when and by whom it was approved or denied.
	Decided  time.Time
	Approver string
	// UsedBy is the request id of the call that used it, "" for a call
	// without one.
	UsedBy string
}

// key is what an approval is for: one principal, tool and input.
func (a Approval) key() approvalKey { return approvalKey{a.Principal, a.Tool, a.Digest} }

type approvalKey struct{ principal, tool, digest string }

// Errors of an [ApprovalStore].
var (
	// ErrApprovalCapacity is returned, wrapped, by Create of an approval
	// whose input would take its principal, or the store, beyond the bytes
	// of inputs it keeps (see [DefaultApprovalBytes]): the call is refused
	// until the principal's approvals are decided and expire.
	ErrApprovalCapacity = errors.New("the principal, or the store, keeps as many bytes of approval inputs as its bound allows")
	// ErrApprovalNotFound: no approval has that id, or it is gone.
	ErrApprovalNotFound = errors.New("no such approval")
	// ErrApprovalState: the transition does not apply to the approval as
	// it stands (deciding one that is not pending, using one that is not
	// approved, or one that expired). The approval as it stands is
	// returned with it.
	ErrApprovalState = errors.New("the approval is not in a state that allows this")
)

// ApprovalStore keeps approvals, so that a person can decide on a call that
// an agent made, and the call can then run once. Its transitions are
// atomic: pending to approved or denied (Decide), approved to used
// (Consume); so two people deciding at once, or two retries of the approved
// call, get one transition between them. Implementations must be safe for
// concurrent use, keep an approval at least [ApprovalRetention] after its
// expiry, and pass the approval suite in the storetest package. An
// implementation of [IdempotencyStore] that also implements ApprovalStore is
// used for approvals too.
type ApprovalStore interface {
	// Create records a, which is pending, unless an approval for the same
	// principal, tool and digest is live: then it returns that one and
	// records nothing. Live means pending, approved or denied and not
	// expired, or used by a call whose request id is a.RequestID (not "").
	Create(ctx context.Context, a Approval) (Approval, error)
	// Get returns the approval with that id, or [ErrApprovalNotFound].
	Get(ctx context.Context, id string) (Approval, error)
	// List returns a page of the approvals kept, newest first: at most
	// limit of them ([DefaultApprovalPage] when limit <= 0), starting after
	// the approval with id after ("" for the newest; none when after is no
	// longer kept). They are summaries: Input is nil, so that a list never
	// copies every input; Get returns one approval with its input.
	List(ctx context.Context, after string, limit int) ([]Approval, error)
	// Decide approves or denies a pending approval, naming who did. An
	// approval that is not pending, or expired, is returned unchanged with
	// [ErrApprovalState].
	Decide(ctx context.Context, id string, approve bool, approver string) (Approval, error)
	// Consume uses an approved approval up for the call with that request
	// id ("" for none). One that is not approved, or expired, is returned
	// unchanged with [ErrApprovalState].
	Consume(ctx context.Context, id, requestID string) (Approval, error)
}

// At returns the approval as it stands at now: a pending or approved
// approval whose expiry has passed is expired.
func (a Approval) At(now time.Time) Approval {
	if (a.Status == ApprovalPending || a.Status == ApprovalApproved) && !now.Before(a.Expires) {
		a.Status = ApprovalExpired
	}
	return a
}

// live reports whether Create returns a instead of recording a new one for
// a call with request id rid.
func (a Approval) live(now time.Time, rid string) bool {
	switch a.At(now).Status {
	case ApprovalPending, ApprovalApproved:
		return true
	case ApprovalDenied:
		return now.Before(a.Expires)
	case ApprovalUsed:
		return rid != "" && a.UsedBy == rid
	}
	return false
}

// Bounds of the in-memory approvals. A principal holds at most
// DefaultApprovalLimit approvals: one more drops that principal's oldest,
// never another principal's. At DefaultApprovalGlobalLimit in all, one more
// drops the oldest of the principal holding the most. Dropping an approval
// can only make a call ask again; a denial is never dropped before it
// expires.
//
// The inputs of a principal's approvals, from their creation to their
// expiry, hold at most DefaultApprovalBytes, and those of all principals
// DefaultApprovalGlobalBytes: an approval beyond either is refused
// ([ErrApprovalCapacity]), never another principal's dropped, so that 200
// calls with an input of 1 MiB each keep 4 MiB, not 200. An approval
// that expired gives its bytes back, and its input (Get then returns it
// without).
const (
	DefaultApprovalLimit       = 1_000
	DefaultApprovalGlobalLimit = 10_000
	DefaultApprovalBytes       = 4 << 20
	DefaultApprovalGlobalBytes = 64 << 20
)

// DefaultApprovalPage is how many approvals List returns when not told.
const DefaultApprovalPage = 50

// memoryApprovals is the in-memory [ApprovalStore].
type memoryApprovals struct {
	mu     sync.Mutex
	byID   map[string]*Approval
	byKey  map[approvalKey]string
	order  []string            // ids, oldest first; some may be gone from byID
	owned  map[string][]string // ids by principal, oldest first; some may be gone
	held   map[string]int      // approvals kept, by principal
	limit  int                 // per principal
	global int
	now    func() time.Time

	// The bytes of inputs held, by approval id, by principal and in all;
	// an approval is counted from its creation until it expires or is
	// dropped.
	sizes                  map[string]int
	bytes                  map[string]int
	total                  int
	byteLimit, globalBytes int
}

// NewMemoryApprovals returns the in-memory [ApprovalStore] that a builder
// uses by default: approvals of this process only, within
// [DefaultApprovalLimit] per principal and [DefaultApprovalGlobalLimit] in
// all, each kept until [ApprovalRetention] after its expiry.
func NewMemoryApprovals() ApprovalStore {
	return newMemoryApprovals(DefaultApprovalLimit, DefaultApprovalGlobalLimit, DefaultApprovalBytes, DefaultApprovalGlobalBytes)
}

func newMemoryApprovals(limit, global, byteLimit, globalBytes int) *memoryApprovals {
	return &memoryApprovals{byID: map[string]*Approval{}, byKey: map[approvalKey]string{}, owned: map[string][]string{}, held: map[string]int{},
		limit: limit, global: global, now: time.Now,
		sizes: map[string]int{}, bytes: map[string]int{}, byteLimit: byteLimit, globalBytes: globalBytes}
}

// release gives back the bytes of approval id's input, if counted. The
// caller holds mu.
func (m *memoryApprovals) release(id, principal string) {
	n, ok := m.sizes[id]
	if !ok {
		return
	}
	delete(m.sizes, id)
	m.total -= n
	if m.bytes[principal] -= n; m.bytes[principal] <= 0 {
		delete(m.bytes, principal)
	}
}

// releaseExpired gives back the bytes and the inputs of the expired
// approvals among ids. The caller holds mu.
func (m *memoryApprovals) releaseExpired(ids func(yield func(string) bool), now time.Time) {
	for id := range ids {
		if a, ok := m.byID[id]; ok && !now.Before(a.Expires) {
			m.release(id, a.Principal)
			a.Input = nil
		}
	}
}

// roomForBytes reports [ErrApprovalCapacity] when an input of n bytes
// would take principal, or the store, beyond its bound, once the expired
// approvals gave theirs back. The caller holds mu.
func (m *memoryApprovals) roomForBytes(principal string, n int, now time.Time) error {
	if m.bytes[principal]+n > m.byteLimit {
		m.releaseExpired(slices.Values(m.owned[principal]), now)
		if m.bytes[principal]+n > m.byteLimit {
			return fmt.Errorf("store: principal %q: %w", principal, ErrApprovalCapacity)
		}
	}
	if m.total+n > m.globalBytes {
		m.releaseExpired(maps.Keys(m.sizes), now)
		if m.total+n > m.globalBytes {
			return fmt.Errorf("store: all principals: %w", ErrApprovalCapacity)
		}
	}
	return nil
}

// drop forgets an approval. The caller holds mu.
func (m *memoryApprovals) drop(a *Approval) {
	m.release(a.ID, a.Principal)
	delete(m.byID, a.ID)
	if m.byKey[a.key()] == a.ID {
		delete(m.byKey, a.key())
	}
	if m.held[a.Principal]--; m.held[a.Principal] == 0 {
		delete(m.held, a.Principal)
		delete(m.owned, a.Principal)
	}
}

// prune drops the approvals past their retention. The caller holds mu.
func (m *memoryApprovals) prune(now time.Time) {
	n := 0
	for ; n < len(m.order); n++ {
		a, ok := m.byID[m.order[n]]
		if !ok {
			continue // dropped to make room
		}
		if now.Before(a.Expires.Add(ApprovalRetention)) {
			break
		}
		m.drop(a)
	}
	m.order = m.order[n:]
}

// dropOldestOf drops the oldest approval of a principal that is not a
// denial in force: a denial stays until it expires, whatever the
// requester sends afterwards, or a flood of calls would erase it and the
// denied call would ask again. A principal holding nothing but denials
// keeps them all: each is a person's decision, made one at a time. The
// caller holds mu.
func (m *memoryApprovals) dropOldestOf(principal string, now time.Time) {
	ids := m.owned[principal]
	for len(ids) > 0 {
		if _, ok := m.byID[ids[0]]; ok {
			break
		}
		ids = ids[1:] // dropped already
	}
	m.owned[principal] = ids
	for i, id := range ids {
		a, ok := m.byID[id]
		if !ok || (a.Status == ApprovalDenied && now.Before(a.Expires)) {
			continue
		}
		m.owned[principal] = append(ids[:i:i], ids[i+1:]...)
		m.drop(a)
		return
	}
}

// compact drops from the order lists the ids of approvals dropped to make
// room, once they outnumber the kept ones, so that a flood of approvals
// cannot grow the lists beyond twice the bounds. The caller holds mu.
func (m *memoryApprovals) compact(principal string) {
	kept := func(ids []string) []string {
		return slices.DeleteFunc(ids, func(id string) bool { _, ok := m.byID[id]; return !ok })
	}
	if len(m.order) > 2*len(m.byID)+64 {
		m.order = kept(m.order)
	}
	if ids := m.owned[principal]; len(ids) > 2*m.held[principal]+64 {
		m.owned[principal] = kept(ids)
	}
}

// makeRoom drops an approval when the principal, or the store, is full.
// The caller holds mu.
func (m *memoryApprovals) makeRoom(principal string, now time.Time) {
	switch {
	case m.held[principal] >= m.limit:
		m.dropOldestOf(principal, now)
	case len(m.byID) >= m.global:
		// The largest holder holds at least its fair share: a principal
		// under it never loses an approval to another's traffic.
		largest := principal
		for p, n := range m.held {
			if n > m.held[largest] {
				largest = p
			}
		}
		m.dropOldestOf(largest, now)
	}
}

func copyApproval(a *Approval) Approval {
	c := *a
	c.Input = slices.Clone(a.Input)
	return c
}

func (m *memoryApprovals) Create(_ context.Context, a Approval) (Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.prune(now)
	if id, ok := m.byKey[a.key()]; ok {
		if cur := m.byID[id]; cur != nil && cur.live(now, a.RequestID) {
			return copyApproval(cur).At(now), nil
		}
	}
	if err := m.roomForBytes(a.Principal, len(a.Input), now); err != nil {
		return Approval{}, err
	}
	m.makeRoom(a.Principal, now)
	m.sizes[a.ID] = len(a.Input)
	m.bytes[a.Principal] += len(a.Input)
	m.total += len(a.Input)
	a.Status = ApprovalPending
	c := copyApproval(&a)
	m.byID[a.ID] = &c
	m.byKey[a.key()] = a.ID
	m.order = append(m.order, a.ID) // expiries grow with creation: one timeout for all
	m.owned[a.Principal] = append(m.owned[a.Principal], a.ID)
	m.held[a.Principal]++
	m.compact(a.Principal)
	return copyApproval(&c), nil
}

func (m *memoryApprovals) Get(_ context.Context, id string) (Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, now, err := m.lookup(id)
	if err != nil {
		return Approval{}, err
	}
	return copyApproval(a).At(now), nil
}

// lookup returns the approval with that id, and the time it stands at.
// The caller holds mu.
func (m *memoryApprovals) lookup(id string) (*Approval, time.Time, error) {
	now := m.now()
	m.prune(now)
	a, ok := m.byID[id]
	if !ok {
		return nil, now, ErrApprovalNotFound
	}
	return a, now, nil
}

func (m *memoryApprovals) List(_ context.Context, after string, limit int) ([]Approval, error) {
	if limit <= 0 {
		limit = DefaultApprovalPage
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.prune(now)
	i := len(m.order) - 1
	if after != "" {
		if _, ok := m.byID[after]; !ok {
			return nil, nil
		}
		for i >= 0 && m.order[i] != after {
			i--
		}
		i--
	}
	var out []Approval
	for ; i >= 0 && len(out) < limit; i-- {
		if a, ok := m.byID[m.order[i]]; ok {
			s := *a
			s.Input = nil // a summary
			out = append(out, s.At(now))
		}
	}
	return out, nil
}

func (m *memoryApprovals) Decide(_ context.Context, id string, approve bool, approver string) (Approval, error) {
	return m.transition(id, ApprovalPending, func(a *Approval, now time.Time) {
		a.Status, a.Decided, a.Approver = ApprovalDenied, now, approver
		if approve {
			a.Status = ApprovalApproved
		}
	})
}

func (m *memoryApprovals) Consume(_ context.Context, id, requestID string) (Approval, error) {
	return m.transition(id, ApprovalApproved, func(a *Approval, _ time.Time) {
		a.Status, a.UsedBy = ApprovalUsed, requestID
	})
}

// transition changes an approval that stands at from, and not expired.
func (m *memoryApprovals) transition(id string, from ApprovalStatus, change func(*Approval, time.Time)) (Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, now, err := m.lookup(id)
	if err != nil {
		return Approval{}, err
	}
	if a.At(now).Status != from {
		return copyApproval(a).At(now), ErrApprovalState
	}
	change(a, now)
	return copyApproval(a), nil
}
