package carmy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

type EchoIn struct {
	Text string `json:"text"`
}

type EchoOut struct {
	Text string `json:"text"`
}

// echoer answers its input, once gate is closed, or with an output of
// size bytes when size is set.
type echoer struct {
	runs atomic.Int32
	gate chan struct{}
	size int
}

func (e *echoer) tool() *carmy.ToolDef {
	return carmy.Tool(func(ctx carmy.Context, in EchoIn) (EchoOut, error) {
		e.runs.Add(1)
		select {
		case <-e.gate:
		case <-ctx.Done():
			return EchoOut{}, ctx.Err()
		}
		if e.size > 0 {
			return EchoOut{Text: strings.Repeat("y", e.size)}, nil
		}
		return EchoOut(in), nil
	}, carmy.Read, carmy.Name("echo"), carmy.ParallelSafe(), carmy.Register(false))
}

// The numbers: 60 tasks of a tool that echoes a 320 KiB input,
// all started before any finishes, kept 18 MiB against the 16 MiB bound.
// Inputs count from the start: the tasks that would pass the bound are
// refused (unavailable, capacity, retryable), what is kept never passes
// it, and a page of the list carries no output.
func TestTaskBytesBoundedWhenTheyGrow(t *testing.T) {
	ctx := context.Background()
	s := newHostsStore(t)
	e := &echoer{gate: make(chan struct{})}
	reg := taskRegistry(t, carmy.New().Store(s).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"})), e.tool())
	input, _ := json.Marshal(EchoIn{Text: strings.Repeat("x", 320<<10)})
	var started []*carmy.Task
	refused := 0
	for range 60 {
		task, err := reg.Start(ctx, carmy.Call{Tool: "echo", Principal: "alice", Input: input})
		if err != nil {
			ce := wantCode(t, err, carmy.CodeUnavailable)
			if !ce.Retryable || ce.Details["reason"] != "capacity" {
				t.Fatalf("a start past the bound = %+v; want unavailable, retryable, reason capacity", ce)
			}
			refused++
			continue
		}
		started = append(started, task)
	}
	held := func() int {
		n := 0
		for _, task := range started {
			rec, err := s.GetTask(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			n += rec.Size()
		}
		return n
	}
	t.Logf("%d of 60 tasks of a %d-byte input started, %d refused; they hold %d bytes (bound %d)", len(started), len(input), refused, held(), store.DefaultTaskBytes)
	if refused == 0 || len(started)*len(input) > store.DefaultTaskBytes || held() > store.DefaultTaskBytes {
		t.Fatalf("%d tasks started, %d refused, holding %d bytes; want the starts past %d bytes refused", len(started), refused, held(), store.DefaultTaskBytes)
	}
	close(e.gate)
	for _, task := range started {
		res, err := task.Wait(ctx)
		if err != nil || len(res.Output) != len(input) {
			t.Fatalf("Wait = %d bytes, %v; want the echo", len(res.Output), err)
		}
	}
	if n := held(); n > store.DefaultTaskBytes {
		t.Fatalf("the finished tasks hold %d bytes; want at most %d", n, store.DefaultTaskBytes)
	}

	srv := serve(t, reg)
	res, body := roundTrip(t, http.DefaultClient, "GET", srv.URL+"/tasks?limit=200", "", "Authorization", "Bearer alice")
	var page struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(body, &page); err != nil || res.StatusCode != 200 || len(page.Tasks) != len(started) {
		t.Fatalf("GET /tasks = %d, %d tasks, %v; want %d", res.StatusCode, len(page.Tasks), err, len(started))
	}
	for _, task := range page.Tasks {
		if _, ok := task["output"]; ok || task["status"] != "completed" {
			t.Fatalf("a listed task = %.200v; want a completed task's summary, without its output", task)
		}
	}
	if len(body) > 64<<10 {
		t.Fatalf("GET /tasks?limit=200 is %d bytes; want summaries", len(body))
	}
	status, one := httpDo(t, http.DefaultClient, "GET", srv.URL+"/tasks/"+started[0].ID, "", "Authorization", "Bearer alice")
	if out := obj(obj(one)["output"]); status != 200 || len(out["text"].(string)) != 320<<10 {
		t.Fatalf("GET /tasks/{id} = %d; want the task with its output", status)
	}
}

// An output that does not fit in the caller's bytes of tasks is not kept:
// the task fails, output_too_large, and that failure is the request id's
// recorded outcome: a retry with the same request id, as a task, through
// Execute or over HTTP, replays it; the tool never runs again.
func TestTaskOutputTooLarge(t *testing.T) {
	ctx := context.Background()
	e := &echoer{gate: make(chan struct{}), size: store.DefaultTaskBytes + 1}
	close(e.gate)
	reg := taskRegistry(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice"})), e.tool())
	call := carmy.Call{Tool: "echo", Principal: "alice", RequestID: "r1", Input: []byte(`{"text":"big"}`)}
	wantTooLarge := func(how string, err error) {
		t.Helper()
		ce := wantCode(t, err, carmy.CodeUnavailable)
		if ce.Retryable || ce.Details["reason"] != "output_too_large" {
			t.Fatalf("%s: err = %+v; want unavailable, not retryable, reason output_too_large", how, ce)
		}
	}
	task, err := reg.Start(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.Wait(ctx)
	wantTooLarge("the task", err)
	if task.Status != carmy.TaskFailed {
		t.Fatalf("status = %s; want failed", task.Status)
	}
	again, err := reg.Start(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	_, err = again.Wait(ctx)
	wantTooLarge("the task started again", err)
	_, err = reg.Execute(ctx, call)
	wantTooLarge("Execute with the request id", err)
	if ce := wantCode(t, err, carmy.CodeUnavailable); ce.Details["replayed"] != true {
		t.Fatalf("Execute's failure = %+v; want it replayed", ce)
	}

	srv := serve(t, reg)
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/echo", `{"text":"big"}`,
		"Authorization", "Bearer alice", "Idempotency-Key", "r1")
	if d := obj(obj(obj(body)["error"])["details"]); status != http.StatusServiceUnavailable || d["reason"] != "output_too_large" || d["replayed"] != true {
		t.Fatalf("POST /tools/echo with the request id = %d %v; want 503, the replayed output_too_large", status, body)
	}
	if n := e.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
}
