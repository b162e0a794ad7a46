// Package toolsrc reads carmy's tool declarations from Go source: the
// calls that publish schemas, their signatures as carmy.Tool reads them,
// and the doc comments carmy gen writes into carmy_gen.go. carmy gen and
// the vet analyzer share it, so that vet's "is carmy_gen.go current?" is
// answered by the code that writes the file.
package toolsrc
