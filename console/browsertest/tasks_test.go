package browsertest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/carmy-dev/carmy"
)

// ExportIn is the input of the test's long-running export.
type ExportIn struct {
	Rows int `json:"rows"`
}

// The console lists the caller's tasks with their progress, and the
// approval a waiting one needs.
func TestConsoleTasks(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	export := carmy.Tool(func(ctx carmy.Context, in ExportIn) (int, error) {
		ctx.Progress(1, float64(in.Rows), "first row")
		select {
		case <-release:
		case <-ctx.Done():
		}
		return in.Rows, nil
	}, carmy.Read, carmy.Name("export"), carmy.ParallelSafe(), carmy.Register(false))
	srv, reg, _ := server(t, carmy.New().Tool(export))
	start := func(tool, input string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/tools/"+tool, strings.NewReader(input))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "respond-async")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /tools/%s, Prefer: respond-async = %d; want 202", tool, res.StatusCode)
		}
	}
	start("export", `{"rows":4}`)
	start("delete_note", `{"id":3}`)
	// The progress reaches the task within a moment.
	time.Sleep(100 * time.Millisecond)
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	do(t, ctx, chromedp.WaitVisible(css(`#tasks tr.task.working`)), chromedp.WaitVisible(css(`#tasks tr.task.input_required`)))
	progress := get(t, ctx, chromedp.Text(css(`#tasks tr.task.working .progress`)))
	if progress != "1 of 4 · first row" {
		t.Errorf("the working task's progress = %q; want 1 of 4 · first row", progress)
	}
	link := get(t, ctx, chromedp.Evaluate[string](`document.querySelector('#tasks tr.task.input_required .outcome a').href`))
	if !strings.Contains(link, "/console?approval=") {
		t.Errorf("the waiting task links to %q; want its approval", link)
	}
	clean(t, ctx)
}
