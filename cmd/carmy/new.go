package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/template"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/carmy-dev/carmy/internal/toolsrc"
)

//go:embed scaffold/*.tmpl
var scaffold embed.FS

// scaffoldFiles maps the templates to the files they write.
var scaffoldFiles = []struct{ tmpl, file string }{
	{"go.mod.tmpl", "go.mod"},
	{"main.go.tmpl", "main.go"},
	{"main_test.go.tmpl", "main_test.go"},
	{"README.md.tmpl", "README.md"},
	{"gitignore.tmpl", ".gitignore"},
}

const newUsage = `usage: carmy new [-dir dir] [-carmy clone] [-tidy=false] NAME

carmy new creates a Go module that serves one example tool with carmy.
NAME is the module path, such as example.com/weather, or a plain name; the
module is written to a new directory named after its last element (or to
-dir), which must not exist or must be empty. It holds:

  go.mod        the module, requiring carmy, with carmy as a tool
                (go tool carmy ...)
  main.go       one tool, greet, served over HTTP and MCP by carmy.App().Run,
                or over MCP on stdin/stdout with -stdio (RunStdio), for a
                desktop client that starts it; with the
                //go:generate go tool carmy gen line
  main_test.go  tests that call the tool through a registry and check its
                descriptions
  carmy_gen.go  the doc comments of the tool, for its schemas (by carmy gen,
                below)
  README.md     how to run, call, extend and check it, and a Claude
                Desktop or Cursor configuration for -stdio
  .gitignore

With -carmy, go.mod requires carmy from a clone on this machine, through
a replace line pointing at the clone's directory: the way to use carmy
before its module is published. Without it, go.mod requires this carmy's
own version, or the latest release when that version is unknown (a
development build).

Then, unless -tidy=false, it runs go mod tidy (after go get
github.com/carmy-dev/carmy@latest when neither a version nor a clone is
known) and carmy gen in the new module, so that go test ./... passes
right away.

Flags:
`

func runNew(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("carmy new", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("dir", "", "write the module to this `directory` (default: the last element of NAME)")
	tidy := flags.Bool("tidy", true, "run go mod tidy and carmy gen in the new module")
	clone := flags.String("carmy", "", "require carmy from the clone in this `directory`, with a replace line (until carmy is published)")
	flags.Usage = func() {
		fmt.Fprint(flags.Output(), newUsage)
		flags.PrintDefaults()
	}
	if isHelp(args) {
		flags.SetOutput(stdout)
		flags.Usage()
		return 0
	}
	pos, err := parseInterleaved(flags, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "carmy new: want one NAME, got %d arguments\n", len(pos))
		flags.Usage()
		return 2
	}
	modPath := pos[0]
	if err := module.CheckImportPath(modPath); err != nil {
		fmt.Fprintf(stderr, "carmy new: %q is not a valid module path: %v\n", modPath, err)
		return 2
	}
	if *dir == "" {
		*dir = path.Base(modPath)
	}
	data := scaffoldData{Module: modPath, Name: path.Base(modPath), Version: carmyVersion(), GoVersion: "1.26.0"}
	if *clone != "" {
		replace, err := cloneDir(*clone)
		if err != nil {
			fmt.Fprintf(stderr, "carmy new: -carmy %s: %v\n", *clone, err)
			return 2
		}
		data.Version, data.Replace = zeroVersion, replace
	}
	if err := writeScaffold(*dir, data); err != nil {
		fmt.Fprintf(stderr, "carmy new: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "created %s in %s\n", modPath, *dir)
	if *tidy {
		if err := tidyScaffold(*dir, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "carmy new: %v\nThe files are written; finish with: cd %s && go mod tidy && go generate ./...\n", err, *dir)
			if data.Version == "" {
				fmt.Fprintf(stderr, "If carmy is not published yet, scaffold against a clone instead: git clone the repository, then carmy new -carmy <clone> %s\n", modPath)
			}
			return 1
		}
	}
	next := "\tcd " + *dir + "\n"
	if !*tidy {
		next += "\tgo mod tidy\n\tgo generate ./...\n"
	}
	fmt.Fprintf(stdout, "\nNext:\n%s\tgo test ./...\n\tgo run .\n", next)
	return 0
}

// scaffoldData fills the templates. Replace, when set, is the directory of
// a carmy clone that go.mod's replace line points at.
type scaffoldData struct {
	Module, Name, Version, GoVersion, Replace string
}

// zeroVersion is the version a go.mod requires of a module that a replace
// line points at a directory: go mod tidy writes the same.
const zeroVersion = "v0.0.0-00010101000000-000000000000"

// cloneDir checks that dir is the root of a carmy clone and returns its
// absolute path as go.mod writes it: forward slashes, quoted if need be.
func cloneDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("not a carmy clone: %w", err)
	}
	if got := modfile.ModulePath(mod); got != toolsrc.CarmyPath {
		return "", fmt.Errorf("not a carmy clone: its go.mod is module %q, want %s", got, toolsrc.CarmyPath)
	}
	return modfile.AutoQuote(filepath.ToSlash(abs)), nil
}

// writeScaffold writes the module's files into dir.
func writeScaffold(dir string, data scaffoldData) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	for _, f := range scaffoldFiles {
		t, err := template.ParseFS(scaffold, "scaffold/"+f.tmpl)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), b.Bytes(), 0o666); err != nil {
			return err
		}
	}
	return nil
}

// carmyVersion returns the version of carmy this command was built from,
// when it is a release or a pseudo-version a go.mod can require; "" when
// it is unknown (a development build).
func carmyVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := ""
	if bi.Main.Path == toolsrc.CarmyPath {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == toolsrc.CarmyPath {
			v = d.Version
		}
	}
	// The zero pseudo-version is what a go.mod requires when a replace
	// directive points at a directory: nothing a new module could fetch.
	if module.Check(toolsrc.CarmyPath, v) != nil || strings.Contains(v, "+") || strings.HasPrefix(v, "v0.0.0-00010101000000-") {
		return ""
	}
	return v
}

// tidyScaffold resolves the new module's dependencies and generates its
// carmy_gen.go.
func tidyScaffold(dir string, stdout, stderr io.Writer) error {
	goCmd := func(args ...string) error {
		fmt.Fprintf(stdout, "go %s\n", strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stderr, stderr
		return cmd.Run()
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if !bytes.Contains(mod, []byte("require "+toolsrc.CarmyPath+" ")) {
		if err := goCmd("get", toolsrc.CarmyPath+"@latest"); err != nil {
			return err
		}
	}
	if err := goCmd("mod", "tidy"); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "carmy gen")
	return generate(dir, []string{"./..."}, func(string, ...any) {})
}
