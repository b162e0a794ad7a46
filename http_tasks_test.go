package carmy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// tasksServer serves the exporter (and a tool that forbids tasks) to
// alice and bob.
func tasksServer(t *testing.T, e *exporter) (*httptest.Server, func(tok string) []string) {
	t.Helper()
	count := carmy.Tool(func(in ExportIn) (ExportOut, error) { return ExportOut(in), nil }, carmy.Read,
		carmy.Name("count"), carmy.Tasks(carmy.TaskForbidden), carmy.Register(false))
	reg := taskRegistry(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob"},
	)), e.tool(), count)
	srv := serve(t, reg)
	return srv, func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func TestTasksOverHTTP(t *testing.T) {
	t.Parallel()
	e := newExporter()
	srv, as := tasksServer(t, e)
	c := http.DefaultClient
	async := append(as("alice"), "Prefer", "respond-async")

	res, _ := roundTrip(t, c, "POST", srv.URL+"/tools/export", `{"rows":5}`, "Authorization", "Bearer alice", "Prefer", "wait=10, respond-async")
	if res.StatusCode != http.StatusAccepted || !strings.HasPrefix(res.Header.Get("Location"), "/tasks/") || res.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("POST with Prefer: respond-async = %d, Location %q; want 202 and /tasks/{id}", res.StatusCode, res.Header.Get("Location"))
	}
	location := res.Header.Get("Location")

	status, body := httpDo(t, c, "POST", srv.URL+"/tools/export", `{"rows":7}`, async...)
	task := obj(body)
	id, _ := task["id"].(string)
	if status != 202 || id == "" || task["tool"] != "export" || task["status"] != "working" || task["created_at"] == nil || task["updated_at"] == nil {
		t.Fatalf("202 body = %v; want the working task", body)
	}
	for _, absent := range []string{"output", "error", "approval_id"} {
		if _, ok := task[absent]; ok {
			t.Fatalf("a working task has %s: %v", absent, task)
		}
	}

	// Another principal, or an unknown id: 404, alike.
	for _, tc := range []struct{ tok, id string }{{"bob", id}, {"alice", "nope"}} {
		for _, m := range []struct{ method, path string }{{"GET", "/tasks/" + tc.id}, {"POST", "/tasks/" + tc.id + "/cancel"}} {
			status, body := httpDo(t, c, m.method, srv.URL+m.path, "", as(tc.tok)...)
			if status != 404 || errObj(body)["code"] != "not_found" || errObj(body)["message"] != `no task "`+tc.id+`" is visible to you` {
				t.Fatalf("%s %s as %s = %d %v; want 404 not_found", m.method, m.path, tc.tok, status, body)
			}
		}
	}
	if status, _ := httpDo(t, c, "GET", srv.URL+"/tasks/"+id, ""); status != 401 {
		t.Fatalf("GET /tasks/{id} without a token = %d; want 401", status)
	}

	// A page at a time, newest first; bob sees none of alice's.
	status, body = httpDo(t, c, "GET", srv.URL+"/tasks?limit=1", "", as("alice")...)
	page := obj(body)
	tasks, _ := page["tasks"].([]any)
	cursor, _ := page["next_cursor"].(string)
	if status != 200 || len(tasks) != 1 || obj(tasks[0])["id"] != id || cursor != id {
		t.Fatalf("GET /tasks?limit=1 = %d %v; want the newest task and a cursor", status, body)
	}
	_, body = httpDo(t, c, "GET", srv.URL+"/tasks?limit=1&cursor="+cursor, "", as("alice")...)
	if tasks, _ := obj(body)["tasks"].([]any); len(tasks) != 1 || "/tasks/"+obj(tasks[0])["id"].(string) != location {
		t.Fatalf("second page = %v; want the first task", body)
	}
	if _, ok := obj(body)["next_cursor"]; ok {
		t.Fatalf("last page = %v; want no next_cursor", body)
	}
	if _, body := httpDo(t, c, "GET", srv.URL+"/tasks", "", as("bob")...); len(obj(body)["tasks"].([]any)) != 0 {
		t.Fatalf("bob's tasks = %v; want none", body)
	}
	if status, _ := httpDo(t, c, "GET", srv.URL+"/tasks?limit=x", "", as("alice")...); status != 400 {
		t.Fatalf("limit=x = %d; want 400", status)
	}

	// ?wait= answers once the task ends; the progress is kept.
	close(e.release)
	status, body = httpDo(t, c, "GET", srv.URL+"/tasks/"+id+"?wait=30s", "", as("alice")...)
	task = obj(body)
	if status != 200 || task["status"] != "completed" || obj(task["output"])["rows"] != 7.0 || obj(task["progress"])["total"] != 7.0 {
		t.Fatalf("GET ?wait= = %d %v; want completed with output and progress", status, body)
	}
	status, body = httpDo(t, c, "POST", srv.URL+"/tasks/"+id+"/cancel", "", as("alice")...)
	if status != 409 || errObj(body)["code"] != "conflict" || !strings.Contains(errObj(body)["message"].(string), "nothing changed") {
		t.Fatalf("cancel of a completed task = %d %v; want 409 saying nothing changed", status, body)
	}
	if _, body := httpDo(t, c, "GET", srv.URL+"/tasks/"+id, "", as("alice")...); obj(body)["status"] != "completed" {
		t.Fatalf("after the refused cancel: %v", body)
	}
}

