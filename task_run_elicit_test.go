package carmy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// askingTool asks its user whether they are sure, and says what they
// answered: "sure", "unsure", or "declined" when they would not answer.
func askingTool(opts ...carmy.Option) *carmy.ToolDef {
	return carmy.Tool(func(ctx carmy.Context) (string, error) {
		var c Confirm
		ok, err := ctx.Elicit("Sure?", &c)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return "declined", nil
		case c.Sure:
			return "sure", nil
		}
		return "unsure", nil
	}, carmy.Read, append([]carmy.Option{carmy.Name("ask"), carmy.Register(false)}, opts...)...)
}

// askingHosts are two registries sharing one store, each serving the
// asking tool to alice and bob.
func askingHosts(t *testing.T, opts ...carmy.Option) (a, b *carmy.Registry) {
	t.Helper()
	s := newHostsStore(t)
	host := func() *carmy.Registry {
		return taskRegistry(t, carmy.New().Store(s).Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"},
			carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob"},
		)), askingTool(opts...))
	}
	return host(), host()
}

// TestHTTPTaskElicits: a task started over HTTP whose tool asks with
// Context.Elicit is input_required with the question (GET /tasks/{id}:
// questions, by id); POST /tasks/{id}/input on another host sharing the
// store answers it, and the tool, still running on the first host, goes
// on with the answer. Another principal's answer is 404 and an answer to a
// question not asked is ignored: neither changes the task.
func TestHTTPTaskElicits(t *testing.T) {
	t.Parallel()
	regA, regB := askingHosts(t)
	a, b := serve(t, regA).URL, serve(t, regB).URL
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	res := do(t, "POST", a+"/tools/ask", `{}`, append(as("alice"), "Prefer", "respond-async")...)
	id, _ := res.body["id"].(string)
	if res.status != 202 || id == "" {
		t.Fatalf("POST /tools/ask, respond-async = %d %v; want 202 and a task", res.status, res.body)
	}
	task := awaitHTTP(t, b+"/tasks/"+id, as("alice"), "input_required")
	q := obj(obj(task["questions"])["confirm"])
	if p := obj(q["params"]); q["method"] != "elicitation/create" || p["message"] != "Sure?" || !strings.Contains(jsonText(p["requestedSchema"]), `"sure"`) {
		t.Fatalf("host b shows the questions %v; want the tool's question confirm with its form", task["questions"])
	}

	if r := do(t, "POST", b+"/tasks/"+id+"/input", `{"confirm":{"action":"accept","content":{"sure":true}}}`, as("bob")...); r.status != 404 {
		t.Fatalf("bob's answer = %d %v; want 404", r.status, r.body)
	}
	if r := do(t, "POST", b+"/tasks/"+id+"/input", `{"other":{"action":"accept","content":{"sure":true}}}`, as("alice")...); r.status != 200 || r.body["status"] != "input_required" || obj(r.body["questions"])["confirm"] == nil {
		t.Fatalf("an answer to a question not asked = %d %v; want the task unchanged, still asking", r.status, r.body)
	}
	if r := do(t, "GET", a+"/tasks/"+id, "", as("alice")...); r.body["status"] != "input_required" {
		t.Fatalf("after refused and stray answers the task is %v; want input_required", r.body["status"])
	}

	if r := do(t, "POST", b+"/tasks/"+id+"/input", `{"confirm":{"action":"accept","content":{"sure":true}}}`, as("alice")...); r.status != 200 {
		t.Fatalf("alice's answer on host b = %d %v; want 200", r.status, r.body)
	}
	done := awaitHTTP(t, a+"/tasks/"+id, as("alice"), "completed")
	if done["output"] != "sure" || done["questions"] != nil {
		t.Fatalf("the task after its answer = %v; want output sure, no questions", done)
	}
}

