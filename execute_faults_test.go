package carmy_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

type Checked struct {
	N int `json:"n" validate:"max=5"`
}

// TestFaults runs misbehaving tools next to a healthy one on a real
// loopback server: each misbehaviour gets the answer it deserves, and the
// healthy tool keeps answering throughout.
func TestFaults(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cancelled := make(chan struct{})
	entered := make(chan struct{}, 1)
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	tools := []*carmy.ToolDef{
		carmy.Tool(func() (string, error) { return "ok", nil }, carmy.Read, carmy.Name("healthy"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() error { panic("secret panic text") }, carmy.Write, carmy.Name("panics"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() error { <-release; return nil }, carmy.Write, carmy.Name("ignores_context"), carmy.Timeout(50*time.Millisecond), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() (string, error) { return strings.Repeat("x", 8<<20), nil }, carmy.Read, carmy.Name("huge_output"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() (Checked, error) { return Checked{N: 6}, nil }, carmy.Read, carmy.Name("bad_output"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) error {
			entered <- struct{}{}
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		}, carmy.Read, carmy.Name("waits"), carmy.ParallelSafe(), carmy.Register(false)),
	}
	reg := build(t, carmy.New().Tool(tools...))
	srv := serve(t, reg)

	post := func(ctx context.Context, tool string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/tools/"+tool, nil)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	healthy := func(t *testing.T) {
		t.Helper()
		if status, body, err := post(context.Background(), "healthy"); status != 200 || err != nil {
			t.Fatalf("the healthy tool failed: %d %s %v", status, body, err)
		}
	}

	t.Run("a panic is internal, without its text, and the host serves on", func(t *testing.T) {
		status, body, _ := post(context.Background(), "panics")
		if status != 500 || !strings.Contains(body, `"internal"`) || strings.Contains(body, "secret panic text") || strings.Contains(body, ".go:") {
			t.Fatalf("%d %s", status, body)
		}
		healthy(t)
	})
	t.Run("a tool that ignores its context is cut off at its deadline", func(t *testing.T) {
		start := time.Now()
		status, body, _ := post(context.Background(), "ignores_context")
		if status != 504 || time.Since(start) > 5*time.Second {
			t.Fatalf("%d %s after %v", status, body, time.Since(start))
		}
		healthy(t)
	})
	t.Run("a huge output is delivered whole", func(t *testing.T) {
		status, body, err := post(context.Background(), "huge_output")
		if status != 200 || err != nil || len(body) < 8<<20 {
			t.Fatalf("%d, %d bytes, %v", status, len(body), err)
		}
		healthy(t)
	})
	t.Run("an output that breaks its schema is internal", func(t *testing.T) {
		status, body, _ := post(context.Background(), "bad_output")
		if status != 500 || strings.Contains(body, `"n"`) {
			t.Fatalf("%d %s", status, body)
		}
		healthy(t)
	})
	t.Run("a client that disconnects cancels the tool's context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := post(ctx, "waits")
			done <- err
		}()
		<-entered
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("client: %v", err)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the tool's context was not cancelled when its client went away")
		}
		healthy(t)
	})
	releaseOnce.Do(func() { close(release) })
	deadline := time.Now().Add(5 * time.Second)
	for reg.Overruns() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if reg.Overruns() < 1 {
		t.Fatal("the execution that outlived its deadline was not counted")
	}
}

// TestInternalErrorsAreLogged: the cause a caller never sees is in the
// host's log, under the execution id the caller was given.
func TestInternalErrorsAreLogged(t *testing.T) {
	t.Parallel()
	logs := &logSink{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	tool := carmy.Tool(func() error { return errors.New("disk on fire") }, carmy.Write, carmy.Name("fails"), carmy.Register(false))
	reg, err := carmy.New().Logger(logger).Tool(tool).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "fails"})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeInternal || strings.Contains(e.Message, "disk on fire") {
		t.Fatalf("err = %v", err)
	}
	id, _ := e.Details["execution_id"].(string)
	if id == "" || !strings.Contains(logs.String(), "disk on fire") || !strings.Contains(logs.String(), id) {
		t.Fatalf("execution id %q; log:\n%s", id, logs.String())
	}
}
