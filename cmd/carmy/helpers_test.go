package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
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

// needGo skips a test that needs the go command when there is none.
func needGo(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the go command")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not available: cannot load, build or test a module")
	}
}

// goCmd runs the go command in dir and fails the test on error.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// checkout returns the root of this carmy checkout, two levels up from the
// test's working directory (cmd/carmy).
var checkout = sync.OnceValues(func() (string, error) {
	return filepath.Abs(filepath.Join("..", ".."))
})

func checkoutRoot(t *testing.T) string {
	t.Helper()
	root, err := checkout()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module "+carmyPath+"\n")) {
		t.Fatalf("%s is not the root of the carmy module (%v)", root, err)
	}
	return root
}

var replaceLine = regexp.MustCompile(`(?m)^replace ` + regexp.QuoteMeta(carmyPath) + ` => .*$`)

// copyModule copies a fixture module from testdata into a fresh temporary
// directory, points its replace directive at this checkout, gives it the
// checkout's go.sum and tidies it, so that it builds offline from the
// module cache the checkout itself uses.
func copyModule(t *testing.T, fixture string) string {
	t.Helper()
	needGo(t)
	root := checkoutRoot(t)
	dst := t.TempDir()
	src := filepath.Join("testdata", fixture)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o777)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o666)
	})
	if err != nil {
		t.Fatal(err)
	}
	pointAtCheckout(t, dst, root)
	return dst
}

// pointAtCheckout makes the module in dir use this checkout of carmy and
// tidies it.
func pointAtCheckout(t *testing.T, dir, root string) {
	t.Helper()
	modFile := filepath.Join(dir, "go.mod")
	mod, err := os.ReadFile(modFile)
	if err != nil {
		t.Fatal(err)
	}
	replace := "replace " + carmyPath + " => " + filepath.ToSlash(root)
	if replaceLine.Match(mod) {
		mod = replaceLine.ReplaceAll(mod, []byte(replace))
	} else {
		mod = append(mod, "\n"+replace+"\n"...)
	}
	if err := os.WriteFile(modFile, mod, 0o666); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o666); err != nil {
		t.Fatal(err)
	}
	goCmd(t, dir, "mod", "tidy")
}
