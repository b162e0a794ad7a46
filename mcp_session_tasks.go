package carmy

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// In a session (2025-11-25), MCP's tasks are experimental and take their
// own methods: a tools/call with params.task answers with the task,
// tasks/get reads it, tasks/result waits for its end and answers the
// call's result, tasks/list pages the caller's tasks and tasks/cancel
// stops one. A question the tool asks goes to the session as an
// elicitation, and the task is input_required until it is answered, as it
// is while its approval waits for a person.

// ListTasks returns a page of id's tasks, newest first, after the task
// whose id is cursor; an id that is none of the caller's tasks is no
// cursor.
func (d mcpDoor) ListTasks(ctx context.Context, id mcpserve.Identity, cursor string, limit int) ([]*mcpserve.TaskState, string, error) {
	if cursor != "" {
		if _, err := d.r.readTask(ctx, cursor, id.Principal); CodeOf(err) == CodeNotFound {
			return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: cursor " + cursor + " is not one this server gave"}
		} else if err != nil {
			return nil, "", err
		}
	}
	page, err := d.r.tasks.store.ListTasks(ctx, id.Principal, cursor, limit+1)
	if err != nil {
		return nil, "", d.r.taskStoreError(ctx, err)
	}
	next := ""
	if len(page) > limit {
		page, next = page[:limit], page[limit-1].ID
	}
	out := make([]*mcpserve.TaskState, len(page))
	for i, rec := range page {
		out[i] = d.taskState(ctx, rec)
	}
	return out, next, nil
}

// WaitTask waits for id's task to end, or for ctx.
func (d mcpDoor) WaitTask(ctx context.Context, id mcpserve.Identity, task string) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	for err == nil && !rec.Status.Final() {
		rec, err = d.r.awaitTask(ctx, rec)
	}
	return d.awaited(ctx, rec, err)
}

// AwaitTask returns id's task once it changed from its version, or ctx's
// error.
func (d mcpDoor) AwaitTask(ctx context.Context, id mcpserve.Identity, task string, version int64) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	if err == nil && rec.Version == version && !rec.Status.Final() {
		rec, err = d.r.awaitTask(ctx, rec)
	}
	return d.awaited(ctx, rec, err)
}

// awaited is the door's answer for a task read or awaited: its state, not
// found, or the error.
func (d mcpDoor) awaited(ctx context.Context, rec store.Task, err error) (*mcpserve.TaskState, bool, error) {
	switch CodeOf(err) {
	case "":
		return d.taskState(ctx, rec), true, nil
	case CodeNotFound:
		return nil, false, nil
	}
	return nil, false, err
}

var _ mcpserve.SessionTasks = mcpDoor{}
