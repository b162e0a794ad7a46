package carmy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// A server that shuts down lets its tasks finish, within the same drain
// timeout as its calls; a task still running when the timeout passes is
// stopped and failed at once, details.reason "shutdown", rather than left
// for its lease to lapse (host_lost). A registry that closes without a
// shutdown stops its tasks as a host that dies does.

// reasonShutdown is the details.reason of a task that the server's
// shutdown stopped.
const reasonShutdown = "shutdown"

// taskRuns are the tasks a registry runs.
type taskRuns struct {
	mu   sync.Mutex
	runs map[*taskRun]struct{}
	// ended is closed, and replaced, each time a task ends.
	ended chan struct{}
}

// newTasks is what a registry needs for tasks kept in s.
func newTasks(s store.TaskStore, ttl, lease time.Duration) tasks {
	life, end := context.WithCancel(context.Background())
	return tasks{store: s, ttl: ttl, lease: lease, life: life, end: end,
		running: &taskRuns{runs: map[*taskRun]struct{}{}, ended: make(chan struct{})}}
}

func (t *taskRuns) add(run *taskRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs[run] = struct{}{}
}

func (t *taskRuns) remove(run *taskRun) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, run)
	close(t.ended)
	t.ended = make(chan struct{})
}

// drainTasks waits for the tasks the registry runs to end, until ctx is
// done; those still running then are stopped and failed with reason
// shutdown.
func (r *Registry) drainTasks(ctx context.Context) {
	t := r.tasks.running
	for {
		t.mu.Lock()
		n, ended := len(t.runs), t.ended
		left := make([]*taskRun, 0, n)
		if ctx.Err() != nil {
			for run := range t.runs {
				left = append(left, run)
			}
		}
		t.mu.Unlock()
		if n == 0 {
			return
		}
		if ctx.Err() != nil {
			for _, run := range left {
				run.shutDown()
			}
			return
		}
		select {
		case <-ended:
		case <-ctx.Done():
		}
	}
}

// shutDown fails the task, reason shutdown, and stops its call. A task
// whose tool never started is released: it did not run, and a retry with
// its request id starts anew. The outcome is written before the call is
// stopped, so that the call's own end (cancelled) is not taken for it.
func (run *taskRun) shutDown() {
	run.shut.Store(true)
	e := &Error{Code: CodeUnavailable, Details: map[string]any{"reason": reasonShutdown, "task_id": run.id}}
	u := store.TaskUpdate{Status: store.TaskFailed, Progress: run.lastProgress()}
	if run.executed.Load() {
		e.Message = fmt.Sprintf("the server shut down while task %s of %s ran; the call was stopped, and whether it took effect is unknown", run.id, run.t.meta.Name)
	} else {
		e.Message = fmt.Sprintf("the server shut down before task %s of %s ran; it did not run, and may be started again", run.id, run.t.meta.Name)
		e.Retryable, u.Release = true, true
	}
	u.Error = recordError(e)
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err := run.r.tasks.store.UpdateTask(ctx, run.id, u)
	switch {
	case errors.Is(err, store.ErrTaskState): // it ended meanwhile, as it ended
	case err != nil:
		run.r.logger.Error("carmy: cannot record that the shutdown stopped a task; it fails once its lease lapses", "task_id", run.id, "tool", run.t.meta.Name, "error", err)
	default:
		run.r.logger.Warn("carmy: the shutdown stopped a task still running after the drain timeout", "task_id", run.id, "tool", run.t.meta.Name)
	}
	run.stop()
}

// serverFailure reports whether a failed task's error is the server's
// (a panic, a host lost, a shutdown) rather than the tool's.
func serverFailure(rec store.Task, e *Error) bool {
	return rec.Lost || e.Code == CodeInternal || e.Details["reason"] == reasonShutdown
}
