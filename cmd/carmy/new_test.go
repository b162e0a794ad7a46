package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/toolsrc"

	"github.com/carmy-dev/carmy/internal/modtest"
)

// TestNew checks the files carmy new writes, without the go command: a
// development build requires no version of carmy (go get finds the latest
// when the module is tidied). TestNewFromClone builds, tests and runs a
// new module.
func TestNew(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "hello")
	code, stdout, stderr := carmyRun("new", "-tidy=false", "-dir", dir, "example.com/hello")
	if code != 0 {
		t.Fatalf("carmy new: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, f := range []string{"go.mod", "main.go", "main_test.go", "README.md", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("carmy new did not write %s", f)
		}
	}
	main, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(main), "\n//go:generate go tool carmy gen\n") {
		t.Error("main.go has no go:generate line")
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"module example.com/hello\n", "\ngo 1.26.0\n", "\ntool " + toolsrc.CarmyPath + "/cmd/carmy\n"}
	if v := carmyVersion(); v != "" {
		want = append(want, "\nrequire "+toolsrc.CarmyPath+" "+v+"\n")
	} else if strings.Contains(string(mod), "require") {
		t.Errorf("a development build requires a version of carmy:\n%s", mod)
	}
	for _, w := range want {
		if !strings.Contains(string(mod), w) {
			t.Errorf("go.mod has no %q:\n%s", w, mod)
		}
	}
	if strings.Contains(string(mod), "replace") {
		t.Errorf("go.mod without -carmy has a replace line:\n%s", mod)
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := carmyRun("new", "-tidy=false", "-dir", dir, "example.com/x")
	if code != 1 || !strings.Contains(stderr, "is not empty") {
		t.Errorf("carmy new into a non-empty directory: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{{"new"}, {"new", "a", "b"}, {"new", "-dir", dir, "bad path!"}} {
		if code, _, stderr := carmyRun(args...); code != 2 {
			t.Errorf("carmy %s: exit %d, want 2\n%s", strings.Join(args, " "), code, stderr)
		}
	}
}

func TestCarmyVersion(t *testing.T) {
	// A test binary is a development build: no version, so -tidy gets
	// the latest release.
	if v := carmyVersion(); v != "" && !strings.HasPrefix(v, "v") {
		t.Errorf("carmyVersion() = %q", v)
	}
}

// TestNewFromClone is the first hour of a user before carmy is published:
// carmy new -carmy <clone> writes a module whose go.mod points at the
// clone (here, this checkout), tidies it and generates carmy_gen.go; its
// tests pass even with a carmy.toml that no test could use (an OAuth
// issuer nobody serves), go vet, go generate and carmy vet are content with
// it, and its program says it serves only once it does.
func TestNewFromClone(t *testing.T) {
	t.Parallel()
	modtest.NeedGo(t)
	root := modtest.CheckoutRoot(t)
	parent := t.TempDir()
	cmd := carmyCmd(t, parent, "new", "-carmy", root, "example.com/hello")
	cmd.Env = append(cmd.Env, "GOWORK=off")
	if code, stdout, stderr := output(t, cmd); code != 0 {
		t.Fatalf("carmy new -carmy: exit %d\n%s%s", code, stdout, stderr)
	}
	dir := filepath.Join(parent, "hello")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"\nrequire " + toolsrc.CarmyPath + " " + zeroVersion + "\n", "\nreplace " + toolsrc.CarmyPath + " => " + filepath.ToSlash(root) + "\n"} {
		if !strings.Contains(string(mod), w) {
			t.Errorf("go.mod has no %q:\n%s", w, mod)
		}
	}
	gen, err := os.ReadFile(filepath.Join(dir, toolsrc.GenFile))
	if err != nil {
		t.Fatalf("carmy new did not generate %s: %v", toolsrc.GenFile, err)
	}
	for _, w := range []string{`"main.greet":`, `"Greet someone by name."`, `"main.Greet.Name":`, `"main.Greeting.Message":`} {
		if !strings.Contains(string(gen), w) {
			t.Errorf("carmy_gen.go has no %s:\n%s", w, gen)
		}
	}

	// The developer's configuration: tokens would be fine, but an OAuth
	// issuer is reached at Build. The tests must not read it.
	toml := "[oauth]\nissuer = \"http://127.0.0.1:1\"\naudience = \"http://127.0.0.1:3000/mcp\"\n"
	if err := os.WriteFile(filepath.Join(dir, "carmy.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	out := modtest.Go(t, dir, "test", "-count=1", "./...")
	if !strings.Contains(out, "ok  \texample.com/hello") {
		t.Errorf("go test in the new module, with a carmy.toml:\n%s", out)
	}
	if err := os.Remove(filepath.Join(dir, "carmy.toml")); err != nil {
		t.Fatal(err)
	}
	modtest.Go(t, dir, "vet", "./...")
	// go generate runs go tool carmy gen: the file is current.
	modtest.Go(t, dir, "generate", "./...")
	if again, err := os.ReadFile(filepath.Join(dir, toolsrc.GenFile)); err != nil || string(again) != string(gen) {
		t.Errorf("go generate changed carmy_gen.go (%v):\n%s", err, again)
	}
	if code, stdout, stderr := output(t, carmyBinCmd(t, dir, "vet", "./...")); code != 0 {
		t.Errorf("carmy vet in the new module: exit %d\n%s%s", code, stdout, stderr)
	}

	// go run . on a taken port: exit status 1 with the bind error, and no
	// line saying it serves.
	bin := filepath.Join(t.TempDir(), "hello")
	modtest.Go(t, dir, "build", "-o", bin, ".")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	run := exec.Command(bin)
	run.Dir = dir
	run.Env = append(os.Environ(), "CARMY_LISTEN="+taken.Addr().String(), "CARMY_CONFIG=")
	code, stdout, stderr := output(t, run)
	if code != 1 || strings.Contains(stdout+stderr, "serving") || !strings.Contains(stderr, taken.Addr().String()) {
		t.Errorf("the new program on a taken port: exit %d, want 1, the bind error and no serving line\n%s%s", code, stdout, stderr)
	}
}

func TestNewCloneRefused(t *testing.T) {
	notClone := t.TempDir()
	if err := os.WriteFile(filepath.Join(notClone, "go.mod"), []byte("module example.com/other\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, clone := range []string{notClone, filepath.Join(notClone, "missing")} {
		dir := filepath.Join(t.TempDir(), "x")
		code, _, stderr := carmyRun("new", "-tidy=false", "-carmy", clone, "-dir", dir, "example.com/x")
		if code != 2 || !strings.Contains(stderr, "not a carmy clone") {
			t.Errorf("carmy new -carmy %s: exit %d, want 2\n%s", clone, code, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("carmy new -carmy %s wrote %s", clone, dir)
		}
	}
}
