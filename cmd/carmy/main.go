// Command carmy is the command-line companion of the carmy library.
//
// Usage:
//
//	carmy <command> [arguments]
//
// The commands are:
//
//	gen        write carmy_gen.go: the doc comments of a package's tools, for their schemas
//	vet        check carmy.Tool calls before run time (also a go vet -vettool)
//	new        create a module with one example tool, ready to run and test
//	schema     print the input and output schemas of a package's tools
//	policy     check a Cedar policy file against a package's tools, or test it on recorded requests
//	tools      list the tools of a running server
//	call       call a tool of a running server
//	tasks      list, read, wait for and cancel the caller's tasks on a running server
//	approvals  list and decide the calls that wait for you on your local servers
//	proxy      serve the tools of mounted MCP servers with carmy's governance
//
// Install it as a tool of your module and run it with go tool:
//
//	go get -tool github.com/carmy-dev/carmy/cmd/carmy
//	go tool carmy gen
//
// Go doc comments are gone at run time, so carmy gen copies the comments of
// a package's tool functions, and of every type their inputs and outputs
// reach, into a generated file that registers them with
// carmy.RegisterComments. Put this line in the package, next to the tools:
//
//	//go:generate go tool carmy gen
//
// carmy vet reports, at the carmy.Tool call, the mistakes that Build would
// report at run time (an invalid signature, an unset effect, an invalid
// name), and a carmy_gen.go that is missing or out of date. It runs as
// "go tool carmy vet ./..." or as "go vet -vettool=$(which carmy) ./...".
//
// Run "carmy help <command>" or "carmy <command> -h" for the details of a
// command. See docs/command.md in the carmy repository for a guide.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// A command is one subcommand of carmy.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func init() {
	// Assigned in init: the help command refers to the table.
	commands = []command{
		{"gen", "write carmy_gen.go: the doc comments of a package's tools, for their schemas", runGen},
		{"vet", "check carmy.Tool calls before run time (also a go vet -vettool)", runVet},
		{"new", "create a module with one example tool, ready to run and test", runNew},
		{"schema", "print the input and output schemas of a package's tools", runSchema},
		{"policy", "check a Cedar policy file against a package's tools, or test it on recorded requests", runPolicy},
		{"tools", "list the tools of a running server", runTools},
		{"call", "call a tool of a running server", runCall},
		{"approvals", "list and decide the calls that wait for you on your local servers", runApprovals},
		{"tasks", "list, read, wait for and cancel the caller's tasks on a running server", runTasks},
		{"proxy", "serve the tools of mounted MCP servers with carmy's governance", runProxy},
		{"help", "show the help of carmy or of a command", runHelp},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit status: 0 for
// success, 1 for a failure, 2 for a usage mistake.
func run(args []string, stdout, stderr io.Writer) int {
	if isVetTool(args) {
		vetTool() // go vet -vettool=carmy: never returns
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "carmy: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `carmy is the command-line companion of the carmy library: it carries doc
comments into tool schemas, checks tools before run time, starts new
projects and talks to running servers.

Usage:

	carmy <command> [arguments]

The commands are:

`)
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-9s  %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Use "carmy <command> -h" for more about a command.

Install it in your module with "go get -tool github.com/carmy-dev/carmy/cmd/carmy",
then run "go tool carmy <command>".
`)
}

func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] && c.name != "help" {
			return c.run([]string{"-h"}, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "carmy help: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// isHelp reports whether a command's arguments ask for its help.
func isHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case "h", "help":
			if strings.HasPrefix(a, "-") {
				return true
			}
		}
	}
	return false
}
