package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// TasksExtension is the id of MCP's tasks extension (2026-07-28), which a
// client declares in its capabilities' extensions to have calls of tools
// that support tasks answered with a task.
const TasksExtension = "io.modelcontextprotocol/tasks"

// The task support of a tool, as tools/list says it (execution.taskSupport).
const (
	TaskForbidden = "forbidden"
	TaskOptional  = "optional"
	TaskRequired  = "required"
)

// Tasks is what the door needs of a host whose calls may run as tasks.
// Every method reads and changes only id's tasks: another principal's
// task is not found, as an unknown one is. It must be safe for concurrent
// use.
type Tasks interface {
	// StartTask starts c as a task. A call refused before its task began
	// returns a nil state and the refusal as an outcome.
	StartTask(ctx context.Context, c *Call) (*TaskState, Outcome, error)
	// GetTask reads a task; false when id has none of that id.
	GetTask(ctx context.Context, id Identity, task string) (*TaskState, bool, error)
	// UpdateTask hands a task the answers to the questions it asked; false
	// when id has no task of that id.
	UpdateTask(ctx context.Context, id Identity, task string, answers map[string]*mcp.ElicitResult) (bool, error)
	// CancelTask asks a task to stop; a task that ended already is left
	// as it is. False when id has no task of that id.
	CancelTask(ctx context.Context, id Identity, task string) (bool, error)
}

// TaskState is a task as the door answers for it.
type TaskState struct {
	ID      string
	Tool    string
	Status  string // working, input_required, completed, failed, cancelled
	Created time.Time
	Updated time.Time
	TTL     time.Duration
	Message string
	// Outcome is a completed task's (Err set for a tool that failed).
	Outcome *Outcome
	// Error is a failed task's: it ran into a protocol-level failure.
	Error *jsonrpc.Error
	// Questions are the questions a task waiting for input asks.
	Questions mcp.InputRequestMap
	// Version is the store's version of the task, which
	// [SessionTasks.AwaitTask] waits to see changed.
	Version int64
}

// taskPollInterval is how often the door suggests a client polls a task.
const taskPollInterval = time.Second

// DeclaresTasks reports whether the _meta of a sessionless request says
// its client takes tasks.
func DeclaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// mayConcernTasks reports whether a message may be a task's request or
// declare the tasks extension: every such message holds "tasks" in its
// bytes, unless a string of it is escaped. A plain call is then not decoded
// once more to learn that it is none (the strict check and the call's own
// decode are enough).
func mayConcernTasks(body []byte) bool {
	return bytes.Contains(body, []byte("tasks")) || bytes.IndexByte(body, '\\') >= 0
}

// TaskRequiredError is the protocol's error for a call of a tool that runs
// only as a task from a client that did not declare tasks: missing
// required client capability, naming the extension.
func TaskRequiredError(tool string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
		Message: tool + " runs only as a task: declare the " + TasksExtension + " extension", Data: data}
}

// taskRequest answers a sessionless request of the tasks extension itself
// (tasks/get, tasks/update, tasks/cancel, the methods of the extension's
// first draft that it removed, and a tools/call that starts a task), and
// reports whether it did. What is not one, or is not well formed, it
// leaves to the SDK, having written nothing.
func (s *Server) taskRequest(w http.ResponseWriter, req *http.Request, body []byte) bool {
	tasks, ok := s.host.(Tasks)
	if !ok || req.Method != http.MethodPost || !mayConcernTasks(body) {
		return false
	}
	msg, ok := readRequest(body)
	if !ok || !strings.HasPrefix(msg.Method, "tasks/") && msg.Method != "tools/call" ||
		!mcpwire.HeaderIs(req.Header, "Mcp-Method", msg.Method) {
		return false
	}
	id, _, _ := httpCaller(&mcp.RequestExtra{TokenInfo: tokenInfo(req.Context())})
	door := taskDoor{caller: id, header: req.Header, call: func(p *mcp.CallToolParamsRaw) *Call {
		extra := &mcp.RequestExtra{TokenInfo: tokenInfo(req.Context()), Header: req.Header}
		c := &Call{Tool: p.Name, Params: p, Header: req.Header, Wire: Wire{ID: msg.ID, ProtocolVersion: mcpwire.SessionlessProtocol, Transport: "tcp"}}
		c.Caller, c.Request, c.Authenticated = httpCaller(extra)
		c.Session = c.Caller.Session
		c.Peer = newPeer(&mcp.CallToolRequest{Params: p, Extra: extra}, &s.cfg)
		return c
	}}
	result, rpcErr, handled := s.sessionlessTask(req.Context(), tasks, door, msg.Method, msg.Params)
	if !handled {
		return false
	}
	return writeAnswer(w, msg.ID, result, rpcErr, true)
}

