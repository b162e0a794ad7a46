package carmy

import "io"

// SetConsoleOut makes servers print their console URL to w for a test;
// the returned function restores standard error.
func SetConsoleOut(w io.Writer) (restore func()) {
	old := consoleOut
	consoleOut = w
	return func() { consoleOut = old }
}
