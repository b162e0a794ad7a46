package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// TaskSupport says whether a tool's calls may run as tasks: calls that
// outlive their request ([Registry.Start]).
type TaskSupport uint8

const (
	// TaskOptional: a call runs as a task when its caller asks, and
	// synchronously otherwise. The default.
	TaskOptional TaskSupport = iota
	// TaskForbidden: a call never runs as a task. Over HTTP, a request
	// that prefers an asynchronous answer is answered synchronously;
	// [Registry.Start] refuses.
	TaskForbidden
	// TaskRequired: a call runs only as a task; a synchronous call is
	// refused with [CodeInvalidInput].
	TaskRequired
)

// String returns "optional", "forbidden" or "required", as MCP's
// execution.taskSupport has them.
func (s TaskSupport) String() string {
	switch s {
	case TaskForbidden:
		return "forbidden"
	case TaskRequired:
		return "required"
	}
	return "optional"
}

// MarshalText implements [encoding.TextMarshaler].
func (s TaskSupport) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler].
func (s *TaskSupport) UnmarshalText(text []byte) error {
	switch string(text) {
	case "optional":
		*s = TaskOptional
	case "forbidden":
		*s = TaskForbidden
	case "required":
		*s = TaskRequired
	default:
		return fmt.Errorf("unknown task support %q; want optional, forbidden or required", text)
	}
	return nil
}

// DefaultTaskTTL is how long a finished task is kept for its caller to
// read, unless [Builder.TaskTTL] says otherwise.
const DefaultTaskTTL = time.Hour

// TaskTTL sets how long a finished task (completed, failed or cancelled)
// is kept for its caller to read; the default is [DefaultTaskTTL]. It is
// task_ttl in carmy.toml.
func (b *Builder) TaskTTL(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.TaskTTL(%v) must be positive", d)
		return b
	}
	b.taskTTL = d
	return b
}

// TaskStatus is where a [Task] stands: the store's [store.TaskStatus],
// one type for a task's state wherever it is read. Its Final method
// reports whether the status is completed, failed or cancelled.
type TaskStatus = store.TaskStatus

// The states of a task: working, waiting for a person (input_required),
// then completed, failed or cancelled, which are final.
const (
	TaskWorking       = store.TaskWorking
	TaskInputRequired = store.TaskInputRequired
	TaskCompleted     = store.TaskCompleted
	TaskFailed        = store.TaskFailed
	TaskCancelled     = store.TaskCancelled
)

// TaskProgress is the last progress a task's tool reported with
// [Context.Progress].
type TaskProgress struct {
	Done    float64 `json:"done"`
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}

// Task is a call that outlives its request, as read by its principal: its
// fields are as of when it was read ([Registry.Start], [Registry.Task]),
// and [Task.Wait] and [Task.Cancel] set them to the task as they last read
// it. A Task is for one goroutine at a time; another goroutine reads the
// same task with [Registry.Task].
type Task struct {
	ID     string
	Tool   string
	Status TaskStatus
	// ApprovalID is the approval a task that is input_required waits
	// for: a person approves or denies it, on any host, and the task
	// moves on.
	ApprovalID string
	// Questions are those the tool asked with [Context.Elicit] and waits
	// for, sorted by id, while the task is input_required: answer them
	// with [Task.Answer].
	Questions []TaskQuestion
	// Progress is the last progress the tool reported, nil for none.
	Progress *TaskProgress
	Created  time.Time
	Updated  time.Time

	r         *Registry
	principal string
	rec       store.Task
}

// Start runs a call as a task: it goes through the pipeline of
// [Registry.Execute] (middleware, permissions, validation, confirmation,
// idempotency, audit) on its own, detached from ctx, under the tool's
// timeout, and Start returns once the call passed its checks (it waits for
// its tool's turn, or runs), waits for a person, or has finished. A call
// refused by its checks (unknown tool, permission, invalid input) is
// Start's error, and leaves no task behind; one refused later (busy) fails
// its task, and frees its request id for a retry.
//
// A call of a tool that needs confirmation, without a grant, waits for a
// person's decision as long as its approval lives: the task is
// input_required, its ApprovalID the approval; once a person approves on
// any door or host, the call runs; a denial fails the task with the
// refusal a call gets.
//
// A tool that asks with [Context.Elicit] waits for the answer: the task is
// input_required, with the question in its Questions, until someone
// answers it on any host ([Task.Answer]); then the tool goes on.
//
// A task started with a request id is that call: starting it again (on
// any host sharing the store) answers the same task and runs nothing. The
// host running a task renews its lease; a task whose host stopped is
// failed, with details.reason "host_lost", once its lease lapses, and is
// never run again by carmy. [Registry.Close] stops the tasks the registry
// runs, as a host that dies would; a host's shutdown ([Builder.Listen],
// [Builder.Run]) lets them finish within its drain timeout, and fails
// those still running then at once, with details.reason "shutdown". One
// server's shutdown ([Registry.Serve]) leaves them running.
func (r *Registry) Start(ctx context.Context, c Call) (*Task, error) {
	t, ok := r.tab().tools[c.Tool]
	if !ok {
		return nil, r.unknownTool(ctx, c.Tool, Identity{Principal: c.Principal, Session: c.Session, Permissions: c.Permissions, Metadata: c.Metadata})
	}
	if t.meta.Tasks == TaskForbidden {
		return nil, Errorf(CodeInvalidInput, "%s does not run as a task: call it synchronously", t.meta.Name)
	}
	return r.startTask(ctx, t, c)
}

