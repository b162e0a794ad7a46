package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/modtest"
)

// runMainEnv makes the test binary act as the carmy command, so that tests
// run the real command (flags, exit status, go vet -vettool) without
// building it separately.
const runMainEnv = "CARMY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binDir holds the carmy binary that carmyBinary builds.
var binDir string

// carmyBinary builds carmy, once per test run, without the race detector:
// go vet -vettool starts the tool once per package of the program, which
// takes minutes with a test binary built with -race.
var carmyBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "carmy-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "carmy")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// carmyCmd returns a command that runs carmy (the test binary) in dir.
func carmyCmd(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// carmyBinCmd returns a command that runs the carmy binary that
// carmyBinary builds, in dir. carmy vet runs go vet with its own executable
// as the vet tool, which go vet starts once per package of the program: a
// test binary, built with -race and new on every build, would analyze every
// dependency again, slowly, where the binary's analyses stay in the build
// cache from run to run.
func carmyBinCmd(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := carmyBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	return cmd
}

// output runs a command and returns its exit status, stdout and stderr.
func output(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// copyModule copies a fixture module from testdata (see modtest.Copy).
func copyModule(t *testing.T, fixture string) string {
	t.Helper()
	return modtest.Copy(t, filepath.Join("testdata", fixture))
}

// serve builds b and serves it on a loopback server, both closed when the
// test ends, and returns the server's URL.
func serve(t *testing.T, b *carmy.Builder) string {
	t.Helper()
	reg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return srv.URL
}
