package carmy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// A task is a call run by the runtime on its own goroutine, detached from
// the request that started it. The task's record in the store is what
// every host reads; the host that runs the call keeps it: it renews the
// task's lease, writes the progress the tool reports, stops the call when
// someone asks the store to cancel it, and writes the outcome.

// defaultTaskLease is how long a task outlives its host's last renewal
// before it is taken for lost. The host renews it three times as often.
const defaultTaskLease = 30 * time.Second

// progressEvery bounds how often a task's progress is written to the
// store; the last progress is always written with the outcome.
const progressEvery = 250 * time.Millisecond

// tasks is what a registry needs for tasks.
type tasks struct {
	store store.TaskStore
	ttl   time.Duration
	lease time.Duration
	// running are the tasks this host runs, which a shutdown drains.
	running *taskRuns
}

// taskStore is where a registry keeps tasks: in the idempotency store when
// it keeps them too, else in memory.
func taskStore(idem store.IdempotencyStore) store.TaskStore {
	if s, ok := idem.(store.TaskStore); ok {
		return s
	}
	return store.NewMemoryTasks()
}

// taskRun is one task run by this host.
type taskRun struct {
	r  *Registry
	t  *tool
	id string
	// peer is the MCP client whose call started the task, whose questions
	// wait on the task; nil for other callers.
	peer taskPeer
	// input is the call's input, and form and digest its canonical form
	// and digest when the call has a request id ("" otherwise): taken as
	// the task started, for the pipeline (Request.canonical).
	input  []byte
	form   []byte
	digest string
	// adopt is the upstream's task its mounted tool reads, made by the
	// call handed off to this task; nil for every other task.
	adopt *handOff
	begun chan struct{} // closed once the call passed its checks, waits for a person, or ended
	once  sync.Once
	// refusal is the error of a call refused before it passed its checks,
	// set as begun is closed: Start returns it.
	refusal  error
	executed atomic.Bool // the tool started
	waited   bool        // the task waited for a person
	// stop stops the call; shut is set once the shutdown stopped it, and
	// wrote its outcome.
	stop context.CancelFunc
	shut atomic.Bool

	mu       sync.Mutex
	progress []byte
	// kept is the output keep wrote to the task, which finish need not
	// write again: set by the execution's worker, which a task whose
	// deadline passed no longer waits for.
	kept []byte
	poke chan struct{} // progress to write
}

// begin lets Start return: the call passed its checks (it waits for its
// turn, runs, or waits for a person), or ended.
func (run *taskRun) begin() { run.end(nil) }

// end lets Start return with refusal, unless it has returned already.
func (run *taskRun) end(refusal error) {
	run.once.Do(func() {
		run.refusal = refusal
		close(run.begun)
	})
}

// started is told by the runtime that the tool's execution starts.
func (run *taskRun) started() {
	run.executed.Store(true)
	run.begin()
}

// report keeps the progress a tool reports, for the keeper to write.
func (run *taskRun) report(done, total float64, msg string) {
	b, err := json.Marshal(TaskProgress{Done: done, Total: total, Message: msg})
	if err != nil {
		return // NaN or infinity: nothing a reader could decode
	}
	run.mu.Lock()
	run.progress = b
	run.mu.Unlock()
	select {
	case run.poke <- struct{}{}:
	default:
	}
}

func (run *taskRun) lastProgress() []byte {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.progress
}

// startTask records a task of call c, of no MCP client (over HTTP, in
// Go), and runs it: its tool's questions wait on the task (inboxOf).
func (r *Registry) startTask(ctx context.Context, t *tool, c Call) (*Task, error) {
	return r.startTaskFor(ctx, t, c, inboxOf(ctx), nil)
}

