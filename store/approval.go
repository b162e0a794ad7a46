package store

import (
	"context"
	"errors"
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
	// List returns the approvals kept, newest first.
	List(ctx context.Context) ([]Approval, error)
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
const (
	DefaultApprovalLimit       = 1_000
	DefaultApprovalGlobalLimit = 10_000
)

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
}

// NewMemoryApprovals returns the in-memory [ApprovalStore] that a builder
// uses by default: approvals of this process only, within
// [DefaultApprovalLimit] per principal and [DefaultApprovalGlobalLimit] in
// all, each kept until [ApprovalRetention] after its expiry.
func NewMemoryApprovals() ApprovalStore {
	return newMemoryApprovals(DefaultApprovalLimit, DefaultApprovalGlobalLimit)
}

func newMemoryApprovals(limit, global int) *memoryApprovals {
	return &memoryApprovals{byID: map[string]*Approval{}, byKey: map[approvalKey]string{}, owned: map[string][]string{}, held: map[string]int{},
		limit: limit, global: global, now: time.Now}
}

// drop forgets an approval. The caller holds mu.
func (m *memoryApprovals) drop(a *Approval) {
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
	m.makeRoom(a.Principal, now)
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

func (m *memoryApprovals) List(context.Context) ([]Approval, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.prune(now)
	out := make([]Approval, 0, len(m.byID))
	for i := len(m.order) - 1; i >= 0; i-- {
		if a, ok := m.byID[m.order[i]]; ok {
			out = append(out, copyApproval(a).At(now))
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
