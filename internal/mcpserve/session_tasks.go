package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// SessionTasks is what the door needs, besides [Tasks], of a host that
// serves the experimental tasks of the session generation (2025-11-25):
// their list, and their result, which that generation waits for. Both
// read only id's tasks, and must be safe for concurrent use.
type SessionTasks interface {
	Tasks
	// ListTasks returns up to limit of id's tasks, newest first, those
	// created before the task with the id cursor ("" for the newest), and
	// the cursor of the next page ("" after the last one).
	ListTasks(ctx context.Context, id Identity, cursor string, limit int) ([]*TaskState, string, error)
	// WaitTask returns id's task once it is final, or ctx's error when ctx
	// ends first; false when id has no task of that id.
	WaitTask(ctx context.Context, id Identity, task string) (*TaskState, bool, error)
	// AwaitTask returns id's task once its Version is not version, or
	// ctx's error when ctx ends first; false when id has no task of that
	// id.
	AwaitTask(ctx context.Context, id Identity, task string, version int64) (*TaskState, bool, error)
}

// sessionTaskPage is how many tasks one tasks/list answer holds at most.
const sessionTaskPage = 50

// relatedTaskMeta is the _meta key that ties a message to its task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// sessionTasksCapability is the tasks member of a session's server
// capabilities: the methods served, and the requests that may be tasks.
var sessionTasksCapability = map[string]any{
	"list":     map[string]any{},
	"cancel":   map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// initialized is a session's initialize result with the tasks capability,
// which the SDK's ServerCapabilities has no member for: it is added to the
// answer's JSON, as listedTools adds a tool's execution.
type initialized struct{ *mcp.InitializeResult }

// MarshalJSON writes the result as the SDK does, with capabilities.tasks.
func (r initialized) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.InitializeResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	caps := map[string]any{}
	if len(m["capabilities"]) > 0 {
		if err := json.Unmarshal(m["capabilities"], &caps); err != nil {
			return nil, err
		}
	}
	caps["tasks"] = sessionTasksCapability
	if m["capabilities"], err = json.Marshal(caps); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// withSessionTasks is res, an initialize result, with the tasks capability
// when the host serves the tasks of sessions and the session negotiated a
// session generation.
func (s *Server) withSessionTasks(res mcp.Result) mcp.Result {
	init, ok := res.(*mcp.InitializeResult)
	if _, serves := s.host.(SessionTasks); !ok || !serves || init.ProtocolVersion >= mcpwire.SessionlessProtocol {
		return res
	}
	return initialized{init}
}

// isSessionTask reports whether a request of a session is one of the
// experimental tasks': a tasks/ method, or a tools/call with params.task.
func isSessionTask(method string, params []byte) bool {
	if strings.HasPrefix(method, "tasks/") {
		return true
	}
	return method == "tools/call" && wantsTask(params)
}

// wantsTask reports whether the params of a tools/call ask for a task.
func wantsTask(params []byte) bool {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return false
	}
	var p struct {
		Task jsontext.Value `json:"task"`
	}
	return jsonv2.Unmarshal(params, &p) == nil && p.Task.Kind() == '{'
}

// sessionTask answers a request of the experimental tasks of session ss,
// made by id, and reports whether it did; a request that is not one, or a
// host or a session that does not serve them, it leaves alone. It may
// block: tasks/result waits for its task to end.
func (s *Server) sessionTask(ctx context.Context, ss *mcp.ServerSession, id Identity, extra *mcp.RequestExtra, method string, params jsontext.Value, started func(*TaskState)) (json.RawMessage, *jsonrpc.Error, bool) {
	tasks, ok := s.host.(SessionTasks)
	init := ss.InitializeParams()
	if !ok || init == nil || init.ProtocolVersion >= mcpwire.SessionlessProtocol || !isSessionTask(method, params) {
		return nil, nil, false
	}
	answer := func(v any) (json.RawMessage, *jsonrpc.Error, bool) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, rpcError(err), true
		}
		return b, nil, true
	}
	fail := func(err error) (json.RawMessage, *jsonrpc.Error, bool) { return nil, rpcError(err), true }
	invalid := func(msg string) (json.RawMessage, *jsonrpc.Error, bool) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + msg}, true
	}
	if method == "tools/call" {
		var p *mcp.CallToolParamsRaw
		if jsonv2.Unmarshal(params, &p) != nil || p == nil {
			return invalid("tools/call takes a tool's name and arguments")
		}
		t, known := s.table()[p.Name]
		if !known { // the SDK's to answer
			return nil, nil, false
		}
		if t.Tasks == TaskForbidden {
			return nil, SessionTaskSupportError(p.Name, false), true
		}
		c := &Call{Tool: p.Name, Params: p, Caller: id, Authenticated: true, Session: id.Session}
		if extra != nil {
			c.Caller, c.Request, c.Authenticated = httpCaller(extra)
			c.Header = extra.Header
		}
		if c.Session == "" {
			c.Session = ss.ID()
		}
		c.Peer = newPeer(&mcp.CallToolRequest{Session: ss, Params: p, Extra: extra}, &s.cfg)
		st, out, err := tasks.StartTask(ctx, c)
		switch {
		case err != nil:
			return fail(err)
		case st == nil: // refused before its task began: a tool result, as a call's
			return answer(s.result(t, out))
		}
		if started != nil {
			started(st)
		}
		return answer(map[string]any{"task": sessionTaskObject(st)})
	}
	var p struct {
		TaskID string `json:"taskId"`
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && jsonv2.Unmarshal(params, &p) != nil {
		return invalid("malformed params of " + method)
	}
	if method == "tasks/list" {
		page, next, err := tasks.ListTasks(ctx, id, p.Cursor, sessionTaskPage)
		if err != nil {
			return fail(err)
		}
		list := make([]map[string]any, len(page))
		for i, st := range page {
			list[i] = sessionTaskObject(st)
		}
		res := map[string]any{"tasks": list}
		if next != "" {
			res["nextCursor"] = next
		}
		return answer(res)
	}
	switch method {
	case "tasks/get", "tasks/result", "tasks/cancel":
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}, true
	}
	if p.TaskID == "" {
		return invalid("taskId is required")
	}
	notFound := func() (json.RawMessage, *jsonrpc.Error, bool) {
		return invalid("no task " + p.TaskID + " is visible to you")
	}
	var st *TaskState
	var found bool
	var err error
	switch method {
	case "tasks/get":
		st, found, err = tasks.GetTask(ctx, id, p.TaskID)
	case "tasks/result":
		st, found, err = tasks.WaitTask(ctx, id, p.TaskID)
	case "tasks/cancel":
		if st, found, err = tasks.GetTask(ctx, id, p.TaskID); err != nil || !found {
			break
		}
		if final(st.Status) {
			return invalid("cannot cancel task " + p.TaskID + ": it is " + st.Status + " already")
		}
		if found, err = tasks.CancelTask(ctx, id, p.TaskID); err == nil && found {
			st, found, err = tasks.GetTask(ctx, id, p.TaskID)
		}
	}
	switch {
	case err != nil:
		return fail(err)
	case !found:
		return notFound()
	case method != "tasks/result":
		return answer(sessionTaskObject(st))
	case st.Error != nil:
		return nil, st.Error, true
	case st.Outcome == nil: // cancelled
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "task " + st.ID + " was cancelled"}, true
	}
	res := s.taskResult(st)
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[relatedTaskMeta] = map[string]string{"taskId": st.ID}
	return answer(res)
}