// Task reads the task with that id as the principal the options name
// ([WithPrincipal]): a task is its principal's alone, and any other
// principal's id, like an unknown one, is [CodeNotFound].
func (r *Registry) Task(ctx context.Context, id string, opts ...CallOption) (*Task, error) {
	var c Call
	for _, o := range opts {
		o(&c)
	}
	rec, err := r.readTask(ctx, id, c.Principal)
	if err != nil {
		return nil, err
	}
	return r.taskOf(rec, c.Principal), nil
}

// Wait returns the task's outcome once it is final, or ctx's error when
// ctx is done first: the result of a completed task, the [*Error] of a
// failed or cancelled one, as a call returns them.
func (t *Task) Wait(ctx context.Context) (Result, error) {
	rec := t.rec
	for !store.TaskStatus(rec.Status).Final() {
		var err error
		rec, err = t.r.awaitTask(ctx, rec)
		if err != nil {
			return Result{}, err
		}
	}
	t.refresh(rec)
	return taskOutcome(rec)
}

// Cancel asks the host running the task to stop it, and returns once the
// task is final or ctx is done. Its outcome is then cancelled (or what it
// had come to meanwhile); a task that is final already is not changed,
// and Cancel says so with [CodeConflict].
func (t *Task) Cancel(ctx context.Context) error {
	rec, err := t.r.cancelTask(ctx, t.ID, t.principal)
	if err != nil {
		return err
	}
	for !rec.Status.Final() {
		if rec, err = t.r.awaitTask(ctx, rec); err != nil {
			return err
		}
	}
	t.refresh(rec)
	return nil
}

// refresh sets t's fields from rec.
func (t *Task) refresh(rec store.Task) { *t = *t.r.taskOf(rec, t.principal) }

// taskOf is the task of record rec as principal reads it.
func (r *Registry) taskOf(rec store.Task, principal string) *Task {
	t := &Task{ID: rec.ID, Tool: rec.Tool, Status: TaskStatus(rec.Status), ApprovalID: rec.ApprovalID,
		Questions: taskQuestions(rec), Created: rec.Created, Updated: rec.Updated, r: r, principal: principal, rec: rec}
	if len(rec.Progress) > 0 {
		var p TaskProgress
		if json.Unmarshal(rec.Progress, &p) == nil {
			t.Progress = &p
		}
	}
	return t
}

// taskOutcome is the outcome of a final task, as a call's.
func taskOutcome(rec store.Task) (Result, error) {
	if rec.Status == store.TaskCompleted {
		return Result{ExecutionID: rec.ExecutionID, Output: rec.Output}, nil
	}
	return Result{}, taskError(rec)
}

// taskError is the error of a failed or cancelled task.
func taskError(rec store.Task) *Error {
	if rec.Lost {
		return &Error{Code: CodeUnavailable,
			Message: fmt.Sprintf("the host running task %s of %s stopped before the call ended; it is not run again, and whether it took effect is unknown", rec.ID, rec.Tool),
			Details: map[string]any{"reason": "host_lost", "task_id": rec.ID}}
	}
	if len(rec.Error) == 0 {
		return &Error{Code: CodeInternal, Message: "task " + rec.ID + " ended without an outcome", Retryable: true}
	}
	return replayError(rec.Error)
}

// taskStoreError explains a failure of the task store.
func (r *Registry) taskStoreError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return Errorf(CodeCancelled, "the caller gave up waiting for the task")
	}
	if errors.Is(err, store.ErrTaskCapacity) {
		return &Error{Code: CodeUnavailable, Message: "this caller holds as many tasks as the server keeps; wait for some to finish and expire, then try again",
			Retryable: true, Details: map[string]any{"reason": "capacity"}, Err: err}
	}
	r.logger.Error("carmy: task store failed", "error", err)
	return &Error{Code: CodeUnavailable, Message: "tasks are unavailable now; try again", Retryable: true, Err: err}
}

