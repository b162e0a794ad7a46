package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// memoryTasks is the in-memory [TaskStore].
type memoryTasks struct {
	mu      sync.Mutex
	byID    map[string]*Task
	byKey   map[Key]string           // request ids, by principal, tool and request id
	owned   map[string][]string      // ids by principal, oldest first
	changed map[string]chan struct{} // by task: closed at its next change
	limit   int
	bytes   int
	now     func() time.Time
	pruned  time.Time
}

// NewMemoryTasks returns the in-memory [TaskStore] that a registry uses
// when its idempotency store keeps no tasks: the tasks of this process
// only, within [DefaultTaskLimit] tasks and [DefaultTaskBytes] bytes per
// principal, each kept for its TTL once final.
func NewMemoryTasks() TaskStore { return newMemoryTasks(DefaultTaskLimit, DefaultTaskBytes) }

func newMemoryTasks(limit, bytes int) *memoryTasks {
	return &memoryTasks{byID: map[string]*Task{}, byKey: map[Key]string{}, owned: map[string][]string{},
		changed: map[string]chan struct{}{}, limit: limit, bytes: bytes, now: time.Now}
}

// expired reports whether a task is past its TTL at now.
func expired(t *Task, now time.Time) bool {
	t2 := t.At(now)
	if !t2.Status.Final() {
		return false
	}
	end := t.Updated
	if t2.Lost {
		end = t.Lease
	}
	return !now.Before(end.Add(t.TTL))
}

// prune forgets the tasks past their TTL, at most once a second. The
// caller holds mu.
func (m *memoryTasks) prune(now time.Time, force bool) {
	if !force && now.Sub(m.pruned) < time.Second {
		return
	}
	m.pruned = now
	for p, ids := range m.owned {
		kept := ids[:0]
		for _, id := range ids {
			t := m.byID[id]
			if !expired(t, now) {
				kept = append(kept, id)
				continue
			}
			delete(m.byID, id)
			m.wake(id)
			k := Key{t.Principal, t.Tool, t.RequestID}
			if m.byKey[k] == id {
				delete(m.byKey, k)
			}
		}
		if len(kept) == 0 {
			delete(m.owned, p)
		} else {
			m.owned[p] = kept
		}
	}
}

// wake tells those awaiting task id to look again. The caller holds mu.
func (m *memoryTasks) wake(id string) {
	if ch, ok := m.changed[id]; ok {
		close(ch)
		delete(m.changed, id)
	}
}

// woken returns a channel closed at the next change of task id. The
// caller holds mu.
func (m *memoryTasks) woken(id string) <-chan struct{} {
	ch, ok := m.changed[id]
	if !ok {
		ch = make(chan struct{})
		m.changed[id] = ch
	}
	return ch
}

func copyTask(t *Task) Task {
	c := *t
	c.Output, c.Error, c.Progress, c.Questions = slices.Clone(t.Output), slices.Clone(t.Error), slices.Clone(t.Progress), slices.Clone(t.Questions)
	if t.Answers != nil {
		c.Answers = make(map[string][]byte, len(t.Answers))
		for id, a := range t.Answers {
			c.Answers[id] = slices.Clone(a)
		}
	}
	return c
}

func newTaskID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot make a task id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (m *memoryTasks) CreateTask(_ context.Context, t Task, lease time.Duration) (Task, bool, error) {
	id, err := newTaskID()
	if err != nil {
		return Task{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.prune(now, false)
	k := Key{t.Principal, t.Tool, t.RequestID}
	if t.RequestID != "" {
		if cur, ok := m.byKey[k]; ok {
			if c := m.byID[cur]; c != nil && !expired(c, now) {
				return copyTask(c).At(now), false, nil
			}
		}
	}
	t.ID, t.Status, t.Created, t.Updated, t.Lease, t.Version = id, TaskWorking, now, now, now.Add(lease), 1
	t.Lost, t.CancelRequested = false, false
	ids := m.owned[t.Principal]
	if len(ids) >= m.limit || m.sizeOf(ids)+t.Size() > m.bytes {
		m.prune(now, true)
		if ids = m.owned[t.Principal]; len(ids) >= m.limit || m.sizeOf(ids)+t.Size() > m.bytes {
			return Task{}, false, fmt.Errorf("%w: %d tasks of %d bytes kept", ErrTaskCapacity, len(ids), m.sizeOf(ids))
		}
	}
	c := copyTask(&t)
	m.byID[id] = &c
	if t.RequestID != "" {
		m.byKey[k] = id
	}
	m.owned[t.Principal] = append(ids, id)
	return copyTask(&c), true, nil
}

// sizeOf sums the sizes of tasks. The caller holds mu.
func (m *memoryTasks) sizeOf(ids []string) int {
	n := 0
	for _, id := range ids {
		n += m.byID[id].Size()
	}
	return n
}

func (m *memoryTasks) GetTask(_ context.Context, id string) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, now, err := m.lookup(id)
	if err != nil {
		return Task{}, err
	}
	return copyTask(t).At(now), nil
}

// lookup returns the task with that id and the time it stands at. The
// caller holds mu.
func (m *memoryTasks) lookup(id string) (*Task, time.Time, error) {
	now := m.now()
	m.prune(now, false)
	t, ok := m.byID[id]
	if !ok || expired(t, now) {
		return nil, now, ErrTaskNotFound
	}
	return t, now, nil
}

func (m *memoryTasks) ListTasks(_ context.Context, principal, before string, limit int) ([]Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.prune(now, false)
	ids := m.owned[principal]
	end := len(ids)
	if before != "" {
		end = slices.Index(ids, before)
		if end < 0 {
			return nil, nil
		}
	}
	var out []Task
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		if t := m.byID[ids[i]]; !expired(t, now) {
			s := t.Summary()
			out = append(out, copyTask(&s).At(now))
		}
	}
	return out, nil
}

