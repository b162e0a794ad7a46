//lint:file-ignore SA1019 an upstream task may sample, which MCP deprecates from 2026-07-28 on and still serves.

package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream tool may run as a task of the upstream's: a call answered
// at once with a task, which the caller then reads until it ends. The SDK
// knows nothing of tasks, so carmy speaks them itself, on the JSON-RPC
// level, over the connection the SDK opened: over stdio a request is
// written into the child's input between the SDK's own messages, and its
// answer read off the child's output (the SDK drops an answer to an id it
// did not send); over HTTP it is a POST of its own in the SDK's session.
// The upstream's requests tied to the task (its questions, sampling) reach
// the call as those of a plain call do.
//
// The two protocol generations speak tasks differently. A session
// (2025-11-25) asks for a task with params.task, reads it with tasks/get
// every pollInterval, and fetches its result with tasks/result, which
// blocks until the task ends; while the task is input_required its
// questions arrive as requests during that tasks/result. The sessionless
// protocol (2026-07-28, the tasks extension) declares the extension in
// each request's capabilities and lets the server decide; tasks/get
// inlines the result, the error or the questions (inputRequests), which
// tasks/update answers.

const (
	tasksExtension  = "io.modelcontextprotocol/tasks"
	relatedTaskMeta = "io.modelcontextprotocol/related-task"
	// rpcPrefix begins the id of every request carmy sends itself.
	rpcPrefix = "carmy-rpc-"
)

// TakesTasks reports whether the upstream declares that it runs tool
// calls as tasks: capabilities.tasks.requests.tools.call in a session, the
// tasks extension in the sessionless protocol.
func (c *Client) TakesTasks() bool {
	cs, err := c.open()
	if err != nil {
		return false
	}
	if sessionless(cs) {
		return declaresTasks(cs)
	}
	return c.sessionTasks.Load()
}

// declaresTasks reports whether the upstream of a connection of the
// sessionless protocol declares the tasks extension.
func declaresTasks(cs *mcp.ClientSession) bool {
	res := cs.InitializeResult()
	return res != nil && res.Capabilities != nil && res.Capabilities.Extensions[tasksExtension] != nil
}

