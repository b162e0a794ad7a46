//go:build unix

package carmy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// TestStdioServerProcess is the server that TestConsoleFileRemoved runs in
// a process of its own: RunStdio with a tool that needs confirmation.
func TestStdioServerProcess(t *testing.T) {
	if os.Getenv("CARMY_TEST_STDIO_SERVER") != "1" {
		t.Skip("run by TestConsoleFileRemoved in a process of its own")
	}
	del := carmy.Tool(func(DeleteNote) error { return nil }, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	if err := carmy.New().Tool(del).Logger(quietLogger()).RunStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestConsoleFileRemoved: the file that holds the console link of a stdio
// server, written when a call first waits for a person, is removed when
// the server exits: on SIGTERM, on SIGINT, and when its client closes the
// connection.
func TestConsoleFileRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	for _, end := range []string{"SIGTERM", "SIGINT", "end of input"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestStdioServerProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CARMY_TEST_STDIO_SERVER=1", "XDG_RUNTIME_DIR="+dir)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
			})
			lines := bufio.NewScanner(out)
			lines.Buffer(nil, 1<<20)
			send := func(line string) {
				if _, err := io.WriteString(in, line+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(callBody(2, "delete_note", `{"id":7}`, ""))
			for lines.Scan() {
				if strings.Contains(lines.Text(), `"id":2`) {
					if !strings.Contains(lines.Text(), "carmy approvals") {
						t.Fatalf("the refusal %s; want it to name carmy approvals", lines.Text())
					}
					break
				}
			}
			files, _ := filepath.Glob(filepath.Join(dir, "carmy-console-*.url"))
			if len(files) != 1 {
				t.Fatalf("files %v; want the console's link written once a call waits for a person", files)
			}
			go func() {
				_, _ = io.Copy(io.Discard, out)
				exited <- cmd.Wait()
			}()
			switch end {
			case "SIGTERM":
				_ = cmd.Process.Signal(syscall.SIGTERM)
			case "SIGINT":
				_ = cmd.Process.Signal(syscall.SIGINT)
			default:
				_ = in.Close()
			}
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				t.Fatal("the server did not exit")
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
				t.Fatalf("after %s: %v remain; want the console file removed", end, files)
			}
		})
	}
}
