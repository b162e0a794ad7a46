package carmy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// maxTaskWait bounds how long GET /tasks/{id}?wait= holds a request open.
const maxTaskWait = time.Minute

// cancelWait is how long POST /tasks/{id}/cancel waits for the task to
// stop before answering with the task as it stands.
const cancelWait = 5 * time.Second

// Page sizes of GET /tasks.
const (
	defaultTaskPage = 50
	maxTaskPage     = 200
)

// wireTask is a task as the HTTP API shows it.
type wireTask struct {
	ID          string        `json:"id"`
	Tool        string        `json:"tool"`
	Status      string        `json:"status"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
	ExecutionID string        `json:"execution_id,omitempty"`
	Output      jsontextRaw   `json:"output,omitzero"`
	Error       *Error        `json:"error,omitempty"`
	ApprovalID  string        `json:"approval_id,omitempty"`
	ApprovalURL string        `json:"approval_url,omitempty"`
	Questions   jsontextRaw   `json:"questions,omitzero"`
	Progress    *TaskProgress `json:"progress,omitempty"`
}

func (s *httpServer) wireTask(ctx context.Context, rec store.Task) wireTask {
	t := s.r.taskOf(rec, rec.Principal)
	w := wireTask{ID: rec.ID, Tool: rec.Tool, Status: string(rec.Status), CreatedAt: rec.Created.UTC(), UpdatedAt: rec.Updated.UTC(),
		ExecutionID: rec.ExecutionID, Progress: t.Progress}
	switch rec.Status {
	case store.TaskCompleted:
		w.Output = jsontextRaw(rec.Output)
	case store.TaskFailed, store.TaskCancelled:
		w.Error = taskError(rec).bounded()
	case store.TaskInputRequired:
		w.ApprovalID = rec.ApprovalID
		w.ApprovalURL = s.r.approvalURL(ctx, rec.ApprovalID)
		if len(rec.Questions) > len("{}") {
			w.Questions = jsontextRaw(rec.Questions)
		}
	}
	return w
}

func (s *httpServer) mountTasks(mux *http.ServeMux) {
	mux.HandleFunc("GET /tasks", private(authenticated(s, s.identify, s.serveTasks)))
	mux.HandleFunc("GET /tasks/{id}", private(authenticated(s, s.identify, s.serveTask)))
	mux.HandleFunc("POST /tasks/{id}/cancel", authenticated(s, s.identify, s.serveTaskCancel))
	mux.HandleFunc("POST /tasks/{id}/input", authenticated(s, s.identify, s.serveTaskInput))
	mux.HandleFunc("/tasks", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}/cancel", onlyMethod("POST"))
	mux.HandleFunc("/tasks/{id}/input", onlyMethod("POST"))
}

// prefersAsync reports whether a request prefers an asynchronous answer
// (RFC 7240: Prefer: respond-async, in any of its Prefer headers).
func prefersAsync(req *http.Request) bool {
	for _, h := range req.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			name, _, _ := strings.Cut(p, ";")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// startOverHTTP answers a call that prefers an asynchronous answer with
// 202 and its task, when its tool runs as a task. It reports false, having
// written nothing, for a tool that forbids tasks or does not exist: the
// call is then answered as any other (RFC 7240 lets a server ignore a
// preference).
func (s *httpServer) startOverHTTP(w http.ResponseWriter, req *http.Request, c Call) bool {
	if t, ok := s.r.tools[c.Tool]; !ok || t.meta.Tasks == TaskForbidden {
		return false
	}
	ctx := withHTTPRequest(req.Context(), req)
	task, err := s.r.Start(ctx, c)
	if err != nil {
		s.challengeMissing(w, req, err)
		writeError(w, err)
		return true
	}
	w.Header().Set("Location", "/tasks/"+task.ID)
	w.Header().Set("Preference-Applied", "respond-async")
	writeJSON(w, http.StatusAccepted, s.wireTask(ctx, task.rec))
	return true
}

// serveTasks lists the caller's tasks, newest first, a page at a time:
// ?limit= (at most 200) and ?cursor=, the next_cursor of the page before.
func (s *httpServer) serveTasks(w http.ResponseWriter, req *http.Request, id Identity) {
	limit := defaultTaskPage
	if v := req.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, Errorf(CodeInvalidInput, "limit=%q is not a positive number", v))
			return
		}
		limit = min(n, maxTaskPage)
	}
	cursor := req.URL.Query().Get("cursor")
	page, err := s.r.tasks.store.ListTasks(req.Context(), id.Principal, cursor, limit+1)
	if err != nil {
		writeError(w, s.r.taskStoreError(req.Context(), err))
		return
	}
	out := struct {
		Tasks      []wireTask `json:"tasks"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{Tasks: make([]wireTask, 0, min(len(page), limit))}
	ctx := withHTTPRequest(req.Context(), req)
	for i, t := range page {
		if i == limit {
			out.NextCursor = page[limit-1].ID
			break
		}
		out.Tasks = append(out.Tasks, s.wireTask(ctx, t))
	}
	writeJSON(w, http.StatusOK, out)
}

// serveTask shows one of the caller's tasks; ?wait=30s holds the request
// until the task's status changes or it is final, for at most that long
// (and a minute), or until the server shuts down.
func (s *httpServer) serveTask(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.r.readTask(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" {
		ctx, cancel, err := s.longPoll(req, v, maxTaskWait)
		if err != nil {
			writeError(w, err)
			return
		}
		defer cancel()
		if rec, err = s.awaitStatus(ctx, rec); err != nil && ctx.Err() == nil {
			writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(req.Context(), req), rec))
}

// awaitStatus returns rec's task once its status is another, or it is
// final, or ctx is done (with the task as last seen).
func (s *httpServer) awaitStatus(ctx context.Context, rec store.Task) (store.Task, error) {
	from := rec.Status
	for rec.Status == from && !rec.Status.Final() {
		next, err := s.r.awaitTask(ctx, rec)
		if err != nil {
			return rec, err
		}
		rec = next
	}
	return rec, nil
}

// serveTaskCancel cancels one of the caller's tasks and answers with it,
// once it stopped (or after a few seconds, as it stands). A task that is
// final is not changed: 409 says so.
func (s *httpServer) serveTaskCancel(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.r.cancelTask(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), cancelWait)
	defer cancel()
	for !rec.Status.Final() {
		next, err := s.r.awaitTask(ctx, rec)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && (e.Code == CodeTimeout || e.Code == CodeCancelled) {
				break
			}
			writeError(w, err)
			return
		}
		rec = next
	}
	writeJSON(w, http.StatusOK, s.wireTask(withHTTPRequest(req.Context(), req), rec))
}
