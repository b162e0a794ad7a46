package carmy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/store"
)

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
	var asked mcp.InputRequestMap
	if json.Unmarshal(rec.Questions, &asked) != nil {
		return nil
	}
	var qs []TaskQuestion
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		p, ok := asked[id].(*mcp.ElicitParams)
		if !ok {
			continue
		}
		q := TaskQuestion{ID: id, Message: p.Message}
		if p.RequestedSchema != nil {
			q.Schema, _ = json.Marshal(p.RequestedSchema)
		}
		qs = append(qs, q)
	}
	return qs
}
