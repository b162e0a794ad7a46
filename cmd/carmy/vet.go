package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/internal/shape"
)

// Analyzer is carmy vet's analysis.
var Analyzer = &analysis.Analyzer{
	Name: "carmy",
	Doc: `check carmy tool declarations

The carmy analyzer reports, at the carmy.Tool call, the problems that
carmy's Builder.Build would report at run time, in the same words: a
function whose signature carmy cannot call (two inputs, two contexts, a
parameter that is neither a context, a carmy.State nor an input struct,
results other than (Out, error) or error, variadic parameters), an unset
effect (0 or carmy.Effect(0)), an invalid name (given with carmy.Name or
derived from the function's name), a closure without carmy.Name, an
option given twice with different values, and an input field tagged
carmy:"header=Name" that no header can mirror (a header name that is not
an HTTP token, a field that is not a string, an integer or a boolean, a
pointer, a header named twice, a field below the input's top level).

It warns of validate rules that cannot reach the schema (alphanum,
startswith, ne, cross-field rules such as eqfield, alternatives with |,
bounds on a time.Duration), in the words a model would be shown ("must not
be 0"): carmy enforces them at run time, but a model reading the schema
cannot see them.

It also reports a package whose tools' types or functions carry doc
comments while its carmy_gen.go is missing or out of date: the descriptions
would be silently missing from the schemas. Run go generate, with a
"go:generate go tool carmy gen" directive in the package, to fix it.

A finding is silenced at its site by a directive naming its check (tool,
rule or generate), on the finding's line or alone on the line above it:

	//carmy:ignore rule the description says it`,
	URL:       "https://github.com/carmy-dev/carmy/blob/main/docs/command.md#carmy-vet",
	Run:       analyze,
	FactTypes: []analysis.Fact{new(docsFact), new(ignoredFact)},
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
    positive;
  - an input field tagged carmy:"header=Name" that no header can mirror:
    a header name that is not an HTTP token, a field that is not a string,
    an integer or a boolean, a pointer, a header named twice, a field
    below the input's top level;
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
declared inside generic functions, and problems deeper than the signature
(a channel in an input, a State[T] nobody provides) are left to Build.
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
	unitchecker.Main(Analyzer)
}

// analyze is the analyzer's Run.
func analyze(pass *analysis.Pass) (any, error) {
	ig := readIgnores(pass)
	exportIgnored(pass, ig)
	exportDocs(pass)
	if !importsCarmy(pass.Pkg) {
		return nil, nil
	}
	silence(pass, ig)
	decls := findDeclarations(pass.Files, pass.TypesInfo)
	for _, d := range decls {
		if d.fun == "Tool" {
			checkTool(pass, d)
		}
	}
	checkRules(pass, decls)
	checkGenerated(pass, decls)
	return nil, nil
}

func importsCarmy(pkg *types.Package) bool {
	if pkg.Path() == carmyPath {
		return true
	}
	for _, imp := range pkg.Imports() {
		if imp.Path() == carmyPath {
			return true
		}
	}
	return false
}

