package vet

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

	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/internal/shape"
	"github.com/carmy-dev/carmy/internal/toolsrc"
)

// Analyzer reports the carmy.Tool declarations Builder.Build would refuse,
// the validate rules a schema cannot state and a stale carmy_gen.go; see
// the package doc and Doc below. It is safe to run on many packages at
// once, as the analysis drivers do.
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
option given twice with different values, a Requires permission that is
not one, and input and output types Build cannot model (a channel, a
func, map keys that are not strings, required on a bool or a number, a
validate or jsonschema tag carmy does not take, a field tagged
carmy:"header=Name" that no header can mirror...), which it checks with
Build's own code.

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

// analyze is the analyzer's Run.
func analyze(pass *analysis.Pass) (any, error) {
	ig := readIgnores(pass)
	exportIgnored(pass, ig)
	exportDocs(pass)
	if !importsCarmy(pass.Pkg) {
		return nil, nil
	}
	silence(pass, ig)
	decls := toolsrc.FindDeclarations(pass.Files, pass.TypesInfo)
	for _, d := range decls {
		if d.Fun == "Tool" {
			checkTool(pass, d)
		}
	}
	checkRules(pass, decls)
	checkGenerated(pass, decls)
	return nil, nil
}

func importsCarmy(pkg *types.Package) bool {
	if pkg.Path() == toolsrc.CarmyPath {
		return true
	}
	for _, imp := range pkg.Imports() {
		if imp.Path() == toolsrc.CarmyPath {
			return true
		}
	}
	return false
}

