package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/carmy-dev/carmy/vet"
)

// runVet is carmy vet: it runs the analyzer through the go command's vet
// driver, go vet -vettool=<this executable>, which starts carmy as a
// unitchecker once per package. go vet keeps each package's results and
// facts in the build cache, so a run after the first analyzes only what
// changed, where a standalone driver would type-check every dependency from
// source on every run to compute the facts. carmy vet asks go vet for JSON
// and prints it as the standard drivers do, with their exit statuses.
func runVet(args []string, stdout, stderr io.Writer) int {
	if isHelp(args) {
		fmt.Fprint(stdout, vetUsage)
		return 0
	}
	fs := flag.NewFlagSet("carmy vet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, vetUsage) }
	asJSON := fs.Bool("json", false, "print the diagnostics as JSON")
	contextLines := fs.Int("c", -1, "show `N` lines of context around each diagnostic")
	tests := fs.Bool("test", true, "also report in test files")
	tags := fs.String("tags", "", "build `tags`, as for go build")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, vetUsage)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "carmy vet: cannot find carmy's executable for go vet -vettool: %v\n", err)
		return 1
	}
	// go vet prints the tool's JSON on its stdout: -json is not passed
	// through to the tool (which always gets it) but chooses between JSON
	// and go vet's own text, which carmy prints instead.
	goArgs := []string{"vet", "-vettool=" + exe, "-json"}
	if *tags != "" {
		goArgs = append(goArgs, "-tags="+*tags)
	}
	goArgs = append(goArgs, fs.Args()...)
	var out bytes.Buffer
	cmd := exec.Command("go", goArgs...)
	cmd.Stdout, cmd.Stderr = &out, stderr // go vet's errors (a package that does not compile) pass through
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		fmt.Fprintf(stderr, "carmy vet: %v\n", runErr)
		return 1
	}
	tree, err := readVetTree(&out)
	if err != nil {
		fmt.Fprintf(stderr, "carmy vet: reading go vet's output: %v\n", err)
		return 1
	}
	if !*tests {
		tree.dropTestFiles()
	}
	code := 0
	if *asJSON {
		// As the standard drivers: with -json the exit status says only
		// whether the analysis ran.
		data, err := json.MarshalIndent(tree, "", "\t")
		if err != nil {
			fmt.Fprintf(stderr, "carmy vet: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", data)
	} else {
		code = tree.print(stderr, *contextLines)
	}
	if runErr != nil {
		return 1
	}
	// A configured policy file is checked against the tools of the
	// package in the working directory.
	if path, err := policyFile(""); err == nil && code == 0 && !*asJSON {
		code = checkPolicies(path, ".", io.Discard, stderr)
	}
	return code
}

// vetTree is the JSON the analysis drivers print: package ID, then
// analyzer name, then either a list of diagnostics or {"error": "..."}.
// go vet prints one such object per package; carmy vet merges them into
// one, as a standalone driver prints it.
type vetTree map[string]map[string]json.RawMessage

// vetDiagnostic is a diagnostic in the drivers' JSON.
type vetDiagnostic struct {
	Category string       `json:"category,omitempty"`
	Posn     string       `json:"posn"`
	End      string       `json:"end"`
	Message  string       `json:"message"`
	Related  []vetRelated `json:"related,omitempty"`
}

type vetRelated struct {
	Posn    string `json:"posn"`
	End     string `json:"end"`
	Message string `json:"message"`
}

func readVetTree(r io.Reader) (vetTree, error) {
	tree := vetTree{}
	dec := json.NewDecoder(r)
	for {
		var part vetTree
		if err := dec.Decode(&part); err == io.EOF {
			return tree, nil
		} else if err != nil {
			return nil, err
		}
		for id, results := range part {
			if tree[id] == nil {
				tree[id] = map[string]json.RawMessage{}
			}
			maps.Copy(tree[id], results)
		}
	}
}