// checkTool reports the problems of one carmy.Tool call, in the order and
// words of Builder.Build.
func checkTool(pass *analysis.Pass, d declaration) {
	call := d.call
	var problems []string
	name, named := "", false

	// Options: their conflicts come first, as Tool records them.
	set := map[string]string{}
	spread := call.Ellipsis.IsValid() // options passed as opts...: unknown
	record := func(key, v string) bool {
		if prev, ok := set[key]; ok && prev != v {
			problems = append(problems, fmt.Sprintf("option %s is given twice with different values (%s and %s); keep one", key, prev, v))
			return false
		}
		set[key] = v
		return true
	}
	nameGiven := false // a Name option whose value may be unknown
	if len(call.Args) > 2 && !spread {
		for _, o := range call.Args[2:] {
			oc, ok := ast.Unparen(o).(*ast.CallExpr)
			if !ok {
				spread = true // an option from elsewhere: it may be a Name
				continue
			}
			fn := carmyCall(pass.TypesInfo, oc)
			if fn == nil {
				spread = true
				continue
			}
			if len(oc.Args) != 1 {
				continue
			}
			v := constValue(pass.TypesInfo, oc.Args[0])
			switch fn.Name() {
			case "Name":
				nameGiven = true
				if v != nil && v.Kind() == constant.String && record("Name", constant.StringVal(v)) {
					name, named = constant.StringVal(v), true
				}
			case "Description":
				if v != nil && v.Kind() == constant.String {
					record("Description", constant.StringVal(v))
				}
			case "Register":
				if v != nil && v.Kind() == constant.Bool {
					record("Register", v.String())
				}
			case "Timeout":
				if v == nil {
					continue
				}
				if ns, exact := constant.Int64Val(constant.ToInt(v)); exact {
					if ns <= 0 {
						problems = append(problems, fmt.Sprintf("Timeout(%v) must be positive", time.Duration(ns)))
						continue
					}
					record("Timeout", time.Duration(ns).String())
				}
			}
		}
	}

	// The function.
	var fnType types.Type
	isFunc, closure := false, false
	if len(call.Args) > 0 {
		arg := ast.Unparen(call.Args[0])
		tv := pass.TypesInfo.Types[arg]
		fnType = tv.Type
		switch {
		case tv.IsNil():
			problems = append(problems, "has a nil function; pass a func such as func(ctx context.Context, in Input) (Output, error)")
		case fnType == nil || types.IsInterface(fnType):
			// An interface's dynamic type is known at run time only.
		case hasTypeParam(fnType):
			// Inside a generic function: known once instantiated.
		default:
			sig, ok := fnType.Underlying().(*types.Signature)
			if !ok {
				problems = append(problems, fmt.Sprintf("is given a %s, not a function; pass a func such as func(ctx context.Context, in Input) (Output, error)", typeString(fnType)))
				break
			}
			isFunc = true
			s := classify(sig, d.carmy.Pkg())
			problems = append(problems, s.problems...)
			for _, in := range s.inputs {
				problems = append(problems, headerProblems(in)...)
			}
			_, closure = arg.(*ast.FuncLit)
		}
	}

	// The name, derived when not given.
	nameKnown := named
	if !named && !nameGiven && !spread && isFunc {
		if closure {
			problems = append(problems, "is a closure or anonymous function, which has no usable name; give it one with carmy.Name")
		} else if ref := funcRefOf(pass.TypesInfo, call.Args[0]); ref != nil {
			name, nameKnown = snakeCase(ref.obj.Name()), true
		}
	}
	if nameKnown {
		if err := checkName(name); err != "" {
			problems = append(problems, err)
		}
	}

	// The effect.
	if len(call.Args) > 1 {
		if v := constValue(pass.TypesInfo, call.Args[1]); v != nil {
			if e, exact := constant.Uint64Val(constant.ToInt(v)); exact && (e < 1 || e > 5) {
				problems = append(problems, fmt.Sprintf("has no effect (effect(%d)); pass one of carmy.None, Read, Write, ExternalWrite or Destructive", e))
			}
		}
	}

	prefix := "carmy: tool "
	if name != "" {
		prefix += fmt.Sprintf("%q ", name)
	}
	for _, p := range problems {
		pass.Report(analysis.Diagnostic{Pos: call.Pos(), End: call.End(), Category: "tool", Message: prefix + p})
	}
}

// hasTypeParam reports whether a type mentions a type parameter.
func hasTypeParam(t types.Type) bool {
	found := false
	var visit func(t types.Type)
	seen := map[types.Type]bool{}
	visit = func(t types.Type) {
		if found || seen[t] {
			return
		}
		seen[t] = true
		switch t := types.Unalias(t).(type) {
		case *types.TypeParam:
			found = true
		case *types.Named:
			for a := range t.TypeArgs().Types() {
				visit(a)
			}
		case *types.Pointer:
			visit(t.Elem())
		case *types.Slice:
			visit(t.Elem())
		case *types.Array:
			visit(t.Elem())
		case *types.Map:
			visit(t.Key())
			visit(t.Elem())
		case *types.Chan:
			visit(t.Elem())
		case *types.Signature:
			for v := range t.Params().Variables() {
				visit(v.Type())
			}
			for v := range t.Results().Variables() {
				visit(v.Type())
			}
		case *types.Struct:
			for f := range t.Fields() {
				visit(f.Type())
			}
		}
	}
	visit(t)
	return found
}

// snakeCase is carmy's rule for deriving a tool's name from its function's.
func snakeCase(s string) string { return naming.SnakeCase(s) }

// checkName is carmy's name rule, in Build's words; "" when the name is good.
func checkName(name string) string {
	if err := naming.Check(name); err != nil {
		return err.Error()
	}
	return ""
}

