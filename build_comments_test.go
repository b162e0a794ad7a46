package carmy

import (
	"maps"
	"testing"
)

// TestCommentsFor: a package main's keys name the registering package's
// own declarations in whichever binary runs, under its import path in a
// test binary, spelt as reflect and carmy gen spell it.
func TestCommentsFor(t *testing.T) {
	in := map[string]string{"main.Greet": "g", "main.greet": "f", "example.com/hello/model.Item": "i"}
	for _, c := range []struct {
		caller string // the function that registers, as the runtime names it
		want   map[string]string
	}{
		{"main.init.0", in},
		{"example.com/hello.init.0", map[string]string{"example.com/hello.Greet": "g", "example.com/hello.greet": "f", "example.com/hello/model.Item": "i"}},
		{"example.com/my%2etool.init.0", map[string]string{"example.com/my.tool.Greet": "g", "example.com/my.tool.greet": "f", "example.com/hello/model.Item": "i"}},
	} {
		if got := commentsFor(funcPackage(c.caller), in); !maps.Equal(got, c.want) {
			t.Errorf("registered from %s: %v, want %v", c.caller, got, c.want)
		}
	}
	if got := registering(); got != "github.com/carmy-dev/carmy" {
		t.Errorf("callerPackage() called from this package = %q", got)
	}
}

// registering stands for RegisterComments: callerPackage names the package
// that calls it.
func registering() string { return callerPackage() }
