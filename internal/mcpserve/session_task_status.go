package mcpserve

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// taskStatusNotification is the method of the notification of the
// session generation (2025-11-25) that tells a client its task's status
// changed.
const taskStatusNotification = "notifications/tasks/status"

// watchTask sends notify a notifications/tasks/status, with the task as
// its params, each time the status of id's task st changes, until the
// task ended (its final status the last notification), ctx ends, or a
// notification cannot be sent. It blocks until then: one goroutine per
// watched task, woken by the host's [SessionTasks.AwaitTask] rather than
// polling. A status the task passed through between two wake-ups is not
// notified: the client hears the status the task has, in order.
func (s *Server) watchTask(ctx context.Context, id Identity, st *TaskState, notify func(context.Context, *jsonrpc.Request) error) {
	tasks, ok := s.host.(SessionTasks)
	if !ok {
		return
	}
	last := st
	for !final(last.Status) {
		next, found, err := tasks.AwaitTask(ctx, id, last.ID, last.Version)
		if err != nil || !found {
			return
		}
		if next.Status != last.Status {
			b, err := json.Marshal(sessionTaskObject(next))
			if err != nil || notify(ctx, &jsonrpc.Request{Method: taskStatusNotification, Params: b}) != nil {
				return
			}
		}
		last = next
	}
}
