package carmy

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

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

// A question a task's tool asks with Context.Elicit waits on the host that
// runs the task, but is kept on the task in the store, with the answers
// given to it: any host shows the question, and takes an answer, which
// reaches the host running the task through the store's notifications, as
// a cancel does.

// inboxOf makes the peer of a task of no MCP client (over HTTP, in Go),
// started with ctx: its tool's questions wait on the task, kept in the
// store for any host to show and answer.
func inboxOf(ctx context.Context) func(*taskRun) taskPeer {
	return func(run *taskRun) taskPeer {
		return peerOf(mcpserve.InboxPeer(func(questions mcp.InputRequestMap) { run.asking(ctx, questions) }))
	}
}

// askFailed is the error of Context.Elicit whose question got no answer:
// the call stopped while it waited (its deadline passed, or it was
// cancelled, as a task is), or the client could not ask.
func askFailed(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: "the call's deadline passed while it waited for its user's answer", Err: err}
	case ctx.Err() != nil:
		return &Error{Code: CodeCancelled, Message: "the call was cancelled while it waited for its user's answer", Err: err}
	}
	return &Error{Code: CodeUnavailable, Message: "the client could not ask its user for input", Retryable: true, Err: err}
}

// answerTask gives principal's task id answers, by question id, to the
// questions it waits for: each answer is kept on the task, for the host
// that runs it to take. An answer to a question the task does not wait
// for is ignored, as are all of them once the task moved on.
func (r *Registry) answerTask(ctx context.Context, id, principal string, answers map[string]json.RawMessage) error {
	_, err := r.keepAnswers(ctx, id, principal, answers)
	return err
}

// keepAnswers is answerTask, saying whether it kept any answer.
func (r *Registry) keepAnswers(ctx context.Context, id, principal string, answers map[string]json.RawMessage) (taken bool, err error) {
	rec, err := r.readTask(ctx, id, principal)
	if err != nil {
		return false, err
	}
	var asked map[string]json.RawMessage
	if rec.Status != store.TaskInputRequired || len(rec.Questions) == 0 || json.Unmarshal(rec.Questions, &asked) != nil {
		return false, nil
	}
	kept := map[string][]byte{}
	for q, a := range answers {
		if _, ok := asked[q]; ok && len(a) > 0 {
			kept[q] = a
		}
	}
	if len(kept) == 0 {
		return false, nil
	}
	_, err = r.tasks.store.UpdateTask(ctx, id, store.TaskUpdate{Answers: kept})
	switch {
	case errors.Is(err, store.ErrTaskState): // it ended meanwhile: nothing waits for the answers
		return false, nil
	case errors.Is(err, store.ErrTaskNotFound):
		return false, Errorf(CodeNotFound, "no task %q is visible to you", id)
	case err != nil:
		return false, r.taskStoreError(ctx, err)
	}
	return true, nil
}

// deliver hands the questions of the task's tool the answers kept on rec;
// those it already took, or to questions it did not ask, are ignored.
func (run *taskRun) deliver(rec store.Task) {
	if run.peer == nil || len(rec.Answers) == 0 {
		return
	}
	answers := make(map[string]*mcp.ElicitResult, len(rec.Answers))
	for q, b := range rec.Answers {
		var a mcp.ElicitResult
		if json.Unmarshal(b, &a) == nil {
			answers[q] = &a
		}
	}
	run.peer.Deliver(answers)
}

// asking records the questions the task's tool waits for (nil for none):
// the task is input_required while any waits.
func (run *taskRun) asking(ctx context.Context, questions mcp.InputRequestMap) {
	u := store.TaskUpdate{Status: store.TaskWorking, Questions: []byte("{}")}
	if questions != nil {
		u.Status = store.TaskInputRequired
		if len(questions) > 0 {
			b, err := json.Marshal(questions)
			if err != nil {
				run.r.logger.Warn("carmy: cannot record a task's questions", "task_id", run.id, "error", err)
			} else {
				u.Questions = b
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := run.update(ctx, u); err != nil {
		run.r.logger.Warn("carmy: cannot record a task's wait for input", "task_id", run.id, "error", err)
	}
}
