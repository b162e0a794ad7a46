package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// servingLine is the log line that says the server is bound; its addr is
// where.
var servingLine = regexp.MustCompile(`msg="carmy: serving" addr=(\S+)`)

// TestServeAnnouncesOnlyWhenBound runs the example as a user does: on a
// taken port it exits with status 1 and the bind error, never saying it
// serves; on a free one it says so once the port answers.
func TestServeAnnouncesOnlyWhenBound(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds and runs the example")
	}
	bin := buildOrders(t)

	t.Run("taken port", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "-addr", taken.Addr().String()).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("orders on a taken port: %v, want exit status 1\n%s", err, out)
		}
		if strings.Contains(string(out), "serving") {
			t.Errorf("orders on a taken port says it serves:\n%s", out)
		}
		if !strings.Contains(string(out), "address already in use") && runtime.GOOS != "windows" {
			t.Errorf("orders on a taken port does not say why:\n%s", out)
		}
	})

	t.Run("free port", func(t *testing.T) {
		cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		addr := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
					addr <- m[1]
					break
				}
			}
			_, _ = io.Copy(io.Discard, stderr)
		}()
		var a string
		select {
		case a = <-addr:
		case <-time.After(interopTimeout):
			t.Fatal(`orders never logged "carmy: serving"`)
		}
		// The line comes after the bind: the port answers at once.
		resp, err := http.Get("http://" + a + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz right after the serving line: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz: %s", resp.Status)
		}
		if runtime.GOOS == "windows" {
			return
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("orders after Ctrl-C: %v, want exit status 0", err)
			}
		case <-time.After(interopTimeout):
			t.Error("orders did not stop after Ctrl-C")
		}
	})
}
