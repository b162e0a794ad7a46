package carmy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// taskStatusStdio serves reg over stdio and returns a writer of the client's
// lines, the server's messages as they come, and a channel closed once
// ServeStdio returned; closing the writer's side ends the session.
func taskStatusStdio(t *testing.T, reg *carmy.Registry) (send func(string), msgs chan map[string]any, hangUp func(), done chan struct{}) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done = make(chan struct{})
	go func() {
		_ = reg.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		close(done)
	}()
	msgs = make(chan map[string]any, 100)
	go func() {
		defer close(msgs)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		<-done
	})
	send = func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	return send, msgs, func() { inW.Close() }, done
}

// nextMessage is the server's next message, or fails the test.
func nextMessage(t *testing.T, msgs chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the server closed the connection")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for the server")
	}
	return nil
}

// statusOf is the task status a notifications/tasks/status names, and
// "" for another message.
func statusOf(t *testing.T, m map[string]any, task string) string {
	t.Helper()
	if m["method"] != "notifications/tasks/status" {
		return ""
	}
	p := obj(m["params"])
	status, _ := p["status"].(string)
	if m["id"] != nil || p["taskId"] != task || p["createdAt"] == nil || p["lastUpdatedAt"] == nil || p["pollInterval"] == nil || !taskStatuses[status] {
		t.Fatalf("status notification %v; want a notification with the task %s", m, task)
	}
	return status
}

// TestMCPSessionTaskStatusNotifications: over stdio, a session's task
// that goes working → input_required → working → completed sends
// notifications/tasks/status with the task, after the answer that created
// it, once per status, in order, and nothing after the final one; a task
// still running when the client goes away does not hold the session.
func TestMCPSessionTaskStatusNotifications(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	reg := taskRegistry(t, carmy.New(), carmy.Tool(func(ctx carmy.Context) (string, error) {
		var c Confirm
		if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
			return "", err
		}
		<-release
		return "done", nil
	}, carmy.Read, carmy.Name("ask"), carmy.Register(false)))
	start := func(t *testing.T) (func(string), chan map[string]any, func(), chan struct{}, map[string]any, []map[string]any) {
		send, msgs, hangUp, done := taskStatusStdio(t, reg)
		send(sessionInit)
		if m := nextMessage(t, msgs); jsonText(m["id"]) != "1" {
			t.Fatalf("initialize answered %v", m)
		}
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{},"task":{"ttl":60000}}}`)
		// The answer comes before any notification of its task; the
		// tool's question may come first.
		var early []map[string]any
		m := nextMessage(t, msgs)
		for m["method"] == "elicitation/create" {
			early = append(early, m)
			m = nextMessage(t, msgs)
		}
		task := obj(obj(m["result"])["task"])
		if jsonText(m["id"]) != "2" || task["taskId"] == nil {
			t.Fatalf("the task-augmented tools/call was answered %v; want its CreateTaskResult first", m)
		}
		return send, msgs, hangUp, done, task, early
	}

	t.Run("in order, nothing after the final one", func(t *testing.T) {
		send, msgs, hangUp, done, task, early := start(t)
		id := task["taskId"].(string)
		// The answer reports the status the task had then: the
		// notifications are of the changes after it.
		want := []string{"input_required", "working", "completed"}
		if task["status"] == "input_required" {
			want = want[1:]
		}
		var statuses []string
		asked := false
		for len(statuses) < 1 || !asked {
			var m map[string]any
			if len(early) > 0 {
				m, early = early[0], early[1:]
			} else {
				m = nextMessage(t, msgs)
			}
			if st := statusOf(t, m, id); st != "" {
				statuses = append(statuses, st)
				continue
			}
			if m["method"] != "elicitation/create" {
				t.Fatalf("unexpected message %v", m)
			}
			asked = true
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"action": "accept", "content": map[string]any{"sure": true}}})
			send(string(b))
		}
		for statuses[len(statuses)-1] != "working" { // the tool waits for release once answered
			statuses = append(statuses, statusOf(t, nextMessage(t, msgs), id))
		}
		close(release)
		statuses = append(statuses, statusOf(t, nextMessage(t, msgs), id))
		if jsonText(statuses) != jsonText(want) {
			t.Fatalf("status notifications %v; want %v", statuses, want)
		}
		send(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `"}}`)
		if m := nextMessage(t, msgs); jsonText(m["id"]) != "3" || obj(m["result"])["status"] != "completed" {
			t.Fatalf("after the final notification the server sent %v; want the answer to tasks/get", m)
		}
		hangUp()
		<-done
		for m := range msgs {
			t.Errorf("after the final notification the server sent %v", m)
		}
	})

	t.Run("ends with the session", func(t *testing.T) {
		blocked := make(chan struct{})
		reg := taskRegistry(t, carmy.New(), carmy.Tool(func(ctx carmy.Context) (string, error) {
			<-blocked
			return "", nil
		}, carmy.Read, carmy.Name("ask"), carmy.Register(false)))
		defer close(blocked)
		send, msgs, hangUp, done := taskStatusStdio(t, reg)
		send(sessionInit)
		nextMessage(t, msgs)
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{},"task":{}}}`)
		if m := nextMessage(t, msgs); obj(obj(m["result"])["task"])["status"] != "working" {
			t.Fatalf("tools/call answered %v; want a working task", m)
		}
		hangUp()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the session did not end while its task was still working: its watcher holds it")
		}
	})
}
