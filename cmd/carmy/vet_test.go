package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/modtest"
	"github.com/carmy-dev/carmy/internal/toolsrc"
)

// TestGenVetFixture checks that the generated file of vet's fixture module
// (its package good, which vet finds current) is what carmy gen writes.
func TestGenVetFixture(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("..", "..", "vet", "testdata", "vetmod")
	dir := modtest.Copy(t, fixture)
	if err := generate(dir, []string{"./good"}, t.Logf); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(fixture, "good", toolsrc.GenFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "good", toolsrc.GenFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("vet/testdata/vetmod/good/carmy_gen.go is not what carmy gen writes; update it to:\n%s", got)
	}
}

// TestVetCommand runs carmy vet and go vet -vettool=carmy on the fixture:
// the same findings, the same exit statuses, facts passed between packages
// (good's carmy_gen.go holds the comments of types from packages it does not
// import; silenced reaches a field silenced in another package).
func TestVetCommand(t *testing.T) {
	t.Parallel()
	dir := modtest.Copy(t, filepath.Join("..", "..", "vet", "testdata", "vetmod"))
	wantLines := []string{
		`badtools/badtools.go:\d+:\d+: carmy: tool "v_two_inputs" takes at most one input`,
		`stale/stale.go:\d+:\d+: carmy: carmy_gen.go is out of date`,
		`nogen/nogen.go:\d+:\d+: carmy: the doc comments of this package's tools \(2\) are not registered`,
		`testonly/testonly_test.go:\d+:\d+: carmy: tool "probe" has no effect`,
	}
	check := func(name, out string) {
		t.Helper()
		for _, w := range wantLines {
			if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
				t.Errorf("%s: no line matches %s in:\n%s", name, w, out)
			}
		}
		if clean := regexp.MustCompile(`(?m)^(\S*/)?(good|nodocs|silenced)/\S*\.go:`); clean.MatchString(out) {
			t.Errorf("%s reports on good, nodocs or silenced:\n%s", name, out)
		}
	}
	vet := func(args ...string) (int, string, string) {
		return output(t, carmyBinCmd(t, dir, append([]string{"vet"}, args...)...))
	}

	code, stdout, stderr := vet("./...")
	if code != 3 {
		t.Errorf("carmy vet ./...: exit %d, want 3\n%s%s", code, stdout, stderr)
	}
	check("carmy vet", stderr)
	// silenced has findings, each silenced by a directive: they do not fail vet.
	if code, stdout, stderr := vet("./good", "./nodocs", "./silenced"); code != 0 || stdout+stderr != "" {
		t.Errorf("carmy vet on clean packages: exit %d\n%s%s", code, stdout, stderr)
	}

	bin, err := carmyBinary()
	if err != nil {
		t.Fatal(err)
	}
	goVet := func(pkgs ...string) (int, string, string) {
		cmd := exec.Command(goPath(t), append([]string{"vet", "-vettool=" + bin}, pkgs...)...)
		cmd.Dir = dir
		return output(t, cmd)
	}
	code, stdout, stderr = goVet("./...")
	if code == 0 {
		t.Errorf("go vet -vettool=carmy ./...: exit 0\n%s%s", stdout, stderr)
	}
	check("go vet -vettool", stderr)
	if code, stdout, stderr := goVet("./good", "./nodocs", "./silenced"); code != 0 {
		t.Errorf("go vet -vettool=carmy on clean packages: exit %d\n%s%s", code, stdout, stderr)
	}

	t.Run("Flags", func(t *testing.T) {
		// -json: one object for all packages, as the standard drivers
		// print it, and exit status 0.
		code, stdout, stderr := vet("-json", "./nogen", "./testonly", "./good")
		var tree map[string]map[string][]struct {
			Category string `json:"category"`
			Posn     string `json:"posn"`
			Message  string `json:"message"`
		}
		if err := json.Unmarshal([]byte(stdout), &tree); code != 0 || err != nil {
			t.Fatalf("carmy vet -json: exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		nogen := tree["example.com/vetmod/nogen"]["carmy"]
		if len(tree) != 2 || len(nogen) != 1 || nogen[0].Category != "generate" || !strings.HasSuffix(nogen[0].Posn, "nogen.go:15:16") {
			t.Errorf("carmy vet -json: want one generate finding in nogen and one in testonly's tests, got\n%s", stdout)
		}
		// -test=false: nothing in test files.
		if code, stdout, stderr := vet("-test=false", "./testonly"); code != 0 || stdout+stderr != "" {
			t.Errorf("carmy vet -test=false ./testonly: exit %d, want 0\n%s%s", code, stdout, stderr)
		}
		// -c=1: the line and one on either side.
		code, _, stderr = vet("-c=1", "./nogen")
		if want := regexp.MustCompile(`(?m)^\S+nogen.go:15:16: carmy: .*\n14\t\n15\tvar echoTool = carmy.Tool\(echo, carmy.None\).*\n16\t\n\z`); code != 3 || !want.MatchString(stderr) {
			t.Errorf("carmy vet -c=1 ./nogen: exit %d, want 3 and the lines 14 to 16\n%s", code, stderr)
		}
		// Errors: exit status 1, with go vet's message.
		if code, _, stderr := vet("./missing"); code != 1 || !strings.Contains(stderr, "missing") {
			t.Errorf("carmy vet ./missing: exit %d, want 1\n%s", code, stderr)
		}
		if code, _, stderr := vet("-fix", "./nogen"); code != 2 || !strings.Contains(stderr, "usage: carmy vet") {
			t.Errorf("carmy vet -fix: exit %d, want 2 and the usage\n%s", code, stderr)
		}
	})
}

func goPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	return p
}
