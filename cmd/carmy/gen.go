package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/carmy-dev/carmy/internal/toolsrc"
)

const genUsage = `usage: carmy gen [-v] [packages]

carmy gen carries Go doc comments into tool schemas. Doc comments are gone
at run time, so gen reads the package's source, finds its carmy.Tool calls
(and carmy.Impl and carmy.SchemaFor), and collects:

  - the doc comment of every function given to carmy.Tool: the tool's
    description when carmy.Description is not given;
  - the doc comments of every type reachable from a tool's input and output,
    and of their fields (the comment above a field or at the end of its
    line), for the descriptions in the schemas.

It writes them into carmy_gen.go beside the package's files, whose init
registers them with carmy.RegisterComments. A description in a tag
(jsonschema:"description=..." or jsonschema_description) wins over a
comment. Only types of the package's own module are read; the standard
library's and other modules' comments are left out. A package with nothing
to register gets no file (and loses a stale one). The output is
deterministic: the same source gives the same bytes.

Packages are the go command's patterns; the default is the package in the
current directory. Run it from go generate, next to the tools:

	//go:generate go tool carmy gen

Flags:
`

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("carmy gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "report what is written for each package")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), genUsage)
		fs.PrintDefaults()
	}
	if isHelp(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	}
	if err := generate("", patterns, logf); err != nil {
		fmt.Fprintf(stderr, "carmy gen: %v\n", err)
		return 1
	}
	return 0
}

// generate writes (or removes) the generated file of every package the
// patterns match, loading them from dir ("" for the current directory).
func generate(dir string, patterns []string, logf func(string, ...any)) error {
	fset := token.NewFileSet()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedModule,
		Dir:  dir,
		Fset: fset,
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			return parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
		},
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("no packages match %s", strings.Join(patterns, " "))
	}
	var errs []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	}
	if len(errs) > 0 {
		if len(errs) > 10 {
			errs = append(errs[:10], fmt.Sprintf("and %d more", len(errs)-10))
		}
		return errors.New("the packages do not compile:\n\t" + strings.Join(errs, "\n\t"))
	}
	slices.SortFunc(pkgs, func(a, b *packages.Package) int { return strings.Compare(a.PkgPath, b.PkgPath) })

	src := &sourceDocs{cfg: cfg, fset: fset, loaded: map[string]*packages.Package{}, docs: map[string]map[string]string{}}
	for _, p := range pkgs {
		src.loaded[p.PkgPath] = p
		src.docs[p.PkgPath] = toolsrc.PackageDocs(p.Syntax, fset)
	}
	for _, p := range pkgs {
		if err := generatePackage(p, src, logf); err != nil {
			return fmt.Errorf("%s: %v", p.PkgPath, err)
		}
	}
	return nil
}

// generatePackage writes one package's generated file.
func generatePackage(p *packages.Package, src *sourceDocs, logf func(string, ...any)) error {
	if len(p.GoFiles) == 0 {
		return nil
	}
	dir := filepath.Dir(p.GoFiles[0])
	path := filepath.Join(dir, toolsrc.GenFile)
	decls := toolsrc.FindDeclarations(p.Syntax, p.TypesInfo)
	comments, err := src.collect(p, decls)
	if err != nil {
		return err
	}
	old, readErr := os.ReadFile(path)
	if len(comments) == 0 {
		if readErr == nil && bytes.HasPrefix(old, []byte(toolsrc.GenHeader)) {
			logf("%s: nothing to register; removing %s", p.PkgPath, toolsrc.GenFile)
			return os.Remove(path)
		}
		logf("%s: nothing to register", p.PkgPath)
		return nil
	}
	if readErr == nil && !bytes.HasPrefix(old, []byte(toolsrc.GenHeader)) {
		return fmt.Errorf("%s exists and was not written by carmy gen; rename it", path)
	}
	out, err := toolsrc.Render(p.Name, toolsrc.ImportName(p.Types), comments)
	if err != nil {
		return err
	}
	if bytes.Equal(old, out) {
		logf("%s: %s is current (%d comments)", p.PkgPath, toolsrc.GenFile, len(comments))
		return nil
	}
	logf("%s: writing %s (%d comments)", p.PkgPath, toolsrc.GenFile, len(comments))
	return os.WriteFile(path, out, 0o666)
}

// sourceDocs reads the doc comments of packages from their source. The
// loaded packages have their syntax; others, reached through the types of
// a tool, are listed with the go command once and parsed on demand.
type sourceDocs struct {
	cfg    *packages.Config
	fset   *token.FileSet
	loaded map[string]*packages.Package // the packages gen was asked about, by path
	listed map[string]*packages.Package // other packages, listed for their files
	docs   map[string]map[string]string // packageDocs, by path
}

// collect returns the comments of a package's declarations.
func (s *sourceDocs) collect(p *packages.Package, decls []toolsrc.Declaration) (map[string]string, error) {
	// Find the packages whose comments are needed and list those not yet
	// known, all at once.
	var missing []string
	need := func(pkg *types.Package) {
		if _, ok := s.loaded[pkg.Path()]; !ok && !slices.Contains(missing, pkg.Path()) {
			if _, ok := s.listed[pkg.Path()]; !ok {
				missing = append(missing, pkg.Path())
			}
		}
	}
	var w toolsrc.TypeWalker
	for _, d := range decls {
		for _, t := range d.Roots {
			w.Walk(t)
		}
		if d.Fn != nil {
			need(d.Fn.Obj.Pkg())
		}
	}
	for tn := range w.Named {
		need(tn.Pkg())
	}
	if err := s.list(missing); err != nil {
		return nil, err
	}
	module := moduleOf(p)
	var failure error
	comments := toolsrc.CollectComments(decls, func(pkg *types.Package) (map[string]string, bool) {
		if pkg == p.Types {
			return s.docs[pkg.Path()], true
		}
		other := s.loaded[pkg.Path()]
		if other == nil {
			other = s.listed[pkg.Path()]
		}
		if other == nil || module == "" || moduleOf(other) != module {
			return nil, false
		}
		docs, err := s.docsOf(other)
		if err != nil && failure == nil {
			failure = err
		}
		return docs, err == nil
	})
	return comments, failure
}

// list asks the go command for the files and modules of packages.
func (s *sourceDocs) list(paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if s.listed == nil {
		s.listed = map[string]*packages.Package{}
	}
	cfg := *s.cfg
	cfg.Mode = packages.NeedName | packages.NeedFiles | packages.NeedModule
	cfg.ParseFile = nil
	pkgs, err := packages.Load(&cfg, paths...)
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		s.listed[p.PkgPath] = p
	}
	return nil
}

// docsOf parses a package's files for their comments.
func (s *sourceDocs) docsOf(p *packages.Package) (map[string]string, error) {
	if d, ok := s.docs[p.PkgPath]; ok {
		return d, nil
	}
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(s.fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	d := toolsrc.PackageDocs(files, s.fset)
	s.docs[p.PkgPath] = d
	return d, nil
}

// moduleOf returns the path of a package's module, "" when unknown.
func moduleOf(p *packages.Package) string {
	if p.Module == nil {
		return ""
	}
	return p.Module.Path
}