// initialized reads what the SDK drops of the upstream's initialize
// result: whether its session runs tool calls as tasks.
func (c *Client) initialized(result json.RawMessage) {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Tasks struct {
				Requests struct {
					Tools struct {
						Call json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(result, &r) != nil || r.ProtocolVersion == "" {
		return
	}
	call := r.Capabilities.Tasks.Requests.Tools.Call
	c.sessionTasks.Store(len(call) > 0 && string(call) != "null")
}

// wireTask is a task as either generation writes it, with what tasks/get
// inlines in the sessionless one.
type wireTask struct {
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage"`
	PollInterval   *int64              `json:"pollInterval"`
	PollIntervalMs *int64              `json:"pollIntervalMs"`
	Result         json.RawMessage     `json:"result"`
	Error          *jsonrpc.Error      `json:"error"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests"`
}

// poll is how long to wait before reading the task again: the upstream's
// interval, within bounds that keep a broken one from spinning or
// stalling.
func (t *wireTask) poll() time.Duration {
	ms := int64(1000)
	switch {
	case t.PollInterval != nil:
		ms = *t.PollInterval
	case t.PollIntervalMs != nil:
		ms = *t.PollIntervalMs
	}
	return min(max(time.Duration(ms)*time.Millisecond, 20*time.Millisecond), 30*time.Second)
}

// callTask calls cl's tool as a task of the upstream's, and returns the
// call's result as the upstream wrote it once the task completed. A task
// that failed or was cancelled upstream is an [*Error] of kind
// [TaskFailed]; a ctx that ends first cancels the upstream's task.
func (c *Client) callTask(ctx context.Context, cs *mcp.ClientSession, cl *call, args json.RawMessage, meta mcp.Meta) (json.RawMessage, error) {
	gen2 := sessionless(cs)
	params := map[string]any{"name": cl.req.Name, "arguments": args}
	if gen2 {
		meta = c.requestMeta(cs, meta)
	} else {
		params["task"] = map[string]any{}
	}
	params["_meta"] = meta
	var raw json.RawMessage
	var st *wireTask
	if cl.req.Adopt != "" { // made by a call handed off: only read
		cl.markSent()
		st = &wireTask{TaskID: cl.req.Adopt, Status: "working", PollIntervalMs: new(int64)}
	}
	for round := 1; cl.req.Adopt == ""; round++ {
		var err error
		if raw, err = c.sendTaskCall(ctx, cs, cl, params); err != nil {
			return nil, c.callError(ctx, cl, err)
		}
		var created struct {
			Task         *wireTask `json:"task"`
			ResultType   string    `json:"resultType"`
			RequestState string    `json:"requestState"`
			wireTask
		}
		if err := json.Unmarshal(raw, &created); err != nil {
			return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: "cannot read the answer to the task call of " + cl.req.Name, Err: err}
		}
		st = created.Task
		if !gen2 {
			break
		}
		st = &created.wireTask
		if created.ResultType != "input_required" {
			if created.ResultType != "task" {
				st = nil
			}
			break
		}
		// The upstream asks before it makes its task: its questions are
		// answered as a plain call's are (carmy's task asks them), and the
		// call is sent again with the answers.
		answers, err := c.answerRound(ctx, cl, round, created.InputRequests)
		if err != nil {
			return nil, err
		}
		params["inputResponses"] = answers
		if created.RequestState != "" {
			params["requestState"] = created.RequestState
		}
	}
	if st == nil || st.TaskID == "" { // answered at once: the call's result
		return raw, nil
	}
	id := st.TaskID
	if cl.req.HandOff && gen2 && ctx.Err() == nil { // a call that ended first cancels it, below
		return nil, &HandOff{Task: id, Cancel: func() { _ = c.stopTask(c.life, cs, cl, id, nil) }}
	}
	c.mu.Lock()
	c.byTask[id], cl.task = cl, id
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.byTask, id)
		cl.task = ""
		c.mu.Unlock()
	}()
	asked := map[string]bool{} // the sessionless questions answered
	said := ""                 // the task's status message handed on last
	var err error
	for {
		if gen2 && final(st.Status) && st.Result == nil && st.Error == nil {
			// Created ended already: tasks/get has its outcome.
			if st, err = c.getTask(ctx, cs, cl, id, gen2); err != nil {
				return nil, c.stopTask(ctx, cs, cl, id, err)
			}
		}
		switch st.Status {
		case "completed":
			if gen2 {
				if len(st.Result) == 0 {
					return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: "task " + id + " of " + cl.req.Name + " completed without a result"}
				}
				return st.Result, nil
			}
			return c.taskResult(ctx, cs, cl, id)
		case "failed", "cancelled":
			return nil, c.taskFailed(ctx, cs, cl, st, gen2)
		case "input_required":
			if !gen2 {
				// The questions come as requests while tasks/result waits.
				return c.taskResult(ctx, cs, cl, id)
			}
			if err := c.answerTask(ctx, cs, cl, st, asked); err != nil {
				return nil, c.stopTask(ctx, cs, cl, id, err)
			}
		}
		if st.StatusMessage != said {
			said = st.StatusMessage
			cl.status(said)
		}
		select {
		case <-ctx.Done():
			return nil, c.stopTask(ctx, cs, cl, id, ctx.Err())
		case <-time.After(st.poll()):
		}
		if st, err = c.getTask(ctx, cs, cl, id, gen2); err != nil {
			return nil, c.stopTask(ctx, cs, cl, id, err)
		}
	}
}