// dropTestFiles leaves out the diagnostics in test files (-test=false):
// go vet always analyzes a package with its tests.
func (t vetTree) dropTestFiles() {
	for id, results := range t {
		for name, raw := range results {
			var diags []vetDiagnostic
			if json.Unmarshal(raw, &diags) != nil {
				continue // an error, kept
			}
			diags = slices.DeleteFunc(diags, func(d vetDiagnostic) bool {
				file, _, _ := splitPosn(d.Posn)
				return strings.HasSuffix(file, "_test.go")
			})
			if len(diags) == 0 {
				delete(results, name)
				continue
			}
			results[name], _ = json.Marshal(diags)
		}
		if len(results) == 0 {
			delete(t, id)
		}
	}
}

// print writes the diagnostics as the standard drivers do, "file:line:col:
// message", in the order of their positions, and returns the exit status:
// 1 when an analysis failed, else 3 when something was reported, else 0.
func (t vetTree) print(w io.Writer, contextLines int) int {
	code := 0
	var diags []vetDiagnostic
	for _, id := range slices.Sorted(maps.Keys(t)) {
		for _, name := range slices.Sorted(maps.Keys(t[id])) {
			raw := t[id][name]
			var list []vetDiagnostic
			if err := json.Unmarshal(raw, &list); err != nil {
				var failed struct {
					Error string `json:"error"`
				}
				if json.Unmarshal(raw, &failed) != nil {
					failed.Error = string(raw)
				}
				fmt.Fprintf(w, "%s: %s\n", name, failed.Error)
				code = 1
				continue
			}
			diags = append(diags, list...)
		}
	}
	slices.SortFunc(diags, func(a, b vetDiagnostic) int {
		af, al, ac := splitPosn(a.Posn)
		bf, bl, bc := splitPosn(b.Posn)
		return cmp.Or(cmp.Compare(af, bf), cmp.Compare(al, bl), cmp.Compare(ac, bc), cmp.Compare(a.Message, b.Message))
	})
	diags = slices.CompactFunc(diags, func(a, b vetDiagnostic) bool {
		return a.Posn == b.Posn && a.End == b.End && a.Message == b.Message
	})
	for _, d := range diags {
		printPlain(w, d.Posn, d.End, d.Message, contextLines)
		for _, r := range d.Related {
			printPlain(w, r.Posn, r.End, "\t"+r.Message, contextLines)
		}
	}
	if code == 0 && len(diags) > 0 {
		code = 3
	}
	return code
}

// printPlain prints one diagnostic, and with contextLines >= 0 its lines
// and as many around them.
func printPlain(w io.Writer, posn, end, message string, contextLines int) {
	fmt.Fprintf(w, "%s: %s\n", posn, message)
	if contextLines < 0 {
		return
	}
	file, line, _ := splitPosn(posn)
	last := line
	if f, l, _ := splitPosn(end); f == file && l >= line {
		last = l
	}
	data, err := os.ReadFile(file)
	if err != nil || line == 0 {
		return
	}
	lines := strings.Split(string(data), "\n")
	for i := max(line-contextLines, 1); i <= last+contextLines && i <= len(lines); i++ {
		fmt.Fprintf(w, "%d\t%s\n", i, lines[i-1])
	}
}

// splitPosn splits a position as token.Position prints it: "file:line:col",
// "file:line" or "file". The file name may hold colons itself.
func splitPosn(posn string) (file string, line, col int) {
	file = posn
	var nums []int
	for range 2 {
		i := strings.LastIndexByte(file, ':')
		if i < 0 {
			break
		}
		n, err := strconv.Atoi(file[i+1:])
		if err != nil {
			break
		}
		nums = append(nums, n)
		file = file[:i]
	}
	switch len(nums) {
	case 1:
		line = nums[0]
	case 2:
		line, col = nums[1], nums[0]
	}
	return file, line, col
}