// checkGenerated reports a generated file that is missing or out of date.
// It computes the comments carmy gen would write, with the same code, and
// compares them with those the file registers. The comments of types
// declared in other packages of the module come from those packages'
// analyses, as facts (docsFact).
func checkGenerated(pass *analysis.Pass, decls []declaration) {
	if !mainModule(pass) || len(pass.Files) == 0 {
		// Without the module, what carmy gen reads is unknown; a
		// dependency's packages export no comments (see exportDocs).
		return
	}
	// The generated file covers the declarations outside test files.
	var prod []declaration
	for _, d := range decls {
		if !strings.HasSuffix(pass.Fset.Position(d.call.Pos()).Filename, "_test.go") {
			prod = append(prod, d)
		}
	}
	own := packageDocs(pass.Files, pass.Fset)
	others := importedDocs(pass)
	want := collectComments(prod, func(pkg *types.Package) (map[string]string, bool) {
		if pkg == pass.Pkg {
			return own, true
		}
		// Only the comments of the module's own packages belong in the
		// generated file, as carmy gen writes it.
		docs, ok := others[pkg]
		return docs, ok
	})
	var gen *ast.File
	for _, f := range pass.Files {
		if isGenerated(f) {
			gen = f
			break
		}
	}
	var at ast.Node
	if len(prod) > 0 {
		at = prod[0].call
	}
	switch {
	case gen == nil && len(want) == 0:
	case gen == nil:
		pass.Report(analysis.Diagnostic{Pos: at.Pos(), Category: "generate", Message: fmt.Sprintf(
			"carmy: the doc comments of this package's tools (%d) are not registered: %s is missing, so the schemas and descriptions lack them; run go generate, with //go:generate go tool carmy gen in the package",
			len(want), genFile)})
	default:
		have, ok := registeredComments(gen)
		if ok && maps.Equal(have, want) {
			return
		}
		if at == nil {
			at = gen.Name
		}
		pass.Report(analysis.Diagnostic{Pos: at.Pos(), Category: "generate", Message: fmt.Sprintf(
			"carmy: %s is out of date (%s); run go generate, with //go:generate go tool carmy gen in the package",
			genFile, difference(have, want))})
	}
}