// SessionTaskSupportError is a session's error for a call of tool that
// does not keep its task support: one that runs only as a task called
// without params.task (required), or one that never does called with it.
// The 2025-11-25 tasks answer both with method not found.
func SessionTaskSupportError(tool string, required bool) *jsonrpc.Error {
	if required {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + tool + " runs only as a task: call it with params.task"}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + tool + " does not run as a task: call it without params.task"}
}

// final reports whether a task's status is one it never leaves.
func final(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// sessionTaskObject is a task as the session generation writes it. A
// task waiting for a person names the approval's link in its status
// message: that generation has no other place for it.
func sessionTaskObject(st *TaskState) map[string]any {
	msg := st.Message
	if q, ok := st.Questions["approval"].(*mcp.ElicitParams); ok && st.Status == "input_required" && q.URL != "" {
		msg += ": " + q.URL
	}
	return taskMembers(st, "ttl", "pollInterval", msg)
}

// sessionTaskHTTP answers a POST of a live session over HTTP that is a
// request of the experimental tasks, in JSON, and reports whether it did.
func (s *Server) sessionTaskHTTP(w http.ResponseWriter, req *http.Request, body []byte) bool {
	if req.Method != http.MethodPost || s.cfg.Sessions == nil ||
		!bytes.Contains(body, []byte(`"tasks/`)) && !bytes.Contains(body, []byte(`"task"`)) {
		return false
	}
	ses := s.cfg.Sessions.Get(req.Header.Get("Mcp-Session-Id"))
	if ses == nil {
		return false
	}
	msg, ok := readRequest(body)
	if !ok {
		return false
	}
	extra := &mcp.RequestExtra{TokenInfo: tokenInfo(req.Context()), Header: req.Header}
	id, _, _ := httpCaller(extra)
	var started *TaskState
	res, rpcErr, ok := s.sessionTask(req.Context(), ses.ServerSession(), id, extra, msg.Method, msg.Params, func(st *TaskState) { started = st })
	if !ok {
		return false
	}
	if started != nil { // notified once the client has the answer that names the task
		defer s.watchSessionTask(ses, id, started)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	if rpcErr != nil {
		_, _ = w.Write(mcpwire.RPCAnswer(json.RawMessage(msg.ID), rpcErr))
		return true
	}
	_, _ = w.Write(mcpwire.RPCResult(msg.ID, res))
	return true
}

// sessionTaskConn answers a request of the experimental tasks that came
// over a connection of Serve, in a goroutine of its own (tasks/result
// waits), and reports whether it does.
func (c *fastConn) sessionTask(req *jsonrpc.Request) bool {
	ss := c.ss.Load()
	if ss == nil || !req.IsCall() || !isSessionTask(req.Method, req.Params) {
		return false
	}
	if _, ok := c.s.host.(SessionTasks); !ok {
		return false
	}
	init := ss.InitializeParams()
	if init == nil || init.ProtocolVersion >= mcpwire.SessionlessProtocol {
		return false
	}
	if req.Method == "tools/call" { // the SDK answers a call of a tool it does not know
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if _, known := c.s.table()[p.Name]; !known {
			return false
		}
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		var started *TaskState
		res, rpcErr, _ := c.s.sessionTask(c.base, ss, c.s.cfg.Stdio, nil, req.Method, jsontext.Value(req.Params), func(st *TaskState) { started = st })
		ans := &jsonrpc.Response{ID: req.ID, Result: res}
		if rpcErr != nil {
			ans.Result, ans.Error = nil, rpcErr
		}
		if c.Connection.Write(c.base, ans) != nil || started == nil {
			return
		}
		// Notified after the task's answer, so that the client knows the
		// task a notification names; until the task or the connection ends.
		c.s.watchTask(c.base, c.s.cfg.Stdio, started, func(ctx context.Context, n *jsonrpc.Request) error {
			return c.Connection.Write(ctx, n)
		})
	}()
	return true
}
