// Package vet is carmy's static analysis: [Analyzer] reports, before the
// program runs, the carmy.Tool declarations that Builder.Build would
// refuse, in Build's words, the validate rules a tool's schema cannot
// state, and a carmy_gen.go that is missing or out of date.
//
// carmy vet (go tool carmy vet ./...) runs it through go vet. As an
// [analysis.Analyzer] it also runs in any driver: a vet command of one's
// own built with multichecker or unitchecker beside other analyzers, go vet
// -vettool, gopls, or golangci-lint as a module plugin. It uses facts, so
// a driver must analyze a package's dependencies first, as those do.
package vet
