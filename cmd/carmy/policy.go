package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/policy"
)

const policyUsage = `usage: carmy policy check [-policies FILE] [package]
       carmy policy test [-policies FILE] [-package PACKAGE] FILE

carmy policy check validates a Cedar policy file against the schema of
every tool each policy's scope admits (see carmy schema -cedar), and prints
each mistake with its file and line: a policy that does not parse, a
duplicate id, a tool that does not exist, an input attribute a tool does
not have, a type mismatch. It exits 1 when there is one.

carmy policy test evaluates recorded requests offline, one JSON object a
line: {"principal", "permissions", "metadata", "action" ("call" by default,
"list" or "approve"), "tool", "input", "door" ("go" by default), "task",
"requester", "expect" ("allow", "deny" or "confirm", optional)}. It prints
each decision with the determining policies, and exits 1 when a decision
is not the one expected.

The policy file is -policies, else the policy_file of the carmy.toml that
CARMY_CONFIG names or of ./carmy.toml, else CARMY_POLICY_FILE. The tools
are those of the package ("." by default) as carmy schema finds them: tools
written with carmy.Impl are left out, so a policy naming one is reported
as naming an unknown tool; their effect is not known here (resource.effect
is "").
`

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if isHelp(args) || len(args) == 0 {
		fmt.Fprint(stdout, policyUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "check":
		return runPolicyCheck(args[1:], stdout, stderr)
	case "test":
		return runPolicyTest(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, policyUsage)
	return 2
}

// policyFile is the policy file the command reads: the flag's, else the
// configuration's.
func policyFile(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	path := os.Getenv("CARMY_CONFIG")
	if path == "" {
		path = "carmy.toml"
	}
	c, err := config.Load(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if c.PolicyFile != "" {
		return c.PolicyFile, nil
	}
	if p := os.Getenv("CARMY_POLICY_FILE"); p != "" {
		return p, nil
	}
	return "", errors.New("no policy file: give -policies, or set policy_file in carmy.toml")
}

// catalogOf is the tools of a package as policies see them.
func catalogOf(pattern string, stderr io.Writer, cmd string) (*policy.Catalog, error) {
	tools, err := packageSchemas(pattern, func(format string, args ...any) { fmt.Fprintf(stderr, cmd+": "+format+"\n", args...) })
	if err != nil {
		return nil, err
	}
	return policy.NewCatalog(policyTools(tools)), nil
}

// loadPolicies reads and validates the policy file against the package's
// tools.
func loadPolicies(file, pattern string, stderr io.Writer, cmd string) (*policy.Catalog, *policy.Set, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	cat, err := catalogOf(pattern, stderr, cmd)
	if err != nil {
		return nil, nil, err
	}
	set, err := policy.Parse(cat, file, text)
	return cat, set, err
}

func runPolicyCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("carmy policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	file := fs.String("policies", "", "the policy `file`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	pattern, ok := packagePattern(fs, policyUsage, stderr)
	if !ok {
		return 2
	}
	return checkPolicies(*file, pattern, stdout, stderr)
}

// checkPolicies validates a policy file against a package's tools, and
// prints every mistake.
func checkPolicies(flagged, pattern string, stdout, stderr io.Writer) int {
	path, err := policyFile(flagged)
	if err != nil {
		fmt.Fprintf(stderr, "carmy policy check: %v\n", err)
		return 1
	}
	_, set, err := loadPolicies(path, pattern, stderr, "carmy policy check")
	if err != nil {
		for _, e := range unjoin(err) {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d policies, valid (sha256 %s)\n", path, len(set.IDs()), set.SHA256)
	return 0
}

// unjoin undoes errors.Join.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// recordedRequest is one line of carmy policy test's file.
type recordedRequest struct {
	Principal   string            `json:"principal"`
	Permissions []string          `json:"permissions"`
	Metadata    map[string]string `json:"metadata"`
	Action      string            `json:"action"`
	Tool        string            `json:"tool"`
	Input       json.RawMessage   `json:"input"`
	Door        string            `json:"door"`
	Task        bool              `json:"task"`
	Requester   string            `json:"requester"`
	Expect      string            `json:"expect"`
}

func runPolicyTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("carmy policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	file := fs.String("policies", "", "the policy `file`")
	pattern := fs.String("package", ".", "the `package` whose tools the policies are about")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	path, err := policyFile(*file)
	if err != nil {
		fmt.Fprintf(stderr, "carmy policy test: %v\n", err)
		return 1
	}
	cat, set, err := loadPolicies(path, *pattern, stderr, "carmy policy test")
	if err != nil {
		for _, e := range unjoin(err) {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	requests, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "carmy policy test: %v\n", err)
		return 1
	}
	return testPolicies(cat, set, fs.Arg(0), requests, stdout, stderr)
}

// testPolicies decides every recorded request, and reports those whose
// decision is not the one expected.
func testPolicies(cat *policy.Catalog, set *policy.Set, name string, requests []byte, stdout, stderr io.Writer) int {
	code := 0
	sc := bufio.NewScanner(bytes.NewReader(requests))
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var r recordedRequest
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			fmt.Fprintf(stderr, "%s:%d: %v\n", name, line, err)
			code = 1
			continue
		}
		if r.Action == "" {
			r.Action = policy.Call
		}
		if !slices.Contains([]string{policy.List, policy.Call, policy.Approve}, r.Action) {
			fmt.Fprintf(stderr, "%s:%d: action %q is not list, call or approve\n", name, line, r.Action)
			code = 1
			continue
		}
		if r.Door == "" {
			r.Door = "go"
		}
		if len(r.Input) == 0 || string(r.Input) == "null" {
			r.Input = json.RawMessage("{}")
		}
		d := set.Decide(cat, policy.Request{Action: r.Action, Principal: r.Principal, Permissions: r.Permissions, Metadata: r.Metadata,
			Tool: r.Tool, Input: r.Input, Door: r.Door, Task: r.Task, Requester: r.Requester})
		got := "deny"
		switch {
		case d.Allow && d.Confirm:
			got = "confirm"
		case d.Allow:
			got = "allow"
		}
		fmt.Fprintf(stdout, "%s:%d: %s %s %s: %s", name, line, r.Principal, r.Action, r.Tool, got)
		if len(d.Policies) > 0 {
			fmt.Fprintf(stdout, " by %s", strings.Join(d.Policies, ", "))
		}
		if d.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", d.Reason)
		}
		for _, e := range d.Errors {
			fmt.Fprintf(stdout, " [error %s]", e)
		}
		if r.Expect != "" && r.Expect != got {
			fmt.Fprintf(stdout, "; want %s", r.Expect)
			code = 1
		}
		fmt.Fprintln(stdout)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(stderr, "carmy policy test: %v\n", err)
		return 1
	}
	return code
}

// printCedarSchemas prints the Cedar schema of each tool.
func printCedarSchemas(w io.Writer, tools []schemaTool) {
	cat := policy.NewCatalog(policyTools(tools))
	for i, t := range tools {
		if i > 0 {
			fmt.Fprintln(w)
		}
		s, _ := cat.Schema(t.Name)
		fmt.Fprintf(w, "// The Cedar schema of %s's policies.\n%s", t.Name, s)
	}
}

// policyTools are the tools carmy schema found, as policies see them.
func policyTools(tools []schemaTool) []policy.Tool {
	out := make([]policy.Tool, len(tools))
	for i, t := range tools {
		out[i] = policy.Tool{Name: t.Name, Requires: t.Requires, InputSchema: t.InputSchema}
	}
	return out
}
