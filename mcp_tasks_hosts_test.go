package carmy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// askHost serves the ask tool to alice and bob over HTTP, on store s.
func askHost(t *testing.T, s *hostsStore) string {
	t.Helper()
	reg := taskRegistry(t, carmy.New().Store(s).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob"},
	)), carmy.Tool(func(ctx carmy.Context) (string, error) {
		var c Confirm
		if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
			return "", err
		}
		if c.Sure {
			return "sure", nil
		}
		return "unsure", nil
	}, carmy.Read, carmy.Name("ask"), carmy.Register(false)))
	srv := serve(t, reg)
	return srv.URL
}

// TestMCPTaskQuestionAcrossHosts: a task's tool asks its question on the
// host that runs it; another host sharing the store shows the question
// (tasks/get, inputRequests, with its message and form) and takes the
// answer (tasks/update), which reaches the running tool: the task
// completes with it, read from either host. An answer to a question not
// asked, and another principal's, change nothing.
func TestMCPTaskQuestionAcrossHosts(t *testing.T) {
	t.Parallel()
	s := newHostsStore(t)
	onA := taskMCP{t: t, url: askHost(t, s), token: "alice", tasks: true}
	onB := taskMCP{t: t, url: askHost(t, s), token: "alice", tasks: true}
	bobOnB := taskMCP{t: t, url: onB.url, token: "bob", tasks: true}

	id := onA.start("ask", `{}`)
	r := onB.await(id, "input_required")
	q := obj(obj(r["inputRequests"])["confirm"])
	if p := obj(q["params"]); q["method"] != "elicitation/create" || p["message"] != "Sure?" || !strings.Contains(jsonText(p["requestedSchema"]), `"sure"`) {
		t.Fatalf("host b shows the question as %v; want the tool's form, by its id", r["inputRequests"])
	}

	if _, code, _ := bobOnB.rpc("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"confirm":{"action":"accept","content":{"sure":true}}},`); code != -32602 {
		t.Fatalf("another principal's tasks/update: error %d; want -32602", code)
	}
	if _, code, _ := onB.rpc("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"other":{"action":"accept","content":{"sure":true}}},`); code != 0 {
		t.Fatalf("tasks/update of a question not asked: error %d", code)
	}
	if r := onA.get(id); r["status"] != "input_required" {
		t.Fatalf("after an answer to a question not asked the task is %v; want still input_required", r["status"])
	}

	if _, code, _ := onB.rpc("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"confirm":{"action":"accept","content":{"sure":true}}},`); code != 0 {
		t.Fatalf("tasks/update on host b: error %d", code)
	}
	done := onB.await(id, "completed")
	if got := jsonText(obj(done["result"])["structuredContent"]); !strings.Contains(got, `"sure"`) || strings.Contains(got, "unsure") {
		t.Fatalf("the task answered on host b = %v; want the tool's result with the answer", done["result"])
	}
	if r := onA.get(id); r["status"] != "completed" {
		t.Fatalf("host a reads the task %v; want completed", r["status"])
	}
}

// TestHTTPTaskQuestionAcrossHosts: over HTTP, another host shows the
// question an MCP client's task waits for (GET /tasks/{id}: questions, by
// id), and POST /tasks/{id}/input answers it there, as tasks/update does;
// malformed answers are 400 and change nothing, another principal's are
// 404.
func TestHTTPTaskQuestionAcrossHosts(t *testing.T) {
	t.Parallel()
	s := newHostsStore(t)
	onA := taskMCP{t: t, url: askHost(t, s), token: "alice", tasks: true}
	b := askHost(t, s)
	id := onA.start("ask", `{}`)
	onA.await(id, "input_required")
	do := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		status, v := httpDo(t, nil, method, b+path, body, "Authorization", "Bearer "+token)
		return status, obj(v)
	}
	status, task := do("GET", "/tasks/"+id, "alice", "")
	q := obj(obj(task["questions"])["confirm"])
	if status != 200 || task["status"] != "input_required" || obj(q["params"])["message"] != "Sure?" {
		t.Fatalf("GET /tasks/%s on host b = %d %v; want input_required with the question", id, status, task)
	}
	for _, body := range []string{`[]`, `{"confirm":{"action":"maybe"}}`, `{"confirm":"yes"}`} {
		if status, _ := do("POST", "/tasks/"+id+"/input", "alice", body); status != 400 {
			t.Fatalf("POST input %s = %d; want 400", body, status)
		}
	}
	if status, _ := do("POST", "/tasks/"+id+"/input", "bob", `{"confirm":{"action":"accept","content":{"sure":true}}}`); status != 404 {
		t.Fatalf("another principal's POST input = %d; want 404", status)
	}
	if r := onA.get(id); r["status"] != "input_required" {
		t.Fatalf("after refused answers the task is %v; want still input_required", r["status"])
	}
	if status, _ := do("POST", "/tasks/"+id+"/input", "alice", `{"confirm":{"action":"accept","content":{"sure":false}}}`); status != 200 {
		t.Fatalf("POST input = %d; want 200", status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, task = do("GET", "/tasks/"+id+"?wait=5s", "alice", "")
		if task["status"] == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task after its answer over HTTP is %v; want completed", task)
		}
	}
	if task["output"] != "unsure" {
		t.Fatalf("output = %v; want the tool's result with the answer given over HTTP", task["output"])
	}
}