// startTaskFor is startTask for a call of an MCP client, whose peer for
// the task peerOf makes (nil for other callers).
//
// The call's request id is checked here, once, and its input's digest
// taken once, for the task and for the pipeline, which reads both from the
// task run.
//
// adopt, for a call handed off, is the upstream's task that the task's
// tool reads instead of calling it again; it is cancelled if the tool
// never runs (the task is refused, or the request id has a task already).
func (r *Registry) startTaskFor(ctx context.Context, t *tool, c Call, peerOf func(*taskRun) taskPeer, adopt *handOff) (task *Task, err error) {
	if adopt != nil {
		defer func() {
			if err != nil {
				adopt.abandon(ctx)
			}
		}()
	}
	if err := checkRequestID(c.RequestID); err != nil {
		return nil, err
	}
	var form []byte
	var digest string
	if c.RequestID != "" {
		// The pipeline's canonical form and digest; an input that has none
		// is refused there.
		if f, err := t.canonicalInput(c.Input); err == nil {
			form, digest = f, t.digestOf(f)
		}
	}
	rec, created, err := r.tasks.store.CreateTask(ctx, store.Task{Principal: c.Principal, Tool: t.meta.Name, RequestID: c.RequestID, Digest: digest,
		InputSize: len(c.Input), TTL: r.tasks.ttl}, r.tasks.lease)
	if err != nil {
		return nil, r.taskStoreError(ctx, err)
	}
	if !created && rec.Digest != digest {
		return nil, r.refused(ctx, t, &c, requestIDConflict(t, c.RequestID))
	}
	if !created {
		if adopt != nil {
			adopt.abandon(ctx)
		}
		return r.taskOf(rec, c.Principal), nil // that call, started before
	}
	run := &taskRun{r: r, t: t, id: rec.ID, input: c.Input, form: form, digest: digest, adopt: adopt, begun: make(chan struct{}), poke: make(chan struct{}, 1)}
	if peerOf != nil {
		run.peer = peerOf(run)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	run.stop = stop
	r.tasks.running.add(run)
	go run.run(runCtx, c)
	select {
	case <-run.begun:
		if run.refusal != nil {
			return nil, run.refusal
		}
	case <-ctx.Done(): // the task goes on; its caller reads it later
	}
	if cur, err := r.tasks.store.GetTask(ctx, rec.ID); err == nil {
		rec = cur
	}
	return r.taskOf(rec, c.Principal), nil
}

// run runs the task's call and writes its outcome. ctx carries the values
// of the request that started it, never its cancellation.
func (run *taskRun) run(ctx context.Context, c Call) {
	stop := run.stop
	defer run.r.tasks.running.remove(run)
	defer stop()
	// A registry that closes stops its tasks, as a host that dies does.
	defer context.AfterFunc(run.r.life, stop)()
	// The keepers stop with the call, or when the registry closes: a
	// closed host no longer vouches for its tasks.
	keepCtx, endKeep := context.WithCancel(run.r.life)
	var kept sync.WaitGroup
	kept.Add(2)
	go func() { defer kept.Done(); run.watch(keepCtx, stop) }()
	go func() { defer kept.Done(); run.renew(keepCtx, stop) }()
	res, err := run.call(ctx, c)
	if run.adopt != nil && !run.executed.Load() {
		run.adopt.abandon(ctx)
	}
	endKeep()
	kept.Wait()
	run.finish(res, err)
}

// call runs the call through the pipeline; a call that waits for a
// person's approval waits in it as long as the approval lives, and goes
// on once approved (taskAsker).
func (run *taskRun) call(ctx context.Context, c Call) (Result, error) {
	return run.r.dispatch(ctx, c, via{peer: run.peer, asker: taskAsker{run}}, run)
}

// update writes a change of the task's state.
func (run *taskRun) update(ctx context.Context, u store.TaskUpdate) error {
	if _, err := run.r.tasks.store.UpdateTask(ctx, run.id, u); err != nil {
		return run.r.taskStoreError(ctx, err)
	}
	return nil
}

// outputOf is the output of res as a task keeps it: JSON null for none.
func outputOf(res Result) []byte {
	if res.Output == nil {
		return []byte("null")
	}
	return res.Output
}

// outputTooLarge is the failure of a task whose output does not fit in
// its principal's bytes of tasks.
func outputTooLarge(t *tool, res Result, err error) *Error {
	return &Error{Code: CodeUnavailable, Err: err,
		Message: fmt.Sprintf("%s ran, but its output (%d bytes) does not fit in what this server keeps for this caller's tasks; it is not kept, and the call is not run again for its request id",
			t.meta.Name, len(res.Output)),
		Details: map[string]any{"reason": "output_too_large", "execution_id": res.ExecutionID, "output_bytes": len(res.Output)}}
}

// keep writes the output of a tool that succeeded to its task before the
// outcome is recorded for the call's request id, the task still working
// (it reads completed only once finish writes it, after the call's audit
// record). The store takes the output only if it fits in the principal's
// bytes of tasks; one that does not fit fails the call, output_too_large,
// and that failure is what the request id records: a retry with it, as a
// task or not, replays the failure and never runs the tool again. An
// output the store cannot take now is left for finish to write.
func (run *taskRun) keep(o outcome) outcome {
	if o.err != nil {
		return o
	}
	out := outputOf(o.res)
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err := run.r.tasks.store.UpdateTask(ctx, run.id, store.TaskUpdate{Output: out})
	switch {
	case err == nil:
		run.mu.Lock()
		run.kept = out
		run.mu.Unlock()
	case errors.Is(err, store.ErrTaskCapacity):
		return outcome{err: outputTooLarge(run.t, o.res, err)}
	}
	return o
}

// finish writes the outcome. A call refused before its tool started is
// Start's error, unless Start returned already: its task is failed, and
// its request id free for a call that fixes what was refused. An output
// keep did not write (one replayed for the request id, or changed by a
// middleware) is written here, and fails the task when it does not fit.
func (run *taskRun) finish(res Result, err error) {
	u := store.TaskUpdate{Progress: run.lastProgress()}
	var refusal error
	if err == nil {
		u.Status, u.ExecutionID = store.TaskCompleted, res.ExecutionID
		run.mu.Lock()
		kept := run.kept
		run.mu.Unlock()
		if out := outputOf(res); kept == nil || !bytes.Equal(out, kept) {
			u.Output = out // replayed, or changed by a middleware
		}
	} else {
		e := publicError(err)
		u.Status, u.Error = store.TaskFailed, recordError(e)
		if e.Code == CodeCancelled {
			u.Status = store.TaskCancelled
		}
		if id, ok := e.Details["execution_id"].(string); ok {
			u.ExecutionID = id
		}
		if _, replayed := e.Details["replayed"]; !run.executed.Load() && !run.waited && !replayed {
			refusal, u.Release = err, true
		}
	}
	switch {
	case run.shut.Load(): // the shutdown wrote its outcome
		run.begin()
		return
	case run.r.life.Err() != nil:
		// The registry closed: the task is not this host's to end. It is
		// failed, host_lost, once its lease lapses, as a crashed host's.
		run.r.logger.Warn("carmy: the registry closed while a task ran; it fails once its lease lapses", "task_id", run.id, "tool", run.t.meta.Name)
		run.begin()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err = run.r.tasks.store.UpdateTask(ctx, run.id, u)
	if errors.Is(err, store.ErrTaskCapacity) && u.Output != nil {
		e := outputTooLarge(run.t, res, err)
		_, err = run.r.tasks.store.UpdateTask(ctx, run.id, store.TaskUpdate{Status: store.TaskFailed, ExecutionID: res.ExecutionID, Error: recordError(e)})
	}
	if err != nil && !run.shut.Load() {
		run.r.logger.Error("carmy: cannot record the outcome of a task", "task_id", run.id, "tool", run.t.meta.Name, "error", err)
	}
	// Once written: a retry of the refused call with its request id
	// starts anew.
	run.end(refusal)
}

// watch stops the call when the task is cancelled, or taken for lost,
// woken by the store's notifications.
func (run *taskRun) watch(ctx context.Context, stop context.CancelFunc) {
	var version int64
	for {
		rec, err := run.r.tasks.store.AwaitTask(ctx, run.id, version)
		if ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, store.ErrTaskNotFound):
			stop()
			return
		case err != nil:
			select { // the store failed: look again shortly
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if rec.CancelRequested || rec.Status.Final() {
			stop()
			return
		}
		run.deliver(rec)
		version = rec.Version
	}
}

// renew renews the task's lease, and writes the progress the tool
// reports, at most every progressEvery. A lease found lapsed stops the
// call: the task is failed already, and its outcome could not be kept.
func (run *taskRun) renew(ctx context.Context, stop context.CancelFunc) {
	r := run.r
	tick := time.NewTicker(r.tasks.lease / 3)
	defer tick.Stop()
	write := func(u store.TaskUpdate) {
		_, err := r.tasks.store.UpdateTask(ctx, run.id, u)
		switch {
		case errors.Is(err, store.ErrTaskState):
			r.logger.Error("carmy: a task's lease lapsed while it ran; it is failed, and its call is stopped", "task_id", run.id, "tool", run.t.meta.Name)
			stop()
		case errors.Is(err, store.ErrTaskCapacity):
			// Progress that does not fit in the principal's bytes is
			// left out; the lease is renewed alone at the next tick.
			r.logger.Warn("carmy: a task's progress does not fit in its caller's bytes of tasks; it is left out", "task_id", run.id, "tool", run.t.meta.Name)
		case err != nil && ctx.Err() == nil:
			r.logger.Warn("carmy: cannot write a task's lease or progress; trying again", "task_id", run.id, "tool", run.t.meta.Name, "error", err)
		}
	}
	var last time.Time
	var flush <-chan time.Time // set while progress waits for its turn
	progress := func() {
		last, flush = time.Now(), nil
		write(store.TaskUpdate{Progress: run.lastProgress(), Lease: r.tasks.lease})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			write(store.TaskUpdate{Lease: r.tasks.lease})
		case <-run.poke:
			if wait := progressEvery - time.Since(last); wait > 0 {
				if flush == nil {
					flush = time.After(wait)
				}
				continue
			}
			progress()
		case <-flush:
			progress()
		}
	}
}

// readTask reads a task as principal: another principal's task is not
// found, as an unknown one is.
func (r *Registry) readTask(ctx context.Context, id, principal string) (store.Task, error) {
	rec, err := r.tasks.store.GetTask(ctx, id)
	if err == nil && rec.Principal != principal {
		err = store.ErrTaskNotFound
	}
	if errors.Is(err, store.ErrTaskNotFound) {
		return rec, Errorf(CodeNotFound, "no task %q is visible to you", id)
	}
	if err != nil {
		return rec, r.taskStoreError(ctx, err)
	}
	return rec, nil
}

// awaitTask returns rec's task once it changed.
func (r *Registry) awaitTask(ctx context.Context, rec store.Task) (store.Task, error) {
	next, err := r.tasks.store.AwaitTask(ctx, rec.ID, rec.Version)
	switch {
	case err == nil:
		return next, nil
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return rec, &Error{Code: CodeTimeout, Message: fmt.Sprintf("task %s did not finish before the caller's deadline; it goes on", rec.ID), Err: ctx.Err()}
	case ctx.Err() != nil:
		return rec, &Error{Code: CodeCancelled, Message: fmt.Sprintf("the caller stopped waiting for task %s; it goes on", rec.ID), Err: ctx.Err()}
	case errors.Is(err, store.ErrTaskNotFound):
		return rec, Errorf(CodeNotFound, "task %q is gone: a finished task is kept for a while only", rec.ID)
	}
	return rec, r.taskStoreError(ctx, err)
}

// cancelTask asks the store to cancel principal's task id. A final task is
// not changed: CodeConflict says so.
func (r *Registry) cancelTask(ctx context.Context, id, principal string) (store.Task, error) {
	cur, err := r.readTask(ctx, id, principal)
	if err != nil {
		return store.Task{}, err
	}
	if t, ok := r.tab().tools[cur.Tool]; ok && len(r.auditors) > 0 && !cur.Status.Final() {
		// Before the cancel, which the call's own record follows.
		_ = r.writeAudit(context.WithoutCancel(ctx), AuditRecord{Time: time.Now(), Decision: AuditCancelRequested, ExecutionID: cur.ExecutionID,
			RequestID: cur.RequestID, Principal: principal, Tool: cur.Tool, Effect: t.meta.Effect, Digest: cur.Digest})
	}
	rec, err := r.tasks.store.CancelTask(ctx, id)
	switch {
	case errors.Is(err, store.ErrTaskState):
		return rec, &Error{Code: CodeConflict, Message: fmt.Sprintf("task %s is %s: there is nothing to cancel, and nothing changed", id, rec.Status),
			Details: map[string]any{"task_id": id, "status": string(rec.Status)}}
	case errors.Is(err, store.ErrTaskNotFound):
		return rec, Errorf(CodeNotFound, "no task %q is visible to you", id)
	case err != nil:
		return rec, r.taskStoreError(ctx, err)
	}
	r.logger.InfoContext(ctx, "carmy: task cancel requested", "task_id", id, "tool", rec.Tool, "principal", principal)
	return rec, nil
}

// A question a task's tool asks with Context.Elicit waits on the host that
// runs the task, but is kept on the task in the store, with the answers
// given to it: any host shows the question, and takes an answer, which
// reaches the host running the task through the store's notifications, as
// a cancel does.

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
	answers := make(map[string]answer, len(rec.Answers))
	for q, b := range rec.Answers {
		var a answer
		if json.Unmarshal(b, &a) == nil {
			answers[q] = a
		}
	}
	run.peer.Deliver(answers)
}

