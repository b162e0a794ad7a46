package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// ignoreDirective silences one finding of carmy vet at its site:
//
//	//carmy:ignore <check> [reason]
//
// on the line of the finding, or alone on the line above it. The check is
// the finding's category, one of vetChecks.
const ignoreDirective = "//carmy:ignore"

// vetChecks are the categories of vet's findings, the names a directive
// takes.
var vetChecks = []string{"tool", "rule", "generate"}

// ignores holds the directives of one package's files: the checks each
// line silences.
type ignores map[ignoreSite][]string

type ignoreSite struct {
	file string
	line int
}

// readIgnores collects the directives of files, and reports those that name
// no check.
func readIgnores(pass *analysis.Pass) ignores {
	ig := ignores{}
	for _, f := range pass.Files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				rest, ok := strings.CutPrefix(c.Text, ignoreDirective)
				if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
					continue
				}
				check, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
				if !slices.Contains(vetChecks, check) {
					pass.Report(analysis.Diagnostic{Pos: c.Pos(), End: c.End(), Category: "directive", Message: fmt.Sprintf(
						"carmy: %s names no check (%q); write %s <check>, the check being one of %s", ignoreDirective, check, ignoreDirective, strings.Join(vetChecks, ", "))})
					continue
				}
				pos := pass.Fset.Position(c.Pos())
				lines := []int{pos.Line}
				if alone(pass.Fset, f, c) {
					lines = append(lines, pos.Line+1) // the directive is about the next line
				}
				for _, l := range lines {
					s := ignoreSite{pos.Filename, l}
					ig[s] = append(ig[s], check)
				}
			}
		}
	}
	return ig
}

// alone reports whether comment c starts its line: no code of the file
// comes before it there.
func alone(fset *token.FileSet, f *ast.File, c *ast.Comment) bool {
	at := fset.Position(c.Pos())
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if found || n == nil {
			return false
		}
		if _, isComment := n.(*ast.CommentGroup); isComment {
			return false
		}
		p, e := fset.Position(n.Pos()), fset.Position(n.End())
		if p.Line == at.Line && p.Column < at.Column || e.Line == at.Line && e.Column <= at.Column {
			found = true
		}
		return true
	})
	return !found
}

// silence makes pass report only the findings no directive silences, so
// that every check of the analyzer keeps to the directives without knowing
// of them.
func silence(pass *analysis.Pass, ig ignores) {
	if len(ig) == 0 {
		return
	}
	report := pass.Report
	pass.Report = func(d analysis.Diagnostic) {
		pos := pass.Fset.Position(d.Pos)
		if !slices.Contains(ig[ignoreSite{pos.Filename, pos.Line}], d.Category) {
			report(d)
		}
	}
}

// ignoredFact is the checks that directives silence at a struct field, for
// the analyses of the packages whose tools reach the field: a rule of a
// type from another package is reported at their carmy.Tool calls.
type ignoredFact struct{ Checks []string }

func (*ignoredFact) AFact() {}

func (f *ignoredFact) String() string { return "carmy:ignore " + strings.Join(f.Checks, " ") }

// exportIgnored gives the analyses of the packages that import this one
// the directives at its struct fields.
func exportIgnored(pass *analysis.Pass, ig ignores) {
	if len(ig) == 0 {
		return
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok {
				return true
			}
			pos := pass.Fset.Position(field.Pos())
			checks := ig[ignoreSite{pos.Filename, pos.Line}]
			if len(checks) == 0 {
				return true
			}
			for _, name := range field.Names {
				if v, ok := pass.TypesInfo.Defs[name].(*types.Var); ok && v.IsField() {
					pass.ExportObjectFact(v, &ignoredFact{Checks: checks})
				}
			}
			return true
		})
	}
}
