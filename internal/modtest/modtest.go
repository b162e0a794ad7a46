// Package modtest gives tests a Go module of their own that uses this
// checkout of carmy: a fixture copied from testdata, or a module a test
// writes, tidied offline from the module cache the checkout uses.
package modtest

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// carmyPath is the import path of the library.
const carmyPath = "github.com/carmy-dev/carmy"

// NeedGo skips a test that needs the go command when there is none, and in
// -short mode.
func NeedGo(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the go command")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not available: cannot load, build or test a module")
	}
}

// Go runs the go command in dir, outside any workspace, and fails the test
// on error. It returns the command's combined output.
func Go(t testing.TB, dir string, args ...string) string {
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

// CheckoutRoot returns the root of this carmy checkout: the nearest
// directory above the test's working directory whose go.mod is carmy's.
func CheckoutRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(mod, []byte("module "+carmyPath+"\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no directory above the test's holds carmy's go.mod")
		}
		dir = parent
	}
}

var replaceLine = regexp.MustCompile(`(?m)^replace ` + regexp.QuoteMeta(carmyPath) + ` => .*$`)

// Copy copies the fixture module in src into a fresh temporary directory,
// points its replace directive at this checkout, gives it the checkout's
// go.sum and tidies it, so that it builds offline from the module cache
// the checkout itself uses. It returns the copy's directory.
func Copy(t testing.TB, src string) string {
	t.Helper()
	NeedGo(t)
	root := CheckoutRoot(t)
	dst := t.TempDir()
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
	PointAtCheckout(t, dst, root)
	return dst
}

// PointAtCheckout makes the module in dir use the checkout of carmy in root
// and tidies it.
func PointAtCheckout(t testing.TB, dir, root string) {
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
	Go(t, dir, "mod", "tidy")
}
