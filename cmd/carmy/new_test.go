package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNew writes a new module, points it at this checkout and checks that
// its tests pass, that go generate leaves it unchanged and that carmy vet
// finds nothing in it.
func TestNew(t *testing.T) {
	t.Parallel()
	needGo(t)
	root := checkoutRoot(t)
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
	want := []string{"module example.com/hello\n", "\ngo 1.26.0\n", "\ntool " + carmyPath + "/cmd/carmy\n"}
	if v := carmyVersion(); v != "" {
		want = append(want, "\nrequire "+carmyPath+" "+v+"\n")
	} else if strings.Contains(string(mod), "require") {
		t.Errorf("a development build requires a version of carmy:\n%s", mod)
	}
	for _, w := range want {
		if !strings.Contains(string(mod), w) {
			t.Errorf("go.mod has no %q:\n%s", w, mod)
		}
	}

	// What -tidy does, against this checkout instead of a release.
	pointAtCheckout(t, dir, root)
	if err := generate(dir, []string{"./..."}, t.Logf); err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile(filepath.Join(dir, genFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"main.greet":`, `"Greet someone by name."`, `"main.Greet.Name":`, `"main.Greeting.Message":`} {
		if !strings.Contains(string(gen), w) {
			t.Errorf("carmy_gen.go has no %s:\n%s", w, gen)
		}
	}

	out := goCmd(t, dir, "test", "-count=1", "./...")
	if !strings.Contains(out, "ok  \texample.com/hello") {
		t.Errorf("go test in the new module:\n%s", out)
	}
	goCmd(t, dir, "vet", "./...")

	// go generate runs go tool carmy gen: the file is current.
	goCmd(t, dir, "generate", "./...")
	again, err := os.ReadFile(filepath.Join(dir, genFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(gen) {
		t.Errorf("go generate changed carmy_gen.go:\n%s", again)
	}
	if code, stdout, stderr := output(t, carmyCmd(t, dir, "vet", "./...")); code != 0 {
		t.Errorf("carmy vet in the new module: exit %d\n%s%s", code, stdout, stderr)
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
