package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/internal/toolsrc"
)

const schemaUsage = `usage: carmy schema [-cedar] [-tool name] [package]

carmy schema prints the input and output schemas of the tools a package
declares with carmy.Tool, as a JSON array of {"name", "input_schema",
"output_schema", "requires"}, without running a server. "requires" lists
the permissions the tool declares with carmy.Requires (a host's
Builder.EffectPermissions may add the one of its effect); it is left out
when there are none. The package is a directory or
an import path, "." by default; -tool keeps one tool. -cedar prints each
tool's Cedar schema instead: the one its policies are validated against
(see carmy policy check), in which call's and approve's context.input is
the tool's input.

The schemas are the ones the registry publishes, descriptions from
carmy_gen.go included: carmy schema compiles the package's tests with one
more test file (given to the go command as an overlay, never written into
the package) that derives them with carmy.SchemaFor, and runs only that
test. The package and its tests must compile.

It sees what the source says: a tool whose function is a value known only
at run time, whose name is computed, or whose types are type parameters is
left out with a note on stderr, and tools written with carmy.Impl are left
out (their metadata is computed at run time).
`

// schemaTool is one tool as carmy schema prints it.
type schemaTool struct {
	Name         string          `json:"name"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Requires     []string        `json:"requires,omitempty"`
}

// packagePattern is the one optional argument of a command that reads a
// package's tools: the package pattern, "." when none is given. More than
// one argument prints usage, and ok is false.
func packagePattern(fs *flag.FlagSet, usage string, stderr io.Writer) (pattern string, ok bool) {
	switch fs.NArg() {
	case 0:
		return ".", true
	case 1:
		return fs.Arg(0), true
	}
	fmt.Fprint(stderr, usage)
	return "", false
}

func runSchema(args []string, stdout, stderr io.Writer) int {
	if isHelp(args) {
		fmt.Fprint(stdout, schemaUsage)
		return 0
	}
	fs := flag.NewFlagSet("carmy schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, schemaUsage) }
	only := fs.String("tool", "", "print only the tool with this `name`")
	cedar := fs.Bool("cedar", false, "print the tools' Cedar schemas")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	pattern, ok := packagePattern(fs, schemaUsage, stderr)
	if !ok {
		return 2
	}
	tools, err := packageSchemas(pattern, func(format string, args ...any) { fmt.Fprintf(stderr, "carmy schema: "+format+"\n", args...) })
	if err != nil {
		fmt.Fprintf(stderr, "carmy schema: %v\n", err)
		return 1
	}
	if *only != "" {
		tools = slices.DeleteFunc(tools, func(t schemaTool) bool { return t.Name != *only })
		if len(tools) == 0 {
			fmt.Fprintf(stderr, "carmy schema: no tool named %q in %s\n", *only, pattern)
			return 1
		}
	}
	if *cedar {
		printCedarSchemas(stdout, tools)
		return 0
	}
	out, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "carmy schema: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}

// dumpTest names the test that carmy schema adds to a package.
const dumpTest = "TestCarmySchemaDump"

// packageSchemas finds the tools of one package and derives their schemas
// by running a generated test inside it.
func packageSchemas(pattern string, notef func(string, ...any)) ([]schemaTool, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s matches %d packages; give one", pattern, len(pkgs))
	}
	p := pkgs[0]
	if len(p.Errors) > 0 {
		return nil, fmt.Errorf("the package does not compile: %v", p.Errors[0])
	}
	if len(p.GoFiles) == 0 {
		return nil, fmt.Errorf("%s has no Go files", pattern)
	}
	src, requires := dumpSource(p, notef)
	n := len(requires)
	if n == 0 {
		return []schemaTool{}, nil
	}
	dir := filepath.Dir(p.GoFiles[0])
	tmp, err := os.MkdirTemp("", "carmy-schema-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file, outFile := filepath.Join(tmp, "dump_test.go"), filepath.Join(tmp, "schemas.json")
	overlay := filepath.Join(tmp, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "zz_carmy_schema_dump_test.go"): file}})
	if err := errors.Join(os.WriteFile(file, src, 0o644), os.WriteFile(overlay, ov, 0o644)); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "test", "-overlay", overlay, "-count=1", "-run", "^"+dumpTest+"$", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CARMY_SCHEMA_OUT="+outFile)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("deriving the schemas failed: %v\n%s", err, log.Bytes())
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		return nil, fmt.Errorf("the schema test wrote nothing (does the package's TestMain run the tests?): %v\n%s", err, log.Bytes())
	}
	var tools []schemaTool
	if err := json.Unmarshal(data, &tools); err != nil {
		return nil, err
	}
	slices.SortStableFunc(tools, func(a, b schemaTool) int { return strings.Compare(a.Name, b.Name) })
	for i := range tools {
		tools[i].Requires = requires[tools[i].Name]
	}
	return tools, nil
}

// dumpSource writes the test file that derives the schemas of the
// package's carmy.Tool declarations, and returns the permissions each tool
// it covers declares, by name.
func dumpSource(p *packages.Package, notef func(string, ...any)) ([]byte, map[string][]string) {
	imports := map[string]string{} // path → name in the file
	qualify := func(pkg *types.Package) string {
		if pkg == p.Types {
			return ""
		}
		name, ok := imports[pkg.Path()]
		if !ok {
			name = "carmyschema" + strconv.Itoa(len(imports))
			imports[pkg.Path()] = name
		}
		return name
	}
	carmyName := qualify(types.NewPackage(toolsrc.CarmyPath, "carmy"))
	var body strings.Builder
	requires := map[string][]string{}
	for _, d := range toolsrc.FindDeclarations(p.Syntax, p.TypesInfo) {
		if d.Fun != "Tool" || len(d.Call.Args) == 0 {
			continue
		}
		at := p.Fset.Position(d.Call.Pos())
		name, ok := staticName(p.TypesInfo, d)
		sig, isSig := toolsrc.TypeOf(p.TypesInfo, d.Call.Args[0]).(*types.Signature)
		switch {
		case !isSig:
			notef("%s: the tool's function is not known before run time; left out", at)
			continue
		case !ok:
			notef("%s: the tool's name is computed at run time; left out", at)
			continue
		case toolsrc.HasTypeParam(sig):
			notef("%s: tool %s has type parameters; left out", at, name)
			continue
		}
		s := toolsrc.Classify(sig, d.Carmy.Pkg())
		if len(s.Problems) > 0 || len(s.Inputs) > 1 {
			notef("%s: tool %s has an invalid signature (run carmy vet); left out", at, name)
			continue
		}
		in := "struct{}"
		if len(s.Inputs) == 1 {
			t := s.Inputs[0]
			if ptr, ok := types.Unalias(t).(*types.Pointer); ok {
				t = ptr.Elem()
			}
			in = types.TypeString(t, qualify)
		}
		out := "[]byte(`{\"type\":\"null\"}`)"
		if s.Out != nil {
			out = fmt.Sprintf("%s.SchemaFor[%s]()", carmyName, types.TypeString(s.Out, qualify))
		}
		fmt.Fprintf(&body, "\tadd(%q, %s.SchemaFor[%s](), %s)\n", name, carmyName, in, out)
		requires[name] = staticRequires(p.TypesInfo, d, func() {
			notef("%s: tool %s requires permissions computed at run time; requires shows only the constant ones", at, name)
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n\tcarmyschemajson \"encoding/json\"\n\tcarmyschemaos \"os\"\n\tcarmyschematesting \"testing\"\n", p.Name)
	for _, path := range slices.Sorted(maps.Keys(imports)) {
		fmt.Fprintf(&b, "\t%s %q\n", imports[path], path)
	}
	fmt.Fprintf(&b, `)

func %s(t *carmyschematesting.T) {
	type tool struct {
		Name         string                       `+"`json:\"name\"`"+`
		InputSchema  carmyschemajson.RawMessage `+"`json:\"input_schema\"`"+`
		OutputSchema carmyschemajson.RawMessage `+"`json:\"output_schema\"`"+`
	}
	var tools []tool
	add := func(name string, in, out []byte) {
		if in == nil || out == nil {
			t.Fatalf("tool %%s: carmy cannot derive its schemas; carmy.New().Tool(...).Build() says why", name)
		}
		tools = append(tools, tool{name, in, out})
	}
%s	b, err := carmyschemajson.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	if err := carmyschemaos.WriteFile(carmyschemaos.Getenv("CARMY_SCHEMA_OUT"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
`, dumpTest, body.String())
	return []byte(b.String()), requires
}

// staticRequires returns the permissions a tool declares with constant
// arguments of carmy.Requires, sorted, each once; computed ones call
// computed.
func staticRequires(info *types.Info, d toolsrc.Declaration, computed func()) []string {
	var out []string
	for _, o := range d.Call.Args[min(2, len(d.Call.Args)):] {
		oc, ok := ast.Unparen(o).(*ast.CallExpr)
		if !ok {
			continue
		}
		if fn := toolsrc.CarmyCall(info, oc); fn == nil || fn.Name() != "Requires" {
			continue
		}
		if oc.Ellipsis.IsValid() {
			computed()
			continue
		}
		for _, a := range oc.Args {
			v := toolsrc.ConstValue(info, a)
			if v == nil || v.Kind() != constant.String {
				computed()
				continue
			}
			out = append(out, constant.StringVal(v))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// staticName returns a tool's name when the source says it: a constant
// carmy.Name option, or the name derived from a declared function.
func staticName(info *types.Info, d toolsrc.Declaration) (string, bool) {
	for _, o := range d.Call.Args[min(2, len(d.Call.Args)):] {
		oc, ok := ast.Unparen(o).(*ast.CallExpr)
		if !ok {
			return "", false // options from elsewhere may name it
		}
		if fn := toolsrc.CarmyCall(info, oc); fn != nil && fn.Name() == "Name" && len(oc.Args) == 1 {
			v := toolsrc.ConstValue(info, oc.Args[0])
			if v == nil || v.Kind() != constant.String {
				return "", false
			}
			return constant.StringVal(v), true
		}
	}
	if d.Call.Ellipsis.IsValid() || d.Fn == nil {
		return "", false
	}
	return naming.SnakeCase(d.Fn.Obj.Name()), true
}