// sendTaskCall sends the tools/call that asks for a task and returns its
// answer. The answer that names the task is read even once ctx ended, for
// a while: the task it names is then cancelled, not left to run. Until
// ctx ends it may take as long as the call may, since an upstream free to
// choose may answer at once, after the whole run.
func (c *Client) sendTaskCall(ctx context.Context, cs *mcp.ClientSession, cl *call, params map[string]any) (json.RawMessage, error) {
	sent, cancel := context.WithCancel(context.WithoutCancel(ctx))
	grace := context.AfterFunc(ctx, func() { time.AfterFunc(c.cfg.ConnectTimeout, cancel) })
	stop := context.AfterFunc(c.life, cancel)
	defer func() {
		grace()
		stop()
		cancel()
	}()
	return c.rpc(sent, cs, cl, "tools/call", params, cl.req.Name)
}

// getTask reads task id with tasks/get.
func (c *Client) getTask(ctx context.Context, cs *mcp.ClientSession, cl *call, id string, gen2 bool) (*wireTask, error) {
	raw, err := c.taskOp(ctx, cs, cl, "tasks/get", id, gen2, nil)
	if err != nil {
		return nil, err
	}
	st := &wireTask{}
	if err := json.Unmarshal(raw, st); err != nil || st.Status == "" {
		return nil, fmt.Errorf("cannot read task %s: %s", id, raw)
	}
	return st, nil
}