// checkTool reports the problems of one carmy.Tool call, in the order and
// words of Builder.Build.
func checkTool(pass *analysis.Pass, d toolsrc.Declaration) {
	call := d.Call
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
			fn := toolsrc.CarmyCall(pass.TypesInfo, oc)
			if fn == nil {
				spread = true
				continue
			}
			if fn.Name() == "RateLimit" && len(oc.Args) == 2 {
				if p := rateProblem(pass.TypesInfo, oc.Args[0], oc.Args[1]); p != "" {
					problems = append(problems, p)
				}
				continue
			}
			if fn.Name() == "Requires" {
				for _, a := range oc.Args {
					if v := toolsrc.ConstValue(pass.TypesInfo, a); v != nil && v.Kind() == constant.String {
						if err := naming.CheckPermission(constant.StringVal(v)); err != nil {
							problems = append(problems, "Requires: "+err.Error())
						}
					}
				}
				continue
			}
			if len(oc.Args) != 1 {
				continue
			}
			v := toolsrc.ConstValue(pass.TypesInfo, oc.Args[0])
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
			case "MaxInFlight":
				if v == nil {
					continue
				}
				if n, exact := constant.Int64Val(constant.ToInt(v)); exact && n <= 0 {
					problems = append(problems, fmt.Sprintf("MaxInFlight(%d) must be positive", n))
				}
			}
		}
	}

	// The function.
	var fnType types.Type
	var typeProblems []string // Build models the types after the rest
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
		case toolsrc.HasTypeParam(fnType):
			// Inside a generic function: known once instantiated.
		default:
			sig, ok := fnType.Underlying().(*types.Signature)
			if !ok {
				problems = append(problems, fmt.Sprintf("is given a %s, not a function; pass a func such as func(ctx context.Context, in Input) (Output, error)", toolsrc.TypeString(fnType)))
				break
			}
			isFunc = true
			s := toolsrc.Classify(sig, d.Carmy.Pkg())
			problems = append(problems, s.Problems...)
			if len(s.Problems) == 0 {
				typeProblems = checkTypes(s)
			}
			_, closure = arg.(*ast.FuncLit)
		}
	}

	// The name, derived when not given.
	nameKnown := named
	if !named && !nameGiven && !spread && isFunc {
		if closure {
			problems = append(problems, "is a closure or anonymous function, which has no usable name; give it one with carmy.Name")
		} else if ref := toolsrc.FuncRefOf(pass.TypesInfo, call.Args[0]); ref != nil {
			name, nameKnown = snakeCase(ref.Obj.Name()), true
		}
	}
	if nameKnown {
		if err := checkName(name); err != "" {
			problems = append(problems, err)
		}
	}

	// The effect.
	if len(call.Args) > 1 {
		if v := toolsrc.ConstValue(pass.TypesInfo, call.Args[1]); v != nil {
			if e, exact := constant.Uint64Val(constant.ToInt(v)); exact && (e < 1 || e > 5) {
				problems = append(problems, fmt.Sprintf("has no effect (effect(%d)); pass one of carmy.None, Read, Write, ExternalWrite or Destructive", e))
			}
		}
	}

	problems = append(problems, typeProblems...)
	prefix := "carmy: tool "
	if name != "" {
		prefix += fmt.Sprintf("%q ", name)
	}
	for _, p := range problems {
		pass.Report(analysis.Diagnostic{Pos: call.Pos(), End: call.End(), Category: "tool", Message: prefix + p})
	}
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
func checkGenerated(pass *analysis.Pass, decls []toolsrc.Declaration) {
	if !mainModule(pass) || len(pass.Files) == 0 {
		// Without the module, what carmy gen reads is unknown; a
		// dependency's packages export no comments (see exportDocs).
		return
	}
	// The generated file covers the declarations outside test files.
	var prod []toolsrc.Declaration
	for _, d := range decls {
		if !strings.HasSuffix(pass.Fset.Position(d.Call.Pos()).Filename, "_test.go") {
			prod = append(prod, d)
		}
	}
	own := toolsrc.PackageDocs(pass.Files, pass.Fset)
	others := importedDocs(pass)
	want := toolsrc.CollectComments(prod, func(pkg *types.Package) (map[string]string, bool) {
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
		if toolsrc.IsGenerated(f) {
			gen = f
			break
		}
	}
	var at ast.Node
	if len(prod) > 0 {
		at = prod[0].Call
	}
	switch {
	case gen == nil && len(want) == 0:
	case gen == nil:
		pass.Report(analysis.Diagnostic{Pos: at.Pos(), Category: "generate", Message: fmt.Sprintf(
			"carmy: the doc comments of this package's tools (%d) are not registered: %s is missing, so the schemas and descriptions lack them; run go generate, with //go:generate go tool carmy gen in the package",
			len(want), toolsrc.GenFile)})
	default:
		have, ok := toolsrc.RegisteredComments(gen)
		if ok && maps.Equal(have, want) {
			return
		}
		if at == nil {
			at = gen.Name
		}
		pass.Report(analysis.Diagnostic{Pos: at.Pos(), Category: "generate", Message: fmt.Sprintf(
			"carmy: %s is out of date (%s); run go generate, with //go:generate go tool carmy gen in the package",
			toolsrc.GenFile, difference(have, want))})
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
func checkRules(pass *analysis.Pass, decls []toolsrc.Declaration) {
	reported := map[string]bool{}
	for _, d := range decls {
		if d.Fun != "Tool" {
			continue
		}
		seen := map[types.Type]bool{}
		for _, root := range d.Roots {
			walkRules(root, "", seen, func(f *types.Var, path, msg string) {
				at := ast.Node(d.Call)
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
				duration := toolsrc.IsNamed(types.Unalias(deref(level)), "time", "Duration")
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
					report(f, fpath, fmt.Sprintf("validate rule %q (%s) cannot reach the schema: carmy checks it when the tool is called, but a model reading the schema cannot see it; use a rule the schema states, or say it in the field's description and mark the field //carmy:ignore rule (vet does not read descriptions)", rule, shape.RuleMessage(rule, kindOf(level))))
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

// rateProblem is Build's problem with carmy.RateLimit(n, per) of constant
// arguments, "" when there is none or they are not constant.
func rateProblem(info *types.Info, nArg, perArg ast.Expr) string {
	nv, pv := toolsrc.ConstValue(info, nArg), toolsrc.ConstValue(info, perArg)
	if nv == nil || pv == nil {
		return ""
	}
	n, exactN := constant.Int64Val(constant.ToInt(nv))
	ns, exactP := constant.Int64Val(constant.ToInt(pv))
	if !exactN || !exactP {
		return ""
	}
	per := time.Duration(ns)
	if err := naming.CheckRate(n, per); err != nil {
		return fmt.Sprintf("RateLimit(%d, %v): %v", n, per, err)
	}
	return ""
}
