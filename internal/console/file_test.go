package console

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Find lists the console files of this user that hold a loopback console
// link, and skips any other file of the pattern: one others may read (or
// could have planted), one that holds something else, one that points
// off the machine.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	good, err := WriteFile("http://127.0.0.1:4321/console?token=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(good); err != nil || filepath.Dir(good) != dir || fi.Mode().Perm() != 0o600 {
		t.Fatalf("WriteFile wrote %s: %v; want a file only the user reads, in %s", good, err, dir)
	}
	write := func(name, text string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(filepath.Join(dir, name), mode)
	}
	write("carmy-console-other.url", "http://127.0.0.1:4322/console?token=x\n", 0o600)
	write("carmy-console-garbage.url", "hello\n", 0o600)
	write("carmy-console-remote.url", "http://10.0.0.1:4322/console?token=x\n", 0o600)
	write("carmy-console-shared.url", "http://127.0.0.1:4323/console?token=x\n", 0o644)
	write("unrelated.url", "http://127.0.0.1:4324/console?token=x\n", 0o600)
	found, errs := Find()
	bases := map[string]string{}
	for _, l := range found {
		bases[l.Base] = l.Secret
	}
	want := map[string]string{"http://127.0.0.1:4321": "s3cret", "http://127.0.0.1:4322": "x"}
	if runtime.GOOS == "windows" {
		want["http://127.0.0.1:4323"] = "x"
	}
	if len(bases) != len(want) {
		t.Fatalf("found %v; want %v", bases, want)
	}
	for b, s := range want {
		if bases[b] != s {
			t.Fatalf("found %v; want %v", bases, want)
		}
	}
	if len(errs) != 5-len(want) {
		t.Fatalf("errors %v; want one for each skipped file", errs)
	}
}