// TaskQuestion is a question a task's tool asked with [Context.Elicit] and
// waits for: the task is input_required until it has its answer
// ([Task.Answer]).
type TaskQuestion struct {
	// ID names the question in its answer: the snake_case name of the
	// form's type (confirm for Confirm), with _2, _3 for the same form
	// asked again in one run.
	ID string
	// Message is what the tool asks.
	Message string
	// Schema is the JSON Schema of the form whose fields the answer holds.
	Schema json.RawMessage
}

// TaskAnswer is an answer to a [TaskQuestion], as an MCP client's answer
// to an elicitation: Action "accept" with the form's fields in Content,
// or "decline" or "cancel" (the person would not answer), for which the
// tool's [Context.Elicit] returns false and no error.
type TaskAnswer struct {
	// Action is "accept", "decline" or "cancel".
	Action string
	// Content holds the form's fields for "accept": a struct or map that
	// encodes to a JSON object. The tool checks them against its form.
	Content any
}

// Answer gives the question the task waits for under id its answer, and
// sets t's fields to the task as it then stands. The answer is kept on the
// task in the store: the tool, on whichever host runs it, takes it and
// goes on. Any host sharing the store takes answers, as POST
// /tasks/{id}/input does over HTTP.
//
// An answer with another action, or whose content is not an object, is
// [CodeInvalidInput]; an answer to a question the task does not wait for
// (never asked, answered already, or the task moved on) is
// [CodeConflict]. Both change nothing. Answer is safe to call while
// another goroutine answers another of the task's questions, on its own
// [*Task].
func (t *Task) Answer(ctx context.Context, id string, a TaskAnswer) error {
	raw, err := json.Marshal(struct {
		Action  string `json:"action"`
		Content any    `json:"content,omitempty"`
	}{a.Action, a.Content})
	if err != nil {
		return &Error{Code: CodeInvalidInput, Message: fmt.Sprintf("the answer to %q cannot be encoded as JSON", id), Err: err}
	}
	answers, err := taskAnswers(fmt.Appendf(nil, "{%q:%s}", id, raw))
	if err != nil {
		return err
	}
	taken, err := t.r.keepAnswers(ctx, t.ID, t.principal, answers)
	if err != nil {
		return err
	}
	rec, err := t.r.readTask(ctx, t.ID, t.principal)
	if err != nil {
		return err
	}
	t.refresh(rec)
	if !taken {
		return &Error{Code: CodeConflict, Message: fmt.Sprintf("task %s does not wait for an answer to %q: nothing changed", t.ID, id),
			Details: map[string]any{"task_id": t.ID, "status": string(rec.Status)}}
	}
	return nil
}

// taskQuestions are the questions kept on rec, sorted by id; nil for none.
func taskQuestions(rec store.Task) []TaskQuestion {
	if rec.Status != store.TaskInputRequired || len(rec.Questions) <= len("{}") {
		return nil
	}
	// The questions are kept as MCP's inputRequests: by question id, a
	// request's method and its params.
	var asked map[string]struct {
		Method string `json:"method"`
		Params struct {
			Message         string `json:"message"`
			RequestedSchema any    `json:"requestedSchema"`
		} `json:"params"`
	}
	if json.Unmarshal(rec.Questions, &asked) != nil {
		return nil
	}
	var qs []TaskQuestion
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		p := asked[id]
		if p.Method != "elicitation/create" {
			continue
		}
		q := TaskQuestion{ID: id, Message: p.Params.Message}
		if p.Params.RequestedSchema != nil {
			q.Schema, _ = json.Marshal(p.Params.RequestedSchema)
		}
		qs = append(qs, q)
	}
	return qs
}

// taskAnswers reads the body of POST /tasks/{id}/input: answers by
// question id, each an elicitation result with a known action.
func taskAnswers(body []byte) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, Errorf(CodeInvalidInput, `the answers must be a JSON object by question id, such as {"confirm":{"action":"accept","content":{"sure":true}}}`)
	}
	out := make(map[string]json.RawMessage, len(raw))
	for _, q := range slices.Sorted(maps.Keys(raw)) { // the first problem, the same each time
		var a answer
		if err := json.Unmarshal(raw[q], &a); err != nil {
			return nil, Errorf(CodeInvalidInput, "the answer to %q is not an object with an action and its content", q)
		}
		switch a.Action {
		case "accept", "decline", "cancel":
		default:
			return nil, Errorf(CodeInvalidInput, "the answer to %q has the action %q; want accept, decline or cancel", q, a.Action)
		}
		out[q] = raw[q]
	}
	return out, nil
}