// awaitHTTP reads the task at url until it has status want.
func awaitHTTP(t *testing.T, url string, header []string, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := do(t, "GET", url+"?wait=2s", "", header...)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %v", url, r.status, r.body)
		}
		if r.body["status"] == want {
			return r.body
		}
		if time.Now().After(deadline) {
			t.Fatalf("task at %s is %v; want %s", url, r.body, want)
		}
	}
}

// TestGoTaskElicits: a task started in Go whose tool asks is
// input_required with Task.Questions; Task.Answer on another registry
// sharing the store answers it, and Wait returns the tool's result with
// the answer. Answers with a bad action or content, to a question not
// asked, or by another principal change nothing.
func TestGoTaskElicits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := askingHosts(t)
	task, err := a.Start(ctx, carmy.Call{Tool: "ask", Principal: "alice", Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	onB := awaitStatus(t, b, task.ID, "alice", carmy.TaskInputRequired)
	if len(onB.Questions) != 1 || onB.Questions[0].ID != "confirm" || onB.Questions[0].Message != "Sure?" || !strings.Contains(string(onB.Questions[0].Schema), `"sure"`) {
		t.Fatalf("Questions on host b = %+v; want the tool's question confirm with its form", onB.Questions)
	}

	wantCode(t, onB.Answer(ctx, "other", carmy.TaskAnswer{Action: "accept", Content: Confirm{Sure: true}}), carmy.CodeConflict)
	wantCode(t, onB.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "maybe"}), carmy.CodeInvalidInput)
	wantCode(t, onB.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "accept", Content: "yes"}), carmy.CodeInvalidInput)
	if _, err := b.Task(ctx, task.ID, carmy.WithPrincipal("bob")); err == nil {
		t.Fatal("bob reads alice's task; want not found")
	}
	if again := awaitStatus(t, a, task.ID, "alice", carmy.TaskInputRequired); len(again.Questions) != 1 {
		t.Fatalf("after refused answers the task asks %+v; want its question still", again.Questions)
	}

	if err := onB.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "accept", Content: Confirm{Sure: true}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := task.Wait(wctx)
	if err != nil || string(res.Output) != `"sure"` || task.Status != carmy.TaskCompleted || task.Questions != nil {
		t.Fatalf("Wait = %s, %v (task %+v); want the result with the answer", res.Output, err, task)
	}
	wantCode(t, onB.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "accept", Content: Confirm{}}), carmy.CodeConflict)
}

// TestTaskElicitDeclinedAndUnanswered: a declined question is Elicit's
// false with no error, as for an MCP client; a question nobody answers
// waits under the tool's Timeout, and a cancel stops the task while it
// waits.
func TestTaskElicitDeclinedAndUnanswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := func(reg *carmy.Registry) *carmy.Task {
		t.Helper()
		task, err := reg.Start(ctx, carmy.Call{Tool: "ask", Principal: "alice", Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return awaitStatus(t, reg, task.ID, "alice", carmy.TaskInputRequired)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	t.Run("decline", func(t *testing.T) {
		reg, _ := askingHosts(t)
		task := start(reg)
		if err := task.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "decline"}); err != nil {
			t.Fatal(err)
		}
		if res, err := task.Wait(wctx); err != nil || string(res.Output) != `"declined"` {
			t.Fatalf("Wait = %s, %v; want the tool's answer to a decline", res.Output, err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		reg, _ := askingHosts(t, carmy.Timeout(100*time.Millisecond))
		task := start(reg)
		_, err := task.Wait(wctx)
		wantCode(t, err, carmy.CodeTimeout)
		if task.Status != carmy.TaskFailed {
			t.Fatalf("status %s; want failed", task.Status)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		reg, _ := askingHosts(t)
		task := start(reg)
		if err := task.Cancel(wctx); err != nil {
			t.Fatal(err)
		}
		if task.Status != carmy.TaskCancelled {
			t.Fatalf("status %s after Cancel; want cancelled", task.Status)
		}
	})
}