// taskDoor is what the tasks extension needs of the transport a request
// came by: who calls, the headers of its HTTP request (nil over stdio),
// and how a call that starts a task is made.
type taskDoor struct {
	caller Identity
	header http.Header
	call   func(p *mcp.CallToolParamsRaw) *Call
}

// sessionlessTask answers a sessionless request of the tasks extension
// (tasks/get, tasks/update, tasks/cancel, the methods of the extension's
// first draft that it removed, and a tools/call that starts a task) that
// came by door, with its result or its error, and reports whether it is
// one: the client capabilities that each request declares decide, over
// HTTP and stdio alike. What is not one, or is not well formed, it leaves
// to the SDK.
func (s *Server) sessionlessTask(ctx context.Context, tasks Tasks, door taskDoor, method string, params jsontext.Value) (json.RawMessage, *jsonrpc.Error, bool) {
	answer := func(result any, rpcErr *jsonrpc.Error) (json.RawMessage, *jsonrpc.Error, bool) {
		if rpcErr != nil {
			return nil, rpcErr, true
		}
		b, err := json.Marshal(result)
		if err != nil {
			return nil, rpcError(err), true
		}
		return b, nil, true
	}
	if method == "tools/call" {
		return s.startTask(ctx, tasks, door, params)
	}
	if !strings.HasPrefix(method, "tasks/") {
		return nil, nil, false
	}
	var p struct {
		TaskID         string         `json:"taskId"`
		InputResponses jsontext.Value `json:"inputResponses"`
		Meta           map[string]any `json:"_meta"`
	}
	if jsonv2.Unmarshal(params, &p) != nil {
		return answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"})
	}
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default: // tasks/result and tasks/list are gone: a task's result is in tasks/get
		return answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method})
	}
	if !DeclaresTasks(p.Meta) {
		return answer(nil, TaskRequiredError(method))
	}
	if name := door.header.Values("Mcp-Name"); len(name) > 0 && strings.TrimSpace(name[0]) != p.TaskID {
		return answer(nil, &jsonrpc.Error{Code: mcpwire.CodeHeaderMismatch, Message: "header mismatch: Mcp-Name does not match params.taskId"})
	}
	if p.TaskID == "" {
		return answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: taskId is required"})
	}
	id := door.caller
	notFound := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: no task " + p.TaskID + " is visible to you"}
	var found bool
	var err error
	switch method {
	case "tasks/get":
		var st *TaskState
		if st, found, err = tasks.GetTask(ctx, id, p.TaskID); err == nil && found {
			return answer(s.detailedTask(st), nil)
		}
	case "tasks/update":
		var answers map[string]*mcp.ElicitResult
		if len(p.InputResponses) == 0 || p.InputResponses.Kind() != '{' || json.Unmarshal(p.InputResponses, &answers) != nil {
			return answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: inputResponses must be an object of answers"})
		}
		found, err = tasks.UpdateTask(ctx, id, p.TaskID, answers)
	case "tasks/cancel":
		found, err = tasks.CancelTask(ctx, id, p.TaskID)
	}
	switch {
	case err != nil:
		return answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()})
	case !found:
		return answer(nil, notFound)
	}
	return answer(map[string]string{"resultType": "complete"}, nil)
}