// asking records the questions the task's tool waits for, as the task
// keeps them (nil for none): the task is input_required while any waits.
func (run *taskRun) asking(ctx context.Context, questions []byte) {
	u := store.TaskUpdate{Status: store.TaskWorking, Questions: []byte("{}")}
	if questions != nil {
		u.Status, u.Questions = store.TaskInputRequired, questions
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := run.update(ctx, u); err != nil {
		run.r.logger.Warn("carmy: cannot record a task's wait for input", "task_id", run.id, "error", err)
	}
}

// taskAsker lets a task wait for a person's approval within its call's one
// pass through the pipeline (a [personAsker]): the task is input_required,
// naming the approval, until a person decides it on any host; approved,
// the call goes on from the confirmation stage, so that the middleware and
// the audit see it once; denied, the task fails with the denial, as the
// call would be refused. Nobody deciding before the approval expires
// leaves the refusal that stands. While it waits, it holds no place under
// the tool's MaxInFlight (askInBand).
type taskAsker struct{ run *taskRun } // one pointer: held in an interface without an allocation

// confirmedBefore is never true: a task's call comes in one request.
func (taskAsker) confirmedBefore(context.Context, string) (string, bool) { return "", false }

// accepted is never called: nobody answers a task in-band.
func (taskAsker) accepted(context.Context, personQuestion, store.Approval) {}

// standing is q's refusal: the task's status named where the person
// decides.
func (taskAsker) standing(_ context.Context, q personQuestion, _ bool) error { return q.refusal }

func (a taskAsker) ask(ctx context.Context, q personQuestion) personAnswer {
	run, r := a.run, a.run.r
	if q.pending.URL == "" && q.principal == r.stdioIdentity.Principal {
		// No served console shows this approval: the person of a
		// single-client process decides it on the loopback console, which
		// exists from now on, its file where `carmy approvals` finds it.
		if _, _, err := r.http.localConsole(ctx); err != nil {
			r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
		}
	}
	if err := run.update(ctx, store.TaskUpdate{Status: store.TaskInputRequired, ApprovalID: q.pending.ID}); err != nil {
		return personAnswer{verdict: failed, err: err}
	}
	run.waited = true
	run.begin() // Start returns: the task waits for a person
	r.approvals.tasks.Store(q.pending.ID, struct{}{})
	ans := r.awaitPerson(ctx, q.pending.ID)
	r.approvals.tasks.Delete(q.pending.ID)
	if ans.verdict == decided {
		if err := run.update(ctx, store.TaskUpdate{Status: store.TaskWorking}); err != nil {
			return personAnswer{verdict: failed, err: err}
		}
	}
	return ans
}

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
	return tasks{store: s, ttl: ttl, lease: lease,
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
// (a panic, a host lost, a shutdown, a mounted upstream's protocol error)
// rather than the tool's.
func serverFailure(rec store.Task, e *Error) bool {
	return rec.Lost || e.Code == CodeInternal || e.Details["reason"] == reasonShutdown || e.Details["reason"] == reasonUpstreamFailed
}
