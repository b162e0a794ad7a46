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
	out := make(map[string]string, len(comments))
	for k, v := range comments {
		if rest, ok := strings.CutPrefix(k, "main."); ok {
			k = pkg + "." + rest
		}
		out[k] = v
	}
	return out
}

// callerPackage returns the import path of the package of the function
// that called its caller; "" when unknown.
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
	return unescapeFuncName(name[:slash+dot])
}

// unescapeFuncName writes a function's full name with its package's import
// path as reflect and carmy gen spell it: the runtime escapes a dot in the
// path's last element as %2e ("example.com/my%2etool.greet").
func unescapeFuncName(name string) string {
	slash := strings.LastIndexByte(name, '/') + 1
	return name[:slash] + strings.ReplaceAll(name[slash:], "%2e", ".")
}
