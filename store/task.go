package store

import (
	"context"
	"errors"
	"time"
)

// TaskStatus is where a [Task] stands.
type TaskStatus string

// The states of a task. A task is created working; it may wait for input
// (input_required) and work again any number of times, and ends completed,
// failed or cancelled, which are final.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// Final reports whether s is completed, failed or cancelled.
func (s TaskStatus) Final() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// Task is one call that outlives its request: its state, progress and
// outcome, kept so that any host can answer for it.
type Task struct {
	// ID is made by the store at CreateTask.
	ID        string
	Principal string
	Tool      string
	// RequestID is the request id of the call, if any: one principal's
	// task of one tool with one request id is created once.
	RequestID string
	// Digest is the hex SHA-256 of the call's canonical input, which a
	// second start with the same request id must match.
	Digest string
	// InputSize is the size in bytes of the call's input, which the host
	// running the task holds: it counts toward the principal's bound
	// until the task has an output or is final.
	InputSize int
	Status    TaskStatus
	Created   time.Time
	Updated   time.Time
	// Lease is when the task, unless it is final, is taken for lost: the
	// host that runs it renews it while it lives. A task whose lease
	// passed reads as failed, with Lost set.
	Lease time.Time
	// TTL is how long the task is kept once final (or lost).
	TTL time.Duration
	// ExecutionID names the execution that produced the outcome.
	ExecutionID string
	// Output is the JSON output of a completed task; Error the JSON error
	// of a failed or cancelled one. Progress is the last progress the
	// tool reported, as JSON.
	Output   []byte
	Error    []byte
	Progress []byte
	// ApprovalID is the approval an input_required task waits for.
	ApprovalID string
	// Questions are the questions an input_required task's tool asked
	// and waits for, as a JSON object by question id, which the host
	// running the task writes; nil or {} for none. Answers are the
	// answers given to them, by question id, each JSON, which any host
	// writes and the host running the task takes.
	Questions []byte
	Answers   map[string][]byte
	// CancelRequested: someone asked to cancel the task; the host running
	// it stops it.
	CancelRequested bool
	// Lost: the host running the task stopped renewing its lease before
	// the task ended. The task is failed; it never runs again.
	Lost bool
	// Version grows with every change of the task but its lease.
	Version int64
}

// TaskUpdate is a change to a task that is not final. Zero fields change
// nothing, except that a Status also sets ApprovalID (to "" for none).
type TaskUpdate struct {
	Status      TaskStatus
	ApprovalID  string
	ExecutionID string
	Output      []byte
	Error       []byte
	Progress    []byte
	// Questions replaces the task's questions. Answers are added to the
	// task's, each replacing an answer to the same question: answers given
	// on several hosts at once are all kept.
	Questions []byte
	Answers   map[string][]byte
	// Lease renews the task's lease to now plus Lease.
	Lease time.Duration
	// Release frees the task's request id: a later CreateTask with it
	// creates a new task. For a call refused before it started.
	Release bool
}

// Errors of a [TaskStore].
var (
	// ErrTaskNotFound: no task has that id, or it is gone.
	ErrTaskNotFound = errors.New("no such task")
	// ErrTaskState: the task is final (or lost), so it cannot change. The
	// task as it stands is returned with it.
	ErrTaskState = errors.New("the task is final")
	// ErrTaskCapacity is returned, wrapped, by CreateTask for a principal
	// that holds as many tasks, or as many bytes of tasks, as the store
	// allows, and by UpdateTask for a change that would take the
	// principal's bytes past the bound. Other principals are not affected.
	ErrTaskCapacity = errors.New("the principal holds as many tasks as the store allows")
)

// Bounds of a task store per principal, which the in-memory store keeps
// and which shared stores should keep: tasks kept (running, or final
// within their TTL), and the bytes of their inputs, outputs, errors,
// progress, questions and answers ([Task.Size]), counted whenever they
// grow.
const (
	DefaultTaskLimit = 1_000
	DefaultTaskBytes = 16 << 20
)

// TaskStore keeps tasks. It is an optional capability of an
// [IdempotencyStore]: a store that implements it keeps the tasks of every
// host that shares it, so that any host answers for any task; otherwise a
// registry keeps its tasks in this process ([NewMemoryTasks]).
// Implementations must be safe for concurrent use and pass the task suite
// in the storetest package.
//
// Every change but a lease renewal, and an output written alone (which a
// host keeps on its task before it ends the task, and readers show only
// once the task has ended), grows the task's Version and wakes those who
// await the task, on every host sharing the store. Such an output counts
// toward the principal's bytes at once.
type TaskStore interface {
	// CreateTask records t (working), giving it an id and a lease of
	// lease, unless t has a request id and the same principal's task of
	// the same tool with that request id is kept: then it returns that one,
	// false, and records nothing. A principal at its bound, or whose bytes
	// t would take past it, gets an error wrapping [ErrTaskCapacity].
	CreateTask(ctx context.Context, t Task, lease time.Duration) (Task, bool, error)
	// GetTask returns the task with that id, or [ErrTaskNotFound].
	GetTask(ctx context.Context, id string) (Task, error)
	// ListTasks returns up to limit of a principal's tasks, newest first,
	// those created before the task with id before ("" for the newest).
	// They are summaries ([Task.Summary]): no output, questions or
	// answers, so that a list never copies every output; GetTask returns
	// one task whole.
	ListTasks(ctx context.Context, principal, before string, limit int) ([]Task, error)
	// UpdateTask applies u to a task that is not final. A final status
	// starts the task's TTL. A final or lost task is returned unchanged
	// with [ErrTaskState]. An update that grows the task and would take
	// its principal's bytes past the bound changes nothing and returns an
	// error wrapping [ErrTaskCapacity]; one that ends the task without an
	// output is always applied, so that every task can end.
	UpdateTask(ctx context.Context, id string, u TaskUpdate) (Task, error)
	// CancelTask asks the host running a task to stop it. A final or lost
	// task is returned unchanged with [ErrTaskState].
	CancelTask(ctx context.Context, id string) (Task, error)
	// AwaitTask returns the task once its Version is not version, or once
	// it is final or lost, or with ctx's error and the task as last seen
	// when ctx is done first.
	AwaitTask(ctx context.Context, id string, version int64) (Task, error)
}

// At returns the task as it stands at now: one that is not final and whose
// lease passed is failed and lost.
func (t Task) At(now time.Time) Task {
	if !t.Status.Final() && !t.Lease.IsZero() && !now.Before(t.Lease) {
		t.Status, t.Lost, t.ApprovalID = TaskFailed, true, ""
	}
	return t
}

// Size is what a task counts against its principal's bound in bytes: its
// output, error, progress, questions and answers, and its input until it
// has an output or is final.
func (t Task) Size() int {
	n := len(t.ID) + len(t.Tool) + len(t.RequestID) + len(t.Output) + len(t.Error) + len(t.Progress) + len(t.Questions)
	for id, a := range t.Answers {
		n += len(id) + len(a)
	}
	if len(t.Output) == 0 && !t.Status.Final() {
		n += t.InputSize
	}
	return n
}

// Summary returns t without its output, questions and answers: what a
// list holds.
func (t Task) Summary() Task {
	t.Output, t.Questions, t.Answers = nil, nil, nil
	return t
}
