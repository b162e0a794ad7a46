package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

type Confirm struct {
	Sure bool `json:"sure"`
}

var askTask = regexp.MustCompile(`^task ([0-9a-f]+): ask `)

// TestTasksAnswer: carmy tasks get shows the question a task's tool
// waits for, with its form; carmy tasks answer answers it (accept with
// the form's fields, or decline), and the tool goes on with the answer.
// Another caller's answer is not found, and an answer that is not an
// object is a usage mistake; neither changes the task.
func TestTasksAnswer(t *testing.T) {
	ask := func(ctx carmy.Context) (string, error) {
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
	}
	url := serve(t, carmy.New().Tool(carmy.Tool(ask, carmy.Read, carmy.Name("ask"), carmy.Register(false))).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-token"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob-token"), Principal: "bob"},
	)))
	asking := func() string {
		t.Helper()
		code, stdout, stderr := carmyRun("call", "--async", "--token", "alice-token", url, "ask", `{}`)
		m := askTask.FindStringSubmatch(stdout)
		if code != 0 || m == nil {
			t.Fatalf("carmy call --async: exit %d\n%s%s", code, stdout, stderr)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "get", m[1])
			if code == 0 && strings.Contains(stdout, "ask input_required") {
				if !strings.Contains(stdout, "  asks confirm: Sure?\n") || !strings.Contains(stdout, `form: {`) || !strings.Contains(stdout, `"sure"`) {
					t.Fatalf("carmy tasks get of a task that asks:\n%s", stdout)
				}
				return m[1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("carmy tasks get: exit %d\n%s%s; want input_required", code, stdout, stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	id := asking()
	if code, _, stderr := carmyRun("tasks", "--token", "bob-token", url, "answer", id, "confirm", `{"sure":true}`); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Fatalf("bob's carmy tasks answer: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := carmyRun("tasks", "--token", "alice-token", url, "answer", id, "confirm", `yes`); code != 2 || !strings.Contains(stderr, "JSON object") {
		t.Fatalf("carmy tasks answer with an answer that is not an object: exit %d\n%s", code, stderr)
	}
	if code, stdout, _ := carmyRun("tasks", "--token", "alice-token", url, "get", id); code != 0 || !strings.Contains(stdout, "asks confirm") {
		t.Fatalf("after refused answers: exit %d\n%s; want the task still asking", code, stdout)
	}
	if code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "answer", id, "confirm", `{"sure":true}`); code != 0 || !strings.Contains(stdout, "task "+id+": ask") {
		t.Fatalf("carmy tasks answer: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "wait", id); code != 0 || stdout != "\"sure\"\n" {
		t.Fatalf("carmy tasks wait after the answer: exit %d\n%q%s", code, stdout, stderr)
	}

	id = asking()
	if code, _, stderr := carmyRun("tasks", "--timeout", "300ms", "--token", "alice-token", url, "wait", id); code != 1 || !strings.Contains(stderr, "waits for answers to confirm") || !strings.Contains(stderr, "carmy tasks "+url+" answer "+id) {
		t.Fatalf("carmy tasks wait of a task that asks: exit %d\n%s; want how to answer, then the timeout", code, stderr)
	}
	if code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "answer", id, "confirm", "decline"); code != 0 {
		t.Fatalf("carmy tasks answer decline: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "wait", id); code != 0 || stdout != "\"declined\"\n" {
		t.Fatalf("carmy tasks wait after a decline: exit %d\n%q%s", code, stdout, stderr)
	}
}
