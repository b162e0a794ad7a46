package carmy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/carmy-dev/carmy"
)

// ReportIn is the input of the report tool of the examples.
type ReportIn struct {
	Days int `json:"days" validate:"min=1,max=366"`
}

// Report is its output.
type Report struct {
	Rows int `json:"rows"`
}

// report is a long-running tool: it works a day at a time, reports its
// progress, and stops when its context is cancelled.
func report(ctx carmy.Context, in ReportIn) (Report, error) {
	for day := 1; day <= in.Days; day++ {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		ctx.Progress(float64(day), float64(in.Days), "day exported")
	}
	return Report{Rows: 10 * in.Days}, nil
}

// A call run as a task outlives the request that started it: its caller
// reads it back by id, as its principal, and waits for its outcome.
func ExampleRegistry_Start() {
	reg, err := carmy.New().
		Tool(carmy.Tool(report, carmy.Read, carmy.Name("report"), carmy.Timeout(time.Hour), carmy.Register(false))).
		Build()
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	ctx := context.Background()

	task, err := reg.Start(ctx, carmy.Call{Tool: "report", Input: json.RawMessage(`{"days":3}`), Principal: "alice", RequestID: "report-december"})
	if err != nil {
		panic(err)
	}
	// Later, on this host or another sharing its store.
	again, err := reg.Task(ctx, task.ID, carmy.WithPrincipal("alice"))
	if err != nil {
		panic(err)
	}
	res, err := again.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(again.Status, string(res.Output), again.Progress.Done, "of", again.Progress.Total)
	// Starting it again with its request id answers the same task.
	same, _ := reg.Start(ctx, carmy.Call{Tool: "report", Input: json.RawMessage(`{"days":3}`), Principal: "alice", RequestID: "report-december"})
	fmt.Println(same.ID == task.ID, same.Status)
	// Output:
	// completed {"rows":30} 3 of 3
	// true completed
}

// A call that needs a person's approval, started as a task, waits for the
// person as long as the approval lives: the task is input_required and
// names the approval. The person approves it later (here through the HTTP
// API, as the console does), and the task runs.
func ExampleTask_Wait_approval() {
	purge := carmy.Tool(func(in ReportIn) (Report, error) { return Report{Rows: in.Days}, nil }, carmy.Destructive,
		carmy.Name("purge_reports"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, err := carmy.New().Tool(purge).Build()
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	ctx := context.Background()

	task, err := reg.Start(ctx, carmy.Call{Tool: "purge_reports", Input: json.RawMessage(`{"days":30}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(task.Status, task.ApprovalID != "")

	// The person, holding the console's secret, approves.
	_, secret, _ := strings.Cut(reg.ConsoleURL(srv.URL), "?token=")
	req, _ := http.NewRequest("POST", srv.URL+"/approvals/"+task.ApprovalID+"/approve", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(carmy.ConsoleHeader, secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	res.Body.Close()

	out, err := task.Wait(ctx)
	fmt.Println(task.Status, string(out.Output), err)
	// Output:
	// input_required true
	// completed {"rows":30} <nil>
}
