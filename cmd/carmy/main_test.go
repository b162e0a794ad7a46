package main

import (
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, _ := carmyRun(args...)
		if code != 0 || !strings.Contains(stdout, "Usage:\n\n\tcarmy <command> [arguments]") {
			t.Errorf("carmy %v: exit %d\n%s", args, code, stdout)
		}
		for _, c := range []string{"gen", "vet", "new", "tools", "call"} {
			if !strings.Contains(stdout, "\t"+c+" ") {
				t.Errorf("carmy %v does not list %s:\n%s", args, c, stdout)
			}
		}
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"help", "frobnicate"}} {
		code, stdout, stderr := carmyRun(args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "Usage:") {
			t.Errorf("carmy %v: exit %d, want 2 and the usage on stderr\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
		if len(args) > 0 && !strings.Contains(stderr, `unknown command "frobnicate"`) {
			t.Errorf("carmy %v does not name the unknown command:\n%s", args, stderr)
		}
	}
}

// TestCommandHelp checks that every command explains itself, with -h,
// --help or carmy help.
func TestCommandHelp(t *testing.T) {
	for _, c := range []struct{ name, says string }{
		{"gen", "carmy_gen.go"},
		{"vet", "go vet -vettool=$(which carmy)"},
		{"new", "go test ./..."},
		{"tools", "GET URL/tools"},
		{"call", "POST URL/tools/TOOL"},
		{"proxy", "[[mount]]"},
	} {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			code, stdout, stderr := carmyRun(args...)
			if code != 0 || !strings.HasPrefix(stdout, "usage: carmy "+c.name) || !strings.Contains(stdout, c.says) {
				t.Errorf("carmy %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
			}
		}
	}
}

func TestIsVetTool(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-V=full"}, true},
		{[]string{"-flags"}, true},
		{[]string{"/tmp/b001/vet.cfg"}, true},
		{[]string{"-json", "-c=2", "/tmp/b001/vet.cfg"}, true},
		{[]string{"vet", "./..."}, false},
		{[]string{"gen", "x.cfg"}, false},
		{[]string{"-h"}, false},
		{nil, false},
	} {
		if got := isVetTool(c.args); got != c.want {
			t.Errorf("isVetTool(%q) = %v", c.args, got)
		}
	}
}
