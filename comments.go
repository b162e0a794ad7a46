package carmy

import (
	"runtime"
	"strings"
)

// commentsFor re-keys, for the binary that runs, the comments a package
// main registers. carmy gen keys a command's declarations "main.Greet",
// "main.greet", as the command's binary knows them; a test binary of the
// same package (go test, carmy schema) knows them by the package's import
// path instead, "example.com/hello.Greet". pkg is the registering
// package's path as that binary knows it; no other package can reach the
// types of a package main, so every "main." key is its own.
func commentsFor(pkg string, comments map[string]string) map[string]string {
	if pkg == "" || pkg == "main" {
		return comments
	}
	// A function's name spells a dot in the path's last element %2e, a
	// type's package path does not: both are registered.
	paths := []string{pkg}
	if plain := strings.ReplaceAll(pkg, "%2e", "."); plain != pkg {
		paths = append(paths, plain)
	}
	out := make(map[string]string, len(comments))
	for k, v := range comments {
		rest, ok := strings.CutPrefix(k, "main.")
		if !ok {
			out[k] = v
			continue
		}
		for _, p := range paths {
			out[p+"."+rest] = v
		}
	}
	return out
}

// callerPackage returns the path of the package of the function that
// called its caller, as the running binary spells it in function names;
// "" when unknown.
func callerPackage() string {
	var pcs [1]uintptr
	if runtime.Callers(3, pcs[:]) == 0 { // runtime.Callers, callerPackage, its caller
		return ""
	}
	frame, _ := runtime.CallersFrames(pcs[:]).Next()
	return funcPackage(frame.Function)
}

// funcPackage is the package path of a function's full name:
// "example.com/hello" for "example.com/hello.init.0".
func funcPackage(name string) string {
	slash := strings.LastIndexByte(name, '/') + 1
	dot := strings.IndexByte(name[slash:], '.')
	if dot < 0 {
		return ""
	}
	return name[:slash+dot]
}
