package vet_test

import (
	"golang.org/x/tools/go/analysis/multichecker"
	"golang.org/x/tools/go/analysis/passes/nilness"
	"golang.org/x/tools/go/analysis/passes/printf"

	"github.com/carmy-dev/carmy/vet"
)

// A vet command of a project's own, in its main function, runs carmy's
// checks beside other analyzers:
//
//	go build -o myvet ./cmd/myvet
//	go vet -vettool=$(pwd)/myvet ./...
//
// or, standalone, ./myvet ./... (a multichecker loads the packages itself).
func Example_multichecker() {
	multichecker.Main(vet.Analyzer, nilness.Analyzer, printf.Analyzer)
}