func TestTaskCancelOverHTTP(t *testing.T) {
	t.Parallel()
	e := newExporter()
	srv, as := tasksServer(t, e)
	c := http.DefaultClient
	_, body := httpDo(t, c, "POST", srv.URL+"/tools/export", `{"rows":7}`, append(as("alice"), "Prefer", "respond-async")...)
	id := obj(body)["id"].(string)
	status, body := httpDo(t, c, "POST", srv.URL+"/tasks/"+id+"/cancel", "", as("alice")...)
	task := obj(body)
	if status != 200 || task["status"] != "cancelled" || obj(task["error"])["code"] != "cancelled" {
		t.Fatalf("cancel = %d %v; want the cancelled task with its error", status, body)
	}
	if n := e.runs.Load(); n != 1 {
		t.Fatalf("runs = %d", n)
	}
}

func TestPreferAsyncOnAToolThatForbidsTasks(t *testing.T) {
	t.Parallel()
	srv, as := tasksServer(t, newExporter())
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/count", `{"rows":3}`, append(as("alice"), "Prefer", "respond-async")...)
	if status != 200 || obj(obj(body)["output"])["rows"] != 3.0 {
		t.Fatalf("Prefer: respond-async on a tool that forbids tasks = %d %v; want the synchronous answer", status, body)
	}
	status, body = httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/export", `{"rows":0}`, append(as("alice"), "Prefer", "respond-async")...)
	if status != 400 || errObj(body)["code"] != "invalid_input" {
		t.Fatalf("an invalid input started as a task = %d %v; want 400 at once", status, body)
	}
}

func TestTaskWaitingForAPersonOverHTTP(t *testing.T) {
	t.Parallel()
	srv, _, runs := approvalServer(t, carmy.New())
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":3}`, "Prefer", "respond-async")
	task := obj(body)
	aid, _ := task["approval_id"].(string)
	link, _ := task["approval_url"].(string)
	if status != 202 || task["status"] != "input_required" || aid == "" || link != srv.URL+"/console?approval="+aid {
		t.Fatalf("a destructive call started as a task = %d %v; want input_required with the approval and its page", status, body)
	}
	if runs.Load() != 0 {
		t.Fatal("the call ran before a person approved it")
	}
}

// TestTaskDocumentBytes pins the bytes of the task object that GET
// /tasks/{id} writes, and which the command reads: a completed task with
// its output and progress, and a failed one with its error's fields.
func TestTaskDocumentBytes(t *testing.T) {
	t.Parallel()
	type In struct {
		Fail bool `json:"fail"`
	}
	type Out struct {
		Note string `json:"note"`
	}
	fn := func(ctx carmy.Context, in In) (Out, error) {
		ctx.Progress(1, 2, "half <b>done</b> & more")
		if in.Fail {
			return Out{}, &carmy.Error{Code: carmy.CodeInvalidInput, Message: "the note is <bad>",
				Fields: []carmy.FieldError{{Path: "note", Message: "must not be empty"}, {Path: "", Message: "and more"}}}
		}
		return Out{Note: "kept <b>é</b>"}, nil
	}
	reg := build(t, carmy.New().Tool(carmy.Tool(fn, carmy.Read, carmy.Name("note"), carmy.Description("Keeps a note."), carmy.Register(false))))
	srv := serve(t, reg)
	stamps := regexp.MustCompile(`"(id|created_at|updated_at|execution_id)":"[^"]*"`)
	var docs []string
	for _, tt := range []struct{ input, want string }{
		{`{"fail":false}`, `{"id":"·","tool":"note","status":"completed","created_at":"·","updated_at":"·","execution_id":"·","output":{"note":"kept <b>é</b>"},"progress":{"done":1,"total":2,"message":"half <b>done</b> & more"}}`},
		{`{"fail":true}`, `{"id":"·","tool":"note","status":"failed","created_at":"·","updated_at":"·","error":{"code":"invalid_input","message":"the note is <bad>","fields":[{"path":"note","message":"must not be empty"},{"path":"","message":"and more"}],"retryable":false},"progress":{"done":1,"total":2,"message":"half <b>done</b> & more"}}`},
	} {
		res, raw := roundTrip(t, http.DefaultClient, "POST", srv.URL+"/tools/note", tt.input, "Prefer", "respond-async")
		var started struct {
			ID string `json:"id"`
		}
		if res.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &started) != nil {
			t.Fatalf("POST = %d %s; want 202 and the task", res.StatusCode, raw)
		}
		_, raw = roundTrip(t, http.DefaultClient, "GET", srv.URL+"/tasks/"+started.ID+"?wait=30s", "")
		if got := stamps.ReplaceAllString(strings.TrimSpace(string(raw)), `"$1":"·"`); got != tt.want {
			t.Errorf("GET /tasks/{id} of %s =\n%s\nwant\n%s", tt.input, got, tt.want)
		}
		docs = append(docs, tt.want)
	}
	// The page of GET /tasks holds the same objects, and the cursor of
	// the next page.
	_, raw := roundTrip(t, http.DefaultClient, "GET", srv.URL+"/tasks?limit=1", "")
	got := stamps.ReplaceAllString(regexp.MustCompile(`"next_cursor":"[^"]*"`).ReplaceAllString(strings.TrimSpace(string(raw)), `"next_cursor":"·"`), `"$1":"·"`)
	if got != `{"tasks":[`+docs[0]+`],"next_cursor":"·"}` && got != `{"tasks":[`+docs[1]+`],"next_cursor":"·"}` {
		t.Errorf("GET /tasks?limit=1 =\n%s\nwant a page of one of\n%s", got, strings.Join(docs, "\n"))
	}
}
