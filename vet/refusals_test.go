package vet

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/modtest"
	"github.com/carmy-dev/carmy/vet/testdata/refusals"
)

// onlyAtRunTime are the refusals of testdata/refusals that vet leaves to
// Build, and why only the running program can know them.
var onlyAtRunTime = map[string]string{
	"own_schema":    "the type's own JSONSchema and MarshalJSON methods run only in the program",
	"state_missing": "the State values are given to the builder where the program builds its registry",
}

// TestRefusals builds each tool of testdata/refusals, which Build refuses,
// and runs the analyzer on its source: vet must report each of Build's
// problems with the tool, in Build's words, and nothing else, unless
// onlyAtRunTime says why it cannot.
func TestRefusals(t *testing.T) {
	t.Parallel()
	modtest.NeedGo(t)
	built := map[string][]string{}
	for _, d := range refusals.Tools {
		_, err := carmy.New().Tool(d).Build()
		if err == nil {
			t.Errorf("Build accepts a tool of testdata/refusals; each should be refused: %+v", d)
			continue
		}
		for _, e := range unjoin(err) {
			var be *carmy.BuildError
			if !errors.As(e, &be) {
				t.Fatalf("Build returned %T: %v", e, e)
			}
			built[be.Tool] = append(built[be.Tool], be.Err.Error())
		}
	}

	results := analysistest.Run(diagnosticsAside{t}, modtest.CheckoutRoot(t), Analyzer, "./"+filepath.ToSlash(filepath.Join("vet", "testdata", "refusals")))
	vetted := map[string][]string{}
	for _, r := range results {
		for _, d := range r.Diagnostics {
			if d.Category != "tool" {
				continue
			}
			rest, ok := strings.CutPrefix(d.Message, `carmy: tool "`)
			name, msg, ok2 := strings.Cut(rest, `" `)
			if !ok || !ok2 {
				t.Errorf("a diagnostic names no tool: %s", d.Message)
				continue
			}
			vetted[name] = append(vetted[name], msg)
		}
	}

	for _, name := range slices.Sorted(maps.Keys(built)) {
		t.Run(name, func(t *testing.T) {
			want, got := built[name], vetted[name]
			slices.Sort(want)
			slices.Sort(got)
			if why, ok := onlyAtRunTime[name]; ok {
				if len(got) > 0 {
					t.Errorf("vet reports it now (%q); take it out of onlyAtRunTime (%s)", got, why)
				}
				return
			}
			if !slices.Equal(got, want) {
				t.Errorf("Build and vet disagree.\nBuild:\n\t%s\nvet:\n\t%s", strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
			}
		})
	}
}

// diagnosticsAside passes on every failure analysistest reports but
// unexpected diagnostics and facts: TestRefusals compares the diagnostics
// with Build's errors rather than with // want comments.
type diagnosticsAside struct{ *testing.T }

func (f diagnosticsAside) Errorf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.Contains(msg, ": unexpected fact: ") || strings.Contains(msg, ": unexpected diagnostic: ") {
		return
	}
	f.T.Helper()
	f.T.Errorf(format, args...)
}

// unjoin returns the errors that errors.Join joined.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
