package vet

import (
	"fmt"
	"go/types"
	"maps"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/carmy-dev/carmy/internal/toolsrc"
)

// docsFact is the doc comments of one package-level type or function of a
// module's package (see packageDocs): a type's own, its fields' and its
// methods'. The analyses of the module's packages whose tools reach the
// type register these comments in their carmy_gen.go, as carmy gen does.
//
// The fact is about the type, not about its package, because the analysis
// drivers pass a package's facts on to its direct importers only, while
// the facts about types, fields and methods travel as far as the types do:
// a tool's input may reach a type of a package its own package does not
// import.
type docsFact struct {
	Module string
	// Docs are the comments by name, as packageDocs names them, sorted: a
	// fact's encoding must be the same on every run, which a map's is not.
	Docs []namedDoc
}

type namedDoc struct{ Name, Text string }

func (*docsFact) AFact() {}

func (f *docsFact) String() string {
	return fmt.Sprintf("%d doc comments of module %s", len(f.Docs), f.Module)
}

// exportDocs attaches the doc comments of a package of the main module to
// its types and functions. The packages of dependency modules, whose
// generated files are their authors' concern, and of the standard library
// export none: the facts about types travel with every package that
// reaches them, and a dependency's comments would grow each of those.
func exportDocs(pass *analysis.Pass) {
	if !mainModule(pass) {
		return
	}
	docs := toolsrc.PackageDocs(pass.Files, pass.Fset)
	owned := map[types.Object]*docsFact{}
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		obj := pass.Pkg.Scope().Lookup(docsOwner(name))
		switch obj.(type) {
		case *types.TypeName, *types.Func:
		default:
			continue // a receiver the key could not name
		}
		f := owned[obj]
		if f == nil {
			f = &docsFact{Module: pass.Module.Path}
			owned[obj] = f
		}
		f.Docs = append(f.Docs, namedDoc{name, docs[name]})
	}
	for obj, f := range owned {
		pass.ExportObjectFact(obj, f)
	}
}

// docsOwner is the package-level name a packageDocs key belongs to: "T"
// for "T", "T.F", "T.M" and "(*T).M"; "f" for "f".
func docsOwner(key string) string {
	key = strings.TrimPrefix(key, "(*")
	if i := strings.IndexAny(key, ".)"); i >= 0 {
		key = key[:i]
	}
	return key
}

// mainModule reports whether the package analyzed belongs to a module the
// go command was run in (the main module, or a workspace's), not to a
// dependency (which has a version) nor to the standard library.
func mainModule(pass *analysis.Pass) bool {
	return pass.Module != nil && pass.Module.Path != "" && pass.Module.Version == ""
}

// importedDocs gathers the doc comments that the analyses of the other
// packages of pass's module exported as facts, by package.
func importedDocs(pass *analysis.Pass) map[*types.Package]map[string]string {
	byPkg := map[*types.Package]map[string]string{}
	for _, of := range pass.AllObjectFacts() {
		f, ok := of.Fact.(*docsFact)
		if !ok || f.Module != pass.Module.Path || of.Object.Pkg() == pass.Pkg {
			continue
		}
		docs := byPkg[of.Object.Pkg()]
		if docs == nil {
			docs = map[string]string{}
			byPkg[of.Object.Pkg()] = docs
		}
		for _, d := range f.Docs {
			docs[d.Name] = d.Text
		}
	}
	return byPkg
}
