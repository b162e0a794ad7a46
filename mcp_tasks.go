package carmy

import (
	"context"
	"encoding/json"
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// Over MCP (the tasks extension of the sessionless protocol), a call of a
// tool that supports tasks, from a client that declared the extension, is
// answered at once with its task, which the client reads (tasks/get, the
// result inlined once it ended), answers (tasks/update) and cancels
// (tasks/cancel). A tool's failure is a completed task whose result is an
// error, as a call's is; a failed task is one that ran into a failure of
// the server's (a panic, a host lost). A question the tool asks with
// Context.Elicit makes the task input_required until tasks/update answers
// it; so does a pending approval, until a person decides.

// reasonTaskRequired is the reason of the refusal of a synchronous call of
// a tool that runs only as a task, which MCP answers with its own error.
const reasonTaskRequired = "task_required"

// taskRequired is the protocol error of a synchronous call that err
// refused because its tool runs only as a task, if it is one: in a
// session, whose tasks are asked for with params.task, method not found.
func taskRequired(p *mcpserve.Peer, tool string, err error) (*jsonrpc.Error, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Details["reason"] != reasonTaskRequired {
		return nil, false
	}
	if !p.Sessionless() {
		return mcpserve.SessionTaskSupportError(tool, true), true
	}
	return mcpserve.TaskRequiredError(tool), true
}

// StartTask starts the call of mc as a task: its checks run first, as
// [Registry.Start]'s do, and a call they refuse is answered as a call.
func (d mcpDoor) StartTask(ctx context.Context, mc *mcpserve.Call) (*mcpserve.TaskState, mcpserve.Outcome, error) {
	r := d.r
	t := r.tools[mc.Tool]
	ctx, c, refused := d.callOf(ctx, mc)
	if refused != nil {
		return nil, *refused, nil
	}
	if err := checkRequestID(c.RequestID); err != nil {
		return nil, mcpOutcome(err), nil
	}
	task, err := r.startTaskFor(ctx, t, c, func(run *taskRun) taskPeer {
		return peerOf(mcpserve.TaskPeer(mc.Peer, func(questions mcp.InputRequestMap) { run.asking(ctx, questions) }))
	})
	if err != nil {
		return nil, mcpOutcome(err), nil
	}
	return d.taskState(ctx, task.rec), mcpserve.Outcome{}, nil
}

// GetTask reads id's task.
func (d mcpDoor) GetTask(ctx context.Context, id mcpserve.Identity, task string) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	if CodeOf(err) == CodeNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if req := mcpserve.RequestOf(ctx); req != nil {
		ctx = withHTTPRequest(ctx, req) // for the approval's link
	}
	return d.taskState(ctx, rec), true, nil
}

// UpdateTask hands id's task the answers to its questions, on any host:
// they reach the host that runs the task through the store.
func (d mcpDoor) UpdateTask(ctx context.Context, id mcpserve.Identity, task string, answers map[string]*mcp.ElicitResult) (bool, error) {
	raw := make(map[string]json.RawMessage, len(answers))
	for q, a := range answers {
		if a == nil {
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			return false, err
		}
		raw[q] = b
	}
	err := d.r.answerTask(ctx, task, id.Principal, raw)
	if CodeOf(err) == CodeNotFound {
		return false, nil
	}
	return err == nil, err
}

// CancelTask asks id's task to stop; one that ended is left as it is.
func (d mcpDoor) CancelTask(ctx context.Context, id mcpserve.Identity, task string) (bool, error) {
	_, err := d.r.cancelTask(ctx, task, id.Principal)
	switch CodeOf(err) {
	case "", CodeConflict: // a final task: nothing to cancel, which the protocol acknowledges all the same
		return true, nil
	case CodeNotFound:
		return false, nil
	}
	return false, err
}

// taskState is a task as the MCP door answers for it.
func (d mcpDoor) taskState(ctx context.Context, rec store.Task) *mcpserve.TaskState {
	r := d.r
	st := &mcpserve.TaskState{ID: rec.ID, Tool: rec.Tool, Status: string(rec.Status), Created: rec.Created, Updated: rec.Updated, TTL: rec.TTL, Version: rec.Version}
	t, known := r.tools[rec.Tool]
	switch rec.Status {
	case store.TaskCompleted:
		if rec.Output == nil {
			break // a list's summary: the outcome comes with the task alone
		}
		res, _ := taskOutcome(rec)
		out, err := mcpserve.Outcome{Output: res.Output, ExecutionID: res.ExecutionID}, error(nil)
		if known {
			out, err = d.outcome(t, res)
		}
		if err != nil {
			st.Status, st.Error = string(store.TaskFailed), &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's output cannot be read"}
			break
		}
		st.Outcome = &out
	case store.TaskFailed:
		e := taskError(rec)
		st.Message = e.Message
		if !serverFailure(rec, e) {
			// The tool failed: a result, as a call's failure is.
			st.Status, st.Outcome = string(store.TaskCompleted), &mcpserve.Outcome{Err: e}
			break
		}
		data, _ := jsonv2.Marshal(e)
		st.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: e.Message, Data: data}
	case store.TaskCancelled:
		st.Message = "the task was cancelled"
	case store.TaskInputRequired:
		if len(rec.Questions) > 2 { // more than {}
			var q mcp.InputRequestMap
			if err := json.Unmarshal(rec.Questions, &q); err == nil && len(q) > 0 {
				st.Questions = q
			}
		}
		if rec.ApprovalID != "" {
			st.Message = "waiting for a person to approve the call (approval " + rec.ApprovalID + ")"
			if u := r.approvalURL(ctx, rec.ApprovalID); u != "" {
				if st.Questions == nil {
					st.Questions = mcp.InputRequestMap{}
				}
				st.Questions["approval"] = &mcp.ElicitParams{Mode: "url", URL: u, ElicitationID: rec.ApprovalID,
					Message: "A person must approve this call of " + rec.Tool + " before it runs: open the link to decide."}
			}
		}
	}
	return st
}