// final reports whether a task's status is one it never leaves.
func final(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// taskResult waits for the result of a session's task with tasks/result:
// the call's result, or the task's failure.
func (c *Client) taskResult(ctx context.Context, cs *mcp.ClientSession, cl *call, id string) (json.RawMessage, error) {
	raw, err := c.taskOp(ctx, cs, cl, "tasks/result", id, false, nil)
	if err == nil {
		return raw, nil
	}
	if rpc, ok := err.(*jsonrpc.Error); ok && ctx.Err() == nil {
		return nil, &Error{Mount: c.cfg.Name, Kind: TaskFailed, Code: rpc.Code, Msg: fmt.Sprintf("task %s of %s failed upstream: %s", id, cl.req.Name, rpc.Message)}
	}
	return nil, c.stopTask(ctx, cs, cl, id, err)
}

// taskFailed is the error of a task that ended failed or cancelled
// upstream, with the upstream's own words for it where it gives them.
func (c *Client) taskFailed(ctx context.Context, cs *mcp.ClientSession, cl *call, st *wireTask, gen2 bool) error {
	e := &Error{Mount: c.cfg.Name, Kind: TaskFailed, Code: jsonrpc.CodeInternalError, Msg: fmt.Sprintf("task %s of %s was %s upstream", st.TaskID, cl.req.Name, st.Status)}
	why := st.StatusMessage
	switch {
	case st.Error != nil:
		e.Code, why = st.Error.Code, st.Error.Message
	case !gen2 && st.Status == "failed":
		if _, err := c.taskOp(ctx, cs, cl, "tasks/result", st.TaskID, false, nil); err != nil {
			if rpc, ok := err.(*jsonrpc.Error); ok {
				e.Code, why = rpc.Code, rpc.Message
			}
		}
	}
	if why != "" {
		e.Msg += ": " + why
	}
	return e
}

// answerTask answers the questions a sessionless task asks that were not
// answered yet, each under its key as those of an input-required result
// are, with tasks/update.
func (c *Client) answerTask(ctx context.Context, cs *mcp.ClientSession, cl *call, st *wireTask, asked map[string]bool) error {
	answers := mcp.InputResponseMap{}
	for _, key := range slices.Sorted(maps.Keys(st.InputRequests)) {
		if asked[key] {
			continue
		}
		res, err := c.answer(context.WithValue(ctx, callKey{}, cl), cl.req, key, st.InputRequests[key])
		if err != nil {
			return err
		}
		answers[key] = res
		asked[key] = true
	}
	if len(answers) == 0 {
		return nil
	}
	_, err := c.taskOp(ctx, cs, cl, "tasks/update", st.TaskID, true, map[string]any{"inputResponses": answers})
	return err
}

// stopTask cancels the upstream's task of a call that stopped waiting for
// it (ctx ended, or the task could no longer be read), and returns why it
// stopped: ctx's error when ctx ended and the upstream took the cancel,
// else an outcome unknown (the call was sent).
func (c *Client) stopTask(ctx context.Context, cs *mcp.ClientSession, cl *call, id string, why error) error {
	cctx, cancel := context.WithTimeout(c.life, 5*time.Second)
	defer cancel()
	_, err := c.taskOp(cctx, cs, cl, "tasks/cancel", id, sessionless(cs), nil)
	if err != nil {
		c.logger.Warn("carmy: cannot cancel the upstream's task", "task", id, "tool", cl.req.Name, "error", err)
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	if ctx.Err() != nil {
		return &Error{Mount: c.cfg.Name, Kind: OutcomeUnknown, Msg: "the call stopped after it was sent; its task " + id + " was cancelled upstream", Err: ctx.Err()}
	}
	return &Error{Mount: c.cfg.Name, Kind: OutcomeUnknown, Msg: "task " + id + " of " + cl.req.Name + " was lost; it was cancelled upstream", Err: why}
}

// taskOp sends one request of the tasks' own methods about task id, with
// more params beside taskId.
func (c *Client) taskOp(ctx context.Context, cs *mcp.ClientSession, cl *call, method, id string, gen2 bool, more map[string]any) (json.RawMessage, error) {
	params := map[string]any{"taskId": id}
	for k, v := range more {
		params[k] = v
	}
	if gen2 {
		params["_meta"] = c.requestMeta(cs, nil)
	}
	return c.rpc(ctx, cs, cl, method, params, id)
}

// requestMeta is the _meta of a sessionless request, which carries what a
// session keeps: the protocol version, carmy's name, and its capabilities
// with the tasks extension.
func (c *Client) requestMeta(cs *mcp.ClientSession, meta mcp.Meta) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range meta {
		out[k] = v
	}
	caps := *c.options().Capabilities
	caps.Extensions = map[string]any{tasksExtension: map[string]any{}}
	out[mcp.MetaKeyProtocolVersion] = cs.InitializeResult().ProtocolVersion
	out[mcp.MetaKeyClientInfo] = &mcp.Implementation{Name: "carmy", Version: "mount"}
	out[mcp.MetaKeyClientCapabilities] = &caps
	return out
}

// rpcAnswer is the answer to a request carmy sent itself.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// rpc sends one request of cl's over the session's connection and waits
// for its answer: the result, or the upstream's *jsonrpc.Error. name is
// what the request is about (the tool, the task), for the routing header
// of the sessionless protocol.
func (c *Client) rpc(ctx context.Context, cs *mcp.ClientSession, cl *call, method string, params any, name string) (json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id := strconv.Quote(rpcPrefix + strconv.FormatUint(c.seq.Add(1), 10))
	msg, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", json.RawMessage(id), method, p})
	if err != nil {
		return nil, err
	}
	ch := make(chan rpcAnswer, 1)
	c.mu.Lock()
	c.rpcs[id] = ch
	stdin, httpc := c.stdin, c.httpc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.rpcs, id)
		c.mu.Unlock()
	}()
	if stdin != nil {
		if _, err := stdin.Write(append(msg, '\n')); err != nil {
			return nil, err
		}
	} else if err := c.post(ctx, httpc, cs, cl, method, name, msg); err != nil {
		return nil, err
	}
	wait := time.NewTicker(time.Second)
	defer wait.Stop()
	for {
		select {
		case a := <-ch:
			if a.Error != nil {
				return nil, a.Error
			}
			return a.Result, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			// Over HTTP the answer came with the POST's response, or never
			// will; over stdio it may come until the connection ends.
			if stdin == nil || !c.live(cs) {
				return nil, fmt.Errorf("no answer to %s", method)
			}
		}
	}
}

// live reports whether cs is still the open session.
func (c *Client) live(cs *mcp.ClientSession) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session == cs
}