const vetUsage = `usage: carmy vet [flags] [packages]

carmy vet checks carmy.Tool calls before run time. It reports, at the call,
what Builder.Build would report when the program runs, in the same words:

  - a function carmy cannot call: two inputs, two contexts, *carmy.Context,
    a parameter that is neither a context, a carmy.State[T] nor an input
    struct, results other than (Out, error) or error, variadic parameters,
    nil or a value that is not a function;
  - an unset effect: 0 or carmy.Effect(0);
  - an invalid name, given with carmy.Name("...") or derived from the
    function's name (snake_case), and a closure without carmy.Name;
  - an option given twice with different values, a Timeout that is not
    positive, a Requires permission that is not one;
  - an input or output type Build refuses, checked with Build's own code:
    a channel, a func, map keys that are not strings, required on a bool
    or a number (false or 0 would be refused), a rule that cannot hold, a
    validate, json or jsonschema tag carmy does not take, a misplaced
    carmy:"request_id", an input field tagged carmy:"header=Name" that no
    header can mirror (a header name that is not an HTTP token, a field
    that is not a string, an integer or a boolean, a pointer, a header
    named twice, a field below the input's top level);
  - a validate rule in a tool's input or output types that cannot reach
    the schema (alphanum, startswith, ne=0, eqfield, a|b, min on a
    duration...): enforced at run time, invisible to a model. Say it in the
    field's description, or use a rule the schema states. It is reported
    at the field when the field is declared in the package, else at the
    carmy.Tool call;
  - a pointer with rules but without omitempty, omitnil or required: carmy
    lets a nil pointer through, where the validator would refuse it.

It also reports a package whose tools' types or functions have doc comments
but whose carmy_gen.go is missing or out of date, since their descriptions
would silently be missing from the schemas: run go generate.

A finding is silenced at its site with a directive naming its check, on
the finding's line or alone on the line above it; the rest of the line
may say why. A silenced finding does not fail vet. A directive at a field
silences its rules for the tools of every package that use it:

	type Order struct {
		//carmy:ignore rule the description says it
		Ref string ` + "`" + `json:"ref" validate:"startswith=ord_" jsonschema:"description=Starts with ord_"` + "`" + `
	}

The checks are tool (a carmy.Tool call Build would refuse), rule (a rule
the schema cannot state) and generate (carmy_gen.go missing or stale).

Use it as a go tool or as a go vet tool:

	go tool carmy vet ./...
	go vet -vettool=$(which carmy) ./...

carmy vet runs the second: go vet -vettool=<carmy's executable>. go vet
starts carmy once per package, dependencies first, and keeps what each
analysis found and passes on (the doc comments of the module's types, the
directives at fields) in the build cache: a new carmy binary analyzes every
dependency once, later runs only what changed.

Packages are the go command's patterns (build tags go in -tags or
GOFLAGS). The exit status is 0 when nothing is reported, 3 when something
is, 1 on errors (a package that does not compile). The flags are:

  -json     print the diagnostics as JSON (exit status 0 unless an error)
  -c=N      show N lines of context around each diagnostic
  -test     also report in test files (default true)
  -tags=t   build tags, as for go build

vet sees what the source says: names, effects and options computed at run
time, options passed as opts..., functions held in an interface, tools
declared inside generic functions, types with their own JSON, text or
schema methods (which only the program runs), recursive types and a
State[T] nobody provides are left to Build.
`

// isVetTool reports whether carmy is being run by go vet -vettool: with
// -V=full to identify itself, -flags to list its flags, or a .cfg file.
func isVetTool(args []string) bool {
	if len(args) == 0 {
		return false
	}
	if strings.HasPrefix(args[0], "-V") || args[0] == "-flags" {
		return true
	}
	return strings.HasSuffix(args[len(args)-1], ".cfg") && !slices.Contains(commandNames(), args[0])
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// vetTool runs the analyzer as go vet's tool.
func vetTool() {
	unitchecker.Main(vet.Analyzer)
}
