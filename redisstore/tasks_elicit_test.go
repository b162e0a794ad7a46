package redisstore

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// TestTaskElicitAcrossHostsInGoAndHTTP: two registries on one Redis
// (polling once an hour, so only the store's notifications wake them). A
// task started in Go on host a whose tool asks is input_required with
// its question on host b, where Task.Answer answers it; a task started
// over HTTP on host a is answered with POST /tasks/{id}/input on host b.
// Each tool, running on host a, goes on with the answer given on b.
func TestTaskElicitAcrossHostsInGoAndHTTP(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	host := func() *carmy.Registry {
		ask := carmy.Tool(func(ctx carmy.Context) (string, error) {
			var c Confirm
			if ok, err := ctx.Elicit("Sure?", &c); err != nil || !ok {
				return "declined", err
			}
			if c.Sure {
				return "sure", nil
			}
			return "unsure", nil
		}, carmy.Read, carmy.Name("ask"), carmy.Register(false))
		return build(t, carmy.New().Store(newStore(t, c, prefix, WithPollInterval(time.Hour))).Tool(ask).Logger(quiet))
	}
	a, b := host(), host()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	asking := func(id string) *carmy.Task {
		t.Helper()
		for {
			task, err := b.Task(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status == carmy.TaskInputRequired {
				return task
			}
			if ctx.Err() != nil {
				t.Fatalf("task %s on host b is %s; want input_required", id, task.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	t.Run("go", func(t *testing.T) {
		task, err := a.Start(ctx, carmy.Call{Tool: "ask", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		onB := asking(task.ID)
		if len(onB.Questions) != 1 || onB.Questions[0].ID != "confirm" || onB.Questions[0].Message != "Sure?" {
			t.Fatalf("host b shows %+v; want the question asked on host a", onB.Questions)
		}
		if err := onB.Answer(ctx, "confirm", carmy.TaskAnswer{Action: "accept", Content: Confirm{Sure: true}}); err != nil {
			t.Fatal(err)
		}
		if res, err := task.Wait(ctx); err != nil || string(res.Output) != `"sure"` {
			t.Fatalf("Wait on host a = %s, %v; want the answer given on host b", res.Output, err)
		}
	})
	t.Run("http", func(t *testing.T) {
		srvA, srvB := httptest.NewServer(a.Handler()), httptest.NewServer(b.Handler())
		defer srvA.Close()
		defer srvB.Close()
		post := func(url, body string, header ...string) map[string]any {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			var m map[string]any
			if res.StatusCode/100 != 2 || json.Unmarshal(raw, &m) != nil {
				t.Fatalf("POST %s = %d %s", url, res.StatusCode, raw)
			}
			return m
		}
		started := post(srvA.URL+"/tools/ask", `{}`, "Prefer", "respond-async")
		id, _ := started["id"].(string)
		asking(id)
		post(srvB.URL+"/tasks/"+id+"/input", `{"confirm":{"action":"accept","content":{"sure":false}}}`)
		task, err := a.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := task.Wait(ctx); err != nil || string(res.Output) != `"unsure"` {
			t.Fatalf("the task after POST input on host b = %s, %v; want the answer given there", res.Output, err)
		}
	})
}
