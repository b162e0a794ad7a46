package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	if !strings.Contains(string(main), `flag.Bool("stdio"`) || !strings.Contains(string(main), ".RunStdio") {
		t.Error("main.go has no -stdio flag serving with RunStdio")
	}
	// The README's desktop client configuration is JSON that starts the
	// program with -stdio.
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(readme)
	var config struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if block == nil {
		t.Fatalf("README.md shows no desktop client configuration:\n%s", readme)
	}
	if err := json.Unmarshal(block[1], &config); err != nil {
		t.Fatalf("README.md's client configuration is not JSON (%v):\n%s", err, block[1])
	}
	if s := config.MCPServers["hello"]; !strings.HasSuffix(s.Command, "/hello") || !slices.Equal(s.Args, []string{"-stdio"}) {
		t.Errorf("README.md's client configuration does not start the program with -stdio: %+v", config)
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
// issuer nobody serves), among them TestDescriptions, which sees the doc
// comments in the package main's test binary, as carmy schema does; go
// vet, go generate and carmy vet are content with it; its program serves
// its tools over stdio with -stdio, and says it serves HTTP only once it
// does.
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
	// carmy schema derives the schemas in a test binary of the package
	// main: the descriptions of carmy_gen.go reach it too.
	code, stdout, stderr := output(t, carmyCmd(t, dir, "schema", "-tool", "greet", "."))
	if code != 0 {
		t.Fatalf("carmy schema: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, w := range []string{`"description": "Name of the person to greet."`, `"description": "Message is the greeting itself."`} {
		if !strings.Contains(stdout, w) {
			t.Errorf("carmy schema -tool greet has no %s:\n%s", w, stdout)
		}
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

	// -stdio serves the same tools to a client that starts the program.
	tools := listStdio(t, bin)
	if len(tools) != 1 || tools[0].Name != "greet" || tools[0].Description != "Greet someone by name." {
		t.Errorf("the new program over -stdio lists %+v, want greet with its doc comment", tools)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	run := exec.Command(bin)
	run.Dir = dir
	run.Env = append(os.Environ(), "CARMY_LISTEN="+taken.Addr().String(), "CARMY_CONFIG=")
	code, stdout, stderr = output(t, run)
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

// listStdio starts a program with -stdio, as a desktop client does, and
// lists its tools over MCP: initialize, initialized, tools/list, then the
// end of its input, after which the server answers what it read and exits.
func listStdio(t *testing.T, bin string) []struct{ Name, Description string } {
	t.Helper()
	cmd := exec.Command(bin, "-stdio")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "CARMY_CONFIG=")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`)
	code, stdout, stderr := output(t, cmd)
	if code != 0 {
		t.Fatalf("%s -stdio: exit %d\n%s%s", bin, code, stdout, stderr)
	}
	for line := range strings.Lines(stdout) {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct{ Name, Description string }
			}
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("%s -stdio wrote a line that is not JSON (%v): %q\nstderr:\n%s", bin, err, line, stderr)
		}
		if msg.ID == 2 {
			return msg.Result.Tools
		}
	}
	t.Fatalf("%s -stdio did not answer tools/list:\n%s%s", bin, stdout, stderr)
	return nil
}