func (m *memoryTasks) UpdateTask(_ context.Context, id string, u TaskUpdate) (Task, error) {
	var refused error
	got, err := m.change(id, func(t *Task, now time.Time) bool {
		if refused = m.fits(t, u); refused != nil {
			return false
		}
		if u.Lease > 0 {
			t.Lease = now.Add(u.Lease)
		}
		if u.Release {
			if k := (Key{t.Principal, t.Tool, t.RequestID}); m.byKey[k] == id {
				delete(m.byKey, k)
			}
		}
		if u.Output != nil {
			t.Output = slices.Clone(u.Output)
		}
		if u.Status == "" && u.ExecutionID == "" && u.Error == nil && u.Progress == nil && u.Questions == nil && len(u.Answers) == 0 {
			return false // a renewal, or an output kept before the task ends, wakes nobody
		}
		if u.Status != "" {
			t.Status, t.ApprovalID = u.Status, u.ApprovalID
		}
		if u.ExecutionID != "" {
			t.ExecutionID = u.ExecutionID
		}
		if u.Error != nil {
			t.Error = slices.Clone(u.Error)
		}
		if u.Progress != nil {
			t.Progress = slices.Clone(u.Progress)
		}
		if u.Questions != nil {
			t.Questions = slices.Clone(u.Questions)
		}
		for id, a := range u.Answers {
			if t.Answers == nil {
				t.Answers = map[string][]byte{}
			}
			t.Answers[id] = slices.Clone(a)
		}
		return true
	})
	if refused != nil {
		return Task{}, refused
	}
	return got, err
}

// fits returns an error wrapping ErrTaskCapacity when u would grow t and
// take its principal's bytes past the bound, unless u ends t without an
// output. The caller holds mu.
func (m *memoryTasks) fits(t *Task, u TaskUpdate) error {
	next := *t
	if u.Status != "" {
		next.Status = u.Status
	}
	if next.Status.Final() && u.Output == nil {
		return nil
	}
	for _, f := range []struct {
		to   *[]byte
		from []byte
	}{{&next.Output, u.Output}, {&next.Error, u.Error}, {&next.Progress, u.Progress}, {&next.Questions, u.Questions}} {
		if f.from != nil {
			*f.to = f.from
		}
	}
	if len(u.Answers) > 0 {
		next.Answers = maps.Clone(t.Answers)
		if next.Answers == nil {
			next.Answers = map[string][]byte{}
		}
		maps.Copy(next.Answers, u.Answers)
	}
	grown := next.Size() - t.Size()
	if grown <= 0 {
		return nil
	}
	if held := m.sizeOf(m.owned[t.Principal]); held+grown > m.bytes {
		return fmt.Errorf("%w: %d bytes held, %d more asked", ErrTaskCapacity, held, grown)
	}
	return nil
}

func (m *memoryTasks) CancelTask(_ context.Context, id string) (Task, error) {
	return m.change(id, func(t *Task, _ time.Time) bool {
		if t.CancelRequested {
			return false
		}
		t.CancelRequested = true
		return true
	})
}

// change applies apply to a task that is not final, nor lost; one that is
// is returned as it stands with ErrTaskState. A change apply reports grows
// the task's version and wakes those who await it.
func (m *memoryTasks) change(id string, apply func(t *Task, now time.Time) bool) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, now, err := m.lookup(id)
	if err != nil {
		return Task{}, err
	}
	if cur := t.At(now); cur.Status.Final() {
		return copyTask(t).At(now), ErrTaskState
	}
	if apply(t, now) {
		t.Updated = now
		t.Version++
		m.wake(id)
	}
	return copyTask(t), nil
}

func (m *memoryTasks) AwaitTask(ctx context.Context, id string, version int64) (Task, error) {
	for {
		m.mu.Lock()
		t, now, err := m.lookup(id)
		var cur Task
		var changed <-chan struct{}
		if err == nil {
			cur = copyTask(t).At(now)
			if cur.Version == version && !cur.Status.Final() {
				changed = m.woken(id)
			}
		}
		m.mu.Unlock()
		if err != nil || cur.Version != version || cur.Status.Final() {
			return cur, err
		}
		// Woken by a change, or when the lease passes, which makes the
		// task lost.
		timer := time.NewTimer(cur.Lease.Sub(now) + time.Millisecond)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return cur, ctx.Err()
		}
		timer.Stop()
	}
}
