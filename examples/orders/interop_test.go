package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// tsClientDir is the TypeScript interoperability client, relative to this
// package's directory (where go test runs its tests).
var tsClientDir = filepath.Join("..", "..", "interop", "ts")

// interopTimeout bounds each run of the client, server start included.
const interopTimeout = 2 * time.Minute

// TestTypeScriptClient drives the example with a client nobody here wrote:
// the official TypeScript MCP SDK, through interop/ts/client.mjs, over
// streamable HTTP and over stdio. The client asserts what it gets (tools,
// schemas, annotations, a call, a validation error, a confirmation error)
// and exits non-zero on the first mismatch. See docs/interop.md.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not on PATH; the TypeScript MCP client needs Node.js 20 or later (then run: npm ci --prefix interop/ts)")
	}
	sdk := filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		t.Skip("skipping: interop/ts/node_modules does not hold the TypeScript MCP SDK (run: npm ci --prefix interop/ts)")
	}

	t.Run("streamable-http", func(t *testing.T) {
		reg, err := newBuilder(NewStore()).Build()
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- reg.Serve(ctx, ln, 5*time.Second) }()
		t.Cleanup(func() {
			stop()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Serve did not return within 10s of shutdown")
			}
			if err := reg.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		runTSClient(t, node, "http", "http://"+ln.Addr().String()+"/mcp")
	})

	t.Run("stdio", func(t *testing.T) {
		bin := buildOrders(t)
		runTSClient(t, node, "stdio", bin, "-stdio")
	})
}

// buildOrders builds the example into a temporary directory and returns
// the binary's path, which the client starts as its stdio server.
func buildOrders(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orders")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	// go test puts its own go command first on PATH.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runTSClient runs client.mjs with the arguments and fails the test with
// its output unless it exits 0.
func runTSClient(t *testing.T, node string, args ...string) {
	t.Helper()
	t.Log(runNode(t, node, tsClientDir, append([]string{"client.mjs"}, args...)...))
}

// runNode runs node with the arguments in dir and returns its output; it
// fails the test with that output unless node exits 0 in time.
func runNode(t *testing.T, node, dir string, args ...string) string {
	t.Helper()
	stdout, stderr, code := nodeOutput(t, node, dir, args...)
	text := strings.TrimSpace(stderr + stdout)
	if code != 0 {
		t.Fatalf("node %s: exit status %d\n%s", strings.Join(args, " "), code, text)
	}
	return text
}

// nodeOutput runs node with the arguments in dir and returns its standard
// output, standard error and exit status; it fails the test if node does
// not run or does not end in time.
func nodeOutput(t *testing.T, node, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// The stdio server inherits the client's standard error: should the
	// client be killed, do not wait for the server to let go of the pipe.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("node %s: no result within %v\n%s%s", strings.Join(args, " "), interopTimeout, errOut.String(), out.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("node %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}