// startTask answers a tools/call of a tool that runs as a task for a
// client that declared tasks with the task it starts (or, for the first
// round of a tool that HandsOff, with the call's answer, which may be a
// task), or reports false for a call that is not one.
func (s *Server) startTask(ctx context.Context, tasks Tasks, door taskDoor, params jsontext.Value) (json.RawMessage, *jsonrpc.Error, bool) {
	p, t, ok := s.taskCall(params, door.header)
	if !ok {
		return nil, nil, false
	}
	c := door.call(p)
	var st *TaskState
	var res *mcp.CallToolResult
	if firstRound(t, p) {
		// A call, whose tool may ask, answer, or find that what it called
		// made a task, which the host's task then adopts.
		var err error
		if res, st, err = s.run(ctx, t, c); err != nil {
			return nil, rpcError(err), true
		}
	} else {
		// The answers of the rounds before are the task's: a tool that
		// asked before its task started finds them (TaskAfterInput).
		if err := s.openRounds(ctx, c); err != nil {
			return nil, rpcError(err), true
		}
		var out Outcome
		var err error
		if st, out, err = tasks.StartTask(ctx, c); err != nil {
			return nil, rpcError(err), true
		}
		if st == nil { // refused before its task began: a tool result, as a call's
			res = s.result(t, out)
		}
	}
	if st == nil {
		b, err := mcpwire.SessionlessResult(res, s.info)
		if err != nil {
			return nil, rpcError(err), true
		}
		return b, nil, true
	}
	task := taskObject(st)
	task["resultType"] = "task"
	b, err := json.Marshal(task)
	if err != nil {
		return nil, rpcError(err), true
	}
	return b, nil, true
}

// taskCall reads the params of a tools/call, with the headers of its HTTP
// request (nil over stdio), and reports whether it starts a task: its
// client declared tasks, and its tool runs as one now.
func (s *Server) taskCall(params jsontext.Value, header http.Header) (*mcp.CallToolParamsRaw, *entry, bool) {
	var p *mcp.CallToolParamsRaw
	if jsonv2.Unmarshal(params, &p) != nil || p == nil {
		return nil, nil, false
	}
	t, ok := s.startsTask(p, header)
	return p, t, ok
}

// startsTask reports whether a tools/call with params p starts a task.
func (s *Server) startsTask(p *mcp.CallToolParamsRaw, header http.Header) (*entry, bool) {
	if !DeclaresTasks(p.Meta) {
		return nil, false
	}
	t, ok := s.table()[p.Name]
	if !ok || t.Tasks == TaskForbidden || !mcpwire.HeaderIs(header, "Mcp-Name", p.Name) ||
		firstRound(t, p) && !t.HandsOff {
		return nil, false
	}
	return t, true
}

// firstRound reports whether a tools/call with params p is the first
// round of a tool that asks before its task starts: not a task yet.
func firstRound(t *entry, p *mcp.CallToolParamsRaw) bool {
	return t.AskFirst && p.RequestState == "" && len(p.InputResponses) == 0
}

// taskObject is the members every task answer of the sessionless
// extension has.
func taskObject(st *TaskState) map[string]any {
	return taskMembers(st, "ttlMs", "pollIntervalMs", st.Message)
}

// taskMembers is a task as both generations write it, under the names
// the generation gives its time-to-live and poll interval.
func taskMembers(st *TaskState, ttl, poll, message string) map[string]any {
	o := map[string]any{
		"taskId":        st.ID,
		"status":        st.Status,
		"createdAt":     st.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": st.Updated.UTC().Format(time.RFC3339Nano),
		ttl:             st.TTL.Milliseconds(),
		poll:            taskPollInterval.Milliseconds(),
	}
	if st.TTL <= 0 {
		o[ttl] = nil
	}
	if message != "" {
		o["statusMessage"] = message
	}
	return o
}

// taskResult is the tools/call result of a task that has an outcome, in
// both generations: its content always a list.
func (s *Server) taskResult(st *TaskState) *mcp.CallToolResult {
	t, ok := s.table()[st.Tool]
	if !ok {
		t = &entry{}
	}
	res := s.result(t, *st.Outcome)
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res
}

// detailedTask is the answer of tasks/get: the task, with its result, its
// error or the questions it asks, as they apply.
func (s *Server) detailedTask(st *TaskState) map[string]any {
	o := taskObject(st)
	o["resultType"] = "complete"
	switch {
	case st.Outcome != nil:
		o["result"] = s.taskResult(st)
	case st.Error != nil:
		o["error"] = st.Error
	case len(st.Questions) > 0:
		o["inputRequests"] = st.Questions
	}
	return o
}