// difference sums up how a generated file's comments differ from the
// source's.
func difference(have, want map[string]string) string {
	var missing, stale, extra []string
	for k, v := range want {
		h, ok := have[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case h != v:
			stale = append(stale, k)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	var parts []string
	for _, p := range []struct {
		what string
		keys []string
	}{{"missing", missing}, {"changed", stale}, {"no longer in the source", extra}} {
		if len(p.keys) == 0 {
			continue
		}
		slices.Sort(p.keys)
		s := fmt.Sprintf("%s: %s", p.what, p.keys[0])
		if len(p.keys) > 1 {
			s += fmt.Sprintf(" and %d more", len(p.keys)-1)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "unreadable"
	}
	return strings.Join(parts, "; ")
}

// checkRules warns of each validate rule in the tools' types that the
// schema cannot state. A rule of a field declared in this package is
// reported at the field, once, where a directive can silence it; a rule of
// another package's field at each carmy.Tool call that reaches it.
func checkRules(pass *analysis.Pass, decls []declaration) {
	reported := map[string]bool{}
	for _, d := range decls {
		if d.fun != "Tool" {
			continue
		}
		seen := map[types.Type]bool{}
		for _, root := range d.roots {
			walkRules(root, "", seen, func(f *types.Var, path, msg string) {
				at := ast.Node(d.call)
				var ignored ignoredFact
				if f.Pkg() != pass.Pkg && pass.ImportObjectFact(f, &ignored) && slices.Contains(ignored.Checks, "rule") {
					return // silenced at the field, in its own package
				}
				if f.Pkg() == pass.Pkg && f.Pos().IsValid() {
					key := fmt.Sprint(f.Pos(), msg)
					if reported[key] {
						return
					}
					reported[key] = true
					at = fieldNode{f}
				}
				pass.Report(analysis.Diagnostic{Pos: at.Pos(), End: at.End(), Category: "rule",
					Message: fmt.Sprintf("carmy: %s: %s", path, msg)})
			})
		}
	}
}

// fieldNode places a finding at a struct field.
type fieldNode struct{ f *types.Var }

func (n fieldNode) Pos() token.Pos { return n.f.Pos() }
func (n fieldNode) End() token.Pos { return n.f.Pos() + token.Pos(len(n.f.Name())) }

// walkRules calls report for every rule of a struct field reachable from t
// that the schema cannot state, and for every pointer whose rules the
// validator would check on nil.
func walkRules(t types.Type, path string, seen map[types.Type]bool, report func(f *types.Var, path, msg string)) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch u := types.Unalias(t).Underlying().(type) {
	case *types.Pointer:
		walkRules(u.Elem(), path, seen, report)
	case *types.Slice:
		walkRules(u.Elem(), path+"[]", seen, report)
	case *types.Array:
		walkRules(u.Elem(), path+"[]", seen, report)
	case *types.Map:
		walkRules(u.Elem(), path+"[]", seen, report)
	case *types.Struct:
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() && !f.Embedded() {
				continue
			}
			tag := reflect.StructTag(u.Tag(i))
			name, _, _ := strings.Cut(tag.Get("json"), ",")
			fpath := path
			if !f.Embedded() || name != "" {
				if name == "" {
					name = f.Name()
				}
				if fpath != "" {
					fpath += "."
				}
				fpath += name
			}
			if name == "-" {
				continue
			}
			validate := tag.Get("validate")
			level := f.Type() // the value the rules apply to: the field's, then each dive's elements
			first := true     // the rule is the first of its level
			for rule := range strings.SplitSeq(validate, ",") {
				rname, _, _ := strings.Cut(rule, "=")
				duration := isNamed(types.Unalias(deref(level)), "time", "Duration")
				if first && rule != "" && rule != "-" && !nilSkipping(rname) && isPointer(level) {
					report(f, fpath, fmt.Sprintf("validate:%q: carmy lets a nil pointer through (null or absent, as every pointer may be) without its rules, where the validator would check %q on nil and refuse it; write omitempty before the rules to say what carmy does, or required to refuse null", validate, rule))
				}
				first = rule == "dive"
				switch {
				case rule == "dive":
					level = elemOf(level)
				case rule == "" || rule == "-":
				case strings.Contains(rule, "|"), !shape.InSchema(rname),
					duration && rname != "required" && rname != "omitempty":
					report(f, fpath, fmt.Sprintf("validate rule %q (%s) cannot reach the schema: carmy checks it when the tool is called, but a model reading the schema cannot see it; say it in the field's description, or use a rule the schema states", rule, shape.RuleMessage(rule, kindOf(level))))
				}
			}
			walkRules(f.Type(), fpath, seen, report)
		}
	}
}

// nilSkipping reports whether a rule, first of its level, lets the
// validator pass a nil pointer without the rules after it (the omit
// rules), or means what carmy means on nil (required and the rules that
// compare with other fields, which the validator runs on nil too).
func nilSkipping(name string) bool {
	switch name {
	case "omitempty", "omitnil", "omitzero", "isdefault", "required":
		return true
	}
	return strings.HasPrefix(name, "required_") || strings.HasPrefix(name, "excluded_") || name == "skip_unless"
}

func isPointer(t types.Type) bool {
	if t == nil {
		return false
	}
	_, ok := t.Underlying().(*types.Pointer)
	return ok
}

func deref(t types.Type) types.Type {
	for t != nil {
		p, ok := t.Underlying().(*types.Pointer)
		if !ok {
			break
		}
		t = p.Elem()
	}
	return t
}

// elemOf is the type of the elements of t, past pointers, that a dive
// reaches; nil when t has none.
func elemOf(t types.Type) types.Type {
	switch u := deref(t).(type) {
	case nil:
		return nil
	default:
		switch e := u.Underlying().(type) {
		case *types.Slice:
			return e.Elem()
		case *types.Array:
			return e.Elem()
		case *types.Map:
			return e.Elem()
		}
	}
	return nil
}

// kindOf is the reflect kind of a value of type t past pointers, as the
// validator sees it when it words a rule.
func kindOf(t types.Type) reflect.Kind {
	t = deref(t)
	if t == nil {
		return reflect.Invalid
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch info := u.Info(); {
		case info&types.IsString != 0:
			return reflect.String
		case info&types.IsBoolean != 0:
			return reflect.Bool
		case info&types.IsUnsigned != 0:
			return reflect.Uint
		case info&types.IsInteger != 0:
			return reflect.Int
		case info&types.IsFloat != 0:
			return reflect.Float64
		}
	case *types.Slice:
		return reflect.Slice
	case *types.Array:
		return reflect.Array
	case *types.Map:
		return reflect.Map
	case *types.Struct:
		return reflect.Struct
	}
	return reflect.Invalid
}