// answered hands an answer to a request carmy sent itself to its waiter,
// and reports whether it was one.
func (c *Client) answered(line []byte) bool {
	var m struct {
		ID json.RawMessage `json:"id"`
		rpcAnswer
	}
	if json.Unmarshal(line, &m) != nil || m.ID == nil {
		return false
	}
	c.mu.Lock()
	ch := c.rpcs[string(m.ID)]
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- m.rpcAnswer:
	default:
	}
	return true
}

type ownKey struct{}

// post sends a request over HTTP in the SDK's session and reads its
// answer, serving the upstream's requests that come on its stream.
func (c *Client) post(ctx context.Context, httpc *http.Client, cs *mcp.ClientSession, cl *call, method, name string, msg []byte) error {
	if httpc == nil {
		return &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "not connected; reconnecting"}
	}
	req, err := c.newPost(context.WithValue(ctx, ownKey{}, cl), cs, msg)
	if err != nil {
		return err
	}
	if sessionless(cs) {
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if c.answered(b) {
			return nil
		}
		return fmt.Errorf("%s: HTTP %s: %s", method, resp.Status, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(io.Discard, resp.Body) // the taps hand on what it carries
	return err
}

// newPost is a POST of one message in session cs, with the headers of
// every request of the session beside the mount's own.
func (c *Client) newPost(ctx context.Context, cs *mcp.ClientSession, msg []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	if id := cs.ID(); id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if res := cs.InitializeResult(); res != nil {
		req.Header.Set("Mcp-Protocol-Version", res.ProtocolVersion)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// served serves a request or notification of the upstream that came on
// the stream of a request carmy sent itself (the SDK sees only its own
// streams): a question or a sampling for cl, progress; the answer goes
// back in a POST of its own.
func (c *Client) served(line []byte, cl *call) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method == "" {
		return
	}
	ctx := c.life
	if cl != nil {
		ctx = context.WithValue(ctx, callKey{}, cl)
	}
	if m.ID == nil {
		if m.Method == "notifications/progress" {
			var p mcp.ProgressNotificationParams
			if json.Unmarshal(m.Params, &p) == nil {
				c.progress(ctx, &mcp.ProgressNotificationClientRequest{Params: &p})
			}
		}
		return
	}
	go func() {
		res, err := c.serve(ctx, m.Method, m.Params)
		answer := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		if err != nil {
			answer["error"] = rpcErrorOf(err)
		} else {
			answer["result"] = res
		}
		b, err := json.Marshal(answer)
		if err != nil {
			return
		}
		cs, err := c.open()
		if err != nil {
			return
		}
		c.mu.Lock()
		httpc := c.httpc
		c.mu.Unlock()
		req, err := c.newPost(c.life, cs, b)
		if err != nil || httpc == nil {
			return
		}
		if resp, err := httpc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}()
}

// serve answers one request of the upstream's as the SDK's handlers do:
// a question or a sampling goes to the call it belongs to.
func (c *Client) serve(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		return c.elicit(ctx, &mcp.ElicitRequest{Params: &p})
	case "sampling/createMessage":
		if !c.cfg.Sampling {
			break
		}
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		return c.sample(ctx, &mcp.CreateMessageRequest{Params: &p})
	case "ping":
		return map[string]any{}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "carmy does not answer " + method + " for an upstream's task"}
}

func rpcErrorOf(err error) *jsonrpc.Error {
	if e, ok := err.(*jsonrpc.Error); ok {
		return e
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// taskCall is the call a request of the upstream tied to a task belongs
// to, by the task its _meta names; nil for none. A task may ask before
// its call has read the answer that names it: a moment is given.
func (c *Client) taskCall(meta map[string]any) *call {
	rel, _ := meta[relatedTaskMeta].(map[string]any)
	id, _ := rel["taskId"].(string)
	if id == "" {
		return nil
	}
	for range 50 {
		c.mu.Lock()
		cl := c.byTask[id]
		c.mu.Unlock()
		if cl != nil {
			return cl
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