// inbox is where a task's questions wait for their answers: a task runs
// once, so a question its tool asks waits for tasks/update rather than
// ending the run as a round of the sessionless protocol does.
type inbox struct {
	mu      sync.Mutex
	pending mcp.InputRequestMap
	waiting map[string]chan *mcp.ElicitResult
	// changed is told, under mu, the questions that wait each time they
	// change.
	changed func(questions mcp.InputRequestMap)
}

// TaskPeer is the peer of a task started by the call of p: its tool's
// questions wait for answers that come with tasks/update ([Peer.Deliver]).
// changed is told the questions that wait each time they change: nil once
// none waits. A session's task asks over the session itself, each
// question naming the task (task, its id) in its _meta as the session
// generation's tasks want, and changed is told an empty map while it
// waits. Progress and logs go nowhere: nobody listens to the request that
// started the task any more.
func TaskPeer(p *Peer, task string, changed func(questions mcp.InputRequestMap)) *Peer {
	req := &mcp.CallToolRequest{Params: p.req.Params}
	if extra := p.req.GetExtra(); extra != nil {
		req.Extra = &mcp.RequestExtra{Header: extra.Header}
	}
	if !p.sessionless {
		// A session's task asks through the session's own elicitation
		// requests, and is input_required while it waits for one.
		req.Session = p.req.Session
		return &Peer{req: req, single: p.single, task: task, asking: func(waiting bool) {
			if waiting {
				changed(mcp.InputRequestMap{})
			} else {
				changed(nil)
			}
		}}
	}
	p.mu.Lock()
	answers := p.answers
	p.mu.Unlock()
	return &Peer{req: req, sessionless: p.sessionless, single: p.single, answers: answers,
		inbox: &inbox{pending: mcp.InputRequestMap{}, waiting: map[string]chan *mcp.ElicitResult{}, changed: changed}}
}

// ask puts a question of a task and waits for its answer, or for ctx.
func (b *inbox) ask(ctx context.Context, id string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	ch := make(chan *mcp.ElicitResult, 1)
	b.mu.Lock()
	b.pending[id], b.waiting[id] = params, ch
	b.tell()
	b.mu.Unlock()
	select {
	case res := <-ch:
		return res, nil
	case <-ctx.Done():
		b.mu.Lock()
		if _, ok := b.waiting[id]; ok {
			delete(b.pending, id)
			delete(b.waiting, id)
			b.tell()
		}
		b.mu.Unlock()
		return nil, ctx.Err()
	}
}

// tell tells changed the questions that wait. The caller holds mu.
func (b *inbox) tell() {
	if len(b.pending) == 0 {
		b.changed(nil)
		return
	}
	b.changed(maps.Clone(b.pending))
}

// Deliver hands a task's questions their answers; an answer to a question
// not waiting is ignored. Once every question has its answer, the task
// works again.
func (p *Peer) Deliver(answers map[string]*mcp.ElicitResult) {
	if p.inbox == nil {
		return
	}
	b := p.inbox
	b.mu.Lock()
	defer b.mu.Unlock()
	taken := false
	for id, a := range answers {
		ch, ok := b.waiting[id]
		if !ok || a == nil {
			continue
		}
		delete(b.pending, id)
		delete(b.waiting, id)
		ch <- a
		taken = true
	}
	if taken {
		b.tell()
	}
}

// RequestOf is the HTTP request that carries a request of the door's,
// from the context the door hands the host; nil over other transports.
func RequestOf(ctx context.Context) *http.Request {
	_, req, _ := httpCaller(&mcp.RequestExtra{TokenInfo: tokenInfo(ctx)})
	return req
}

// rpcError is err as the JSON-RPC error of a call's answer: a protocol
// error the call gave is answered as it is, any other is internal.
func rpcError(err error) *jsonrpc.Error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// withoutTasks leaves the tasks extension out of the capabilities of an
// initialize result: the extension is the sessionless protocol's; a
// session's experimental tasks take other methods, and their own
// capability (withSessionTasks).
func withoutTasks(res mcp.Result) {
	init, ok := res.(*mcp.InitializeResult)
	if !ok || init.Capabilities == nil || init.Capabilities.Extensions[TasksExtension] == nil {
		return
	}
	caps := *init.Capabilities
	caps.Extensions = maps.Clone(caps.Extensions)
	delete(caps.Extensions, TasksExtension)
	if len(caps.Extensions) == 0 {
		caps.Extensions = nil
	}
	init.Capabilities = &caps
}
