package httpapi

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
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

// Task is a task as the HTTP API shows it: the one type of the task
// object, which the server writes and the command reads.
type Task struct {
	ID          string    `json:"id"`
	Tool        string    `json:"tool"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Output      RawJSON   `json:"output,omitzero"`
	Error       *Error    `json:"error,omitempty"`
	ApprovalID  string    `json:"approval_id,omitempty"`
	ApprovalURL string    `json:"approval_url,omitempty"`
	Questions   RawJSON   `json:"questions,omitzero"`
	// Progress is the task's last progress report, nil for none.
	Progress *Progress `json:"progress,omitempty"`
}

// TaskPage is a page of GET /tasks: the one type of the document, which
// the server writes and the command reads.
type TaskPage struct {
	Tasks []Task `json:"tasks"`
	// NextCursor is the ?cursor= of the next page, "" on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Progress is a task's last progress report: the registry's task
// progress's wire form.
type Progress struct {
	Done    float64 `json:"done"`
	Total   float64 `json:"total,omitempty"`
	Message string  `json:"message,omitempty"`
}

// NewTask is rec as the API shows it, but for its error, its approval's
// URL and its progress, which the host adds.
func NewTask(rec store.Task) Task {
	t := Task{ID: rec.ID, Tool: rec.Tool, Status: string(rec.Status), CreatedAt: rec.Created.UTC(), UpdatedAt: rec.Updated.UTC(),
		ExecutionID: rec.ExecutionID}
	switch rec.Status {
	case store.TaskCompleted:
		t.Output = RawJSON(rec.Output)
	case store.TaskInputRequired:
		t.ApprovalID = rec.ApprovalID
		if len(rec.Questions) > len("{}") {
			t.Questions = RawJSON(rec.Questions)
		}
	}
	return t
}

func (s *Server) mountTasks(mux *http.ServeMux) {
	mux.HandleFunc("GET /tasks", private(authenticated(s, s.identify, s.serveTasks)))
	mux.HandleFunc("GET /tasks/{id}", private(authenticated(s, s.identify, s.serveTask)))
	mux.HandleFunc("POST /tasks/{id}/cancel", authenticated(s, s.identify, s.serveTaskCancel))
	mux.HandleFunc("POST /tasks/{id}/input", authenticated(s, s.identify, s.serveTaskInput))
	mux.HandleFunc("/tasks", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}", onlyMethod("GET"))
	mux.HandleFunc("/tasks/{id}/cancel", onlyMethod("POST"))
	mux.HandleFunc("/tasks/{id}/input", onlyMethod("POST"))
}

// serveTasks lists the caller's tasks, newest first, a page at a time:
// ?limit= (at most 200) and ?cursor=, the next_cursor of the page before.
func (s *Server) serveTasks(w http.ResponseWriter, req *http.Request, id Identity) {
	limit := defaultTaskPage
	if v := req.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, errorf(codeInvalidInput, "limit=%q is not a positive number", v))
			return
		}
		limit = min(n, maxTaskPage)
	}
	cursor := req.URL.Query().Get("cursor")
	page, err := s.host.Tasks(req.Context(), id.Principal, cursor, limit+1)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := TaskPage{Tasks: make([]Task, 0, min(len(page), limit))}
	for i, t := range page {
		if i == limit {
			out.NextCursor = page[limit-1].ID
			break
		}
		out.Tasks = append(out.Tasks, s.host.TaskDoc(req, t))
	}
	writeJSON(w, http.StatusOK, out)
}

// serveTask shows one of the caller's tasks; ?wait=30s holds the request
// until the task's status changes or it is final, for at most that long
// (and a minute), or until the server shuts down.
func (s *Server) serveTask(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.host.Task(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" {
		ctx, cancel, err := s.longPoll(req, v, maxTaskWait)
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer cancel()
		if rec, err = s.awaitStatus(ctx, rec); err != nil && ctx.Err() == nil {
			s.writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.host.TaskDoc(req, rec))
}

// awaitStatus returns rec's task once its status is another, or it is
// final, or ctx is done (with the task as last seen).
func (s *Server) awaitStatus(ctx context.Context, rec store.Task) (store.Task, error) {
	from := rec.Status
	for rec.Status == from && !rec.Status.Final() {
		next, err := s.host.AwaitTask(ctx, rec)
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
func (s *Server) serveTaskCancel(w http.ResponseWriter, req *http.Request, id Identity) {
	rec, err := s.host.CancelTask(req.Context(), req.PathValue("id"), id.Principal)
	if err != nil {
		s.writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), cancelWait)
	defer cancel()
	for !rec.Status.Final() {
		next, err := s.host.AwaitTask(ctx, rec)
		if err != nil {
			if c := s.public(err).Code; c == codeTimeout || c == codeCancelled {
				break
			}
			s.writeError(w, err)
			return
		}
		rec = next
	}
	writeJSON(w, http.StatusOK, s.host.TaskDoc(req, rec))
}

// Over HTTP, a task that waits for its tool's questions shows them
// (questions, as MCP's inputRequests: by question id, each an elicitation
// with its message and requested schema), and POST /tasks/{id}/input
// answers them, on any host, as MCP's tasks/update does.

// serveTaskInput answers the questions one of the caller's tasks waits
// for. The body is a JSON object of answers by question id, each as MCP's
// elicitation result: {"action":"accept","content":{…}}, or the action
// "decline" or "cancel". It answers with the task as it then stands; an
// answer to a question the task does not wait for is ignored.
func (s *Server) serveTaskInput(w http.ResponseWriter, req *http.Request, id Identity) {
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeErrorStatus(w, http.StatusUnsupportedMediaType, errorf(codeInvalidInput, "send the answers with Content-Type: application/json"))
		return
	}
	body, err := io.ReadAll(req.Body) // bounded by the body limit
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeErrorStatus(w, http.StatusRequestEntityTooLarge, errorf(codeInvalidInput, "the answers are larger than the limit of %d bytes", s.cfg.BodyLimit))
			return
		}
		s.writeError(w, &Error{Code: codeCancelled, Message: "the request body could not be read", Retryable: true})
		return
	}
	ctx := req.Context()
	if err := s.host.AnswerTask(ctx, req.PathValue("id"), id.Principal, body); err != nil {
		s.writeError(w, err)
		return
	}
	rec, err := s.host.Task(ctx, req.PathValue("id"), id.Principal)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.host.TaskDoc(req, rec))
}
