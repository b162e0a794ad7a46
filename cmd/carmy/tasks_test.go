package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

type SlowInput struct {
	N int `json:"n"`
}

// tasksTestServer serves a slow tool, which reports progress and answers
// once released (or cancelled), and one that forbids tasks.
func tasksTestServer(t *testing.T) (string, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	slow := func(ctx carmy.Context, in SlowInput) (AddOutput, error) {
		ctx.Progress(1, 2, "halfway")
		select {
		case <-release:
			return AddOutput{Sum: in.N}, nil
		case <-ctx.Done():
			return AddOutput{}, ctx.Err()
		}
	}
	return serve(t, carmy.New().Tool(
		carmy.Tool(slow, carmy.Read, carmy.Name("slow"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(add, carmy.None, carmy.Tasks(carmy.TaskForbidden), carmy.Register(false)),
	).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-token"), Principal: "alice"},
		carmy.Token{SHA256: carmy.HashToken("bob-token"), Principal: "bob"},
	))), release
}

var startedTask = regexp.MustCompile(`^task ([0-9a-f]+): slow (\S+)`)

func TestTasksCommand(t *testing.T) {
	url, release := tasksTestServer(t)
	start := func() string {
		t.Helper()
		code, stdout, stderr := carmyRun("call", "--async", "--token", "alice-token", url, "slow", `{"n":7}`)
		m := startedTask.FindStringSubmatch(stdout)
		if code != 0 || m == nil || m[2] != "working" || !strings.Contains(stderr, "carmy tasks "+url+" wait "+m[1]) {
			t.Fatalf("carmy call --async: exit %d\n%s%s", code, stdout, stderr)
		}
		return m[1]
	}
	first := start()

	code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url)
	if code != 0 || !strings.Contains(stdout, "ID") || !strings.Contains(stdout, first+"  slow  working") {
		t.Fatalf("carmy tasks: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := carmyRun("tasks", "--token", "bob-token", url); code != 0 || strings.Contains(stdout, first) {
		t.Fatalf("bob's carmy tasks shows alice's task: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := carmyRun("tasks", "--token", "bob-token", url, "get", first); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Fatalf("bob's carmy tasks get of alice's task: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr := carmyRun("tasks", "--token", "alice-token", url, "get", first); code != 0 || !strings.Contains(stdout, "task "+first+": slow working") {
		t.Fatalf("carmy tasks get: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = carmyRun("tasks", "--token", "alice-token", url, "cancel", first)
	if code != 0 || !strings.Contains(stdout, "slow cancelled") || !strings.Contains(stdout, "error: cancelled") {
		t.Fatalf("carmy tasks cancel: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := carmyRun("tasks", "--token", "alice-token", url, "cancel", first); code != 1 || !strings.Contains(stderr, "error: conflict") {
		t.Fatalf("carmy tasks cancel of a cancelled task: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := carmyRun("tasks", "--token", "alice-token", url, "wait", first); code != 1 || !strings.Contains(stderr, "error: cancelled") {
		t.Fatalf("carmy tasks wait of a cancelled task: exit %d\n%s", code, stderr)
	}

	second := start()
	close(release)
	code, stdout, stderr = carmyRun("tasks", "--token", "alice-token", url, "wait", second)
	if code != 0 || stdout != "{\n  \"sum\": 7\n}\n" {
		t.Fatalf("carmy tasks wait: exit %d\n%q%s", code, stdout, stderr)
	}
	code, stdout, _ = carmyRun("tasks", "--json", "--token", "alice-token", url, "wait", second)
	if code != 0 || !strings.Contains(stdout, `"status":"completed"`) {
		t.Fatalf("carmy tasks --json wait: exit %d\n%s", code, stdout)
	}

	// A tool that forbids tasks answers at once.
	code, stdout, _ = carmyRun("call", "--async", "--token", "alice-token", url, "add", `{"a":1,"b":2}`)
	if code != 0 || stdout != "{\n  \"sum\": 3\n}\n" {
		t.Fatalf("carmy call --async of a tool that forbids tasks: exit %d\n%s", code, stdout)
	}
	if code, _, _ := carmyRun("tasks", "--token", "alice-token", url, "frob", "x"); code != 2 {
		t.Fatalf("carmy tasks URL frob x: exit %d; want 2", code)
	}
}
