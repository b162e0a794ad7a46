package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCommand: carmy schema -cedar prints a tool's Cedar schema;
// carmy policy check validates a file against the package's tools and
// names each mistake's file and line; carmy policy test decides recorded
// requests offline and fails on an unexpected decision.
func TestPolicyCommand(t *testing.T) {
	dir := copyModule(t, "genapp")
	code, stdout, stderr := output(t, carmyCmd(t, dir, "schema", "-cedar", "-tool", "create_order", "."))
	if code != 0 || !strings.Contains(stdout, `"quantity"`) || !strings.Contains(stdout, "action call appliesTo") {
		t.Fatalf("carmy schema -cedar: exit %d\n%s\n%s", code, stdout, stderr)
	}

	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := write("bad.cedar", "permit(principal, action, resource);\n@id(\"x\")\npermit(principal, action == Action::\"call\", resource == Tool::\"create_order\") when { context.input.sku_typo == \"A\" };\nforbid(principal, action, resource == Tool::\"nope\");\n")
	code, _, stderr = output(t, carmyCmd(t, dir, "policy", "check", "-policies", bad, "."))
	if code != 1 || !strings.Contains(stderr, bad+`:2: policy "x": attribute `+"`sku_typo`") || !strings.Contains(stderr, bad+`:4: policy "`+bad+`:4": unknown tool "nope"`) {
		t.Fatalf("carmy policy check of a bad file: exit %d\n%s", code, stderr)
	}

	good := write("good.cedar", `permit(principal, action, resource);
@id("small-orders")
@reason("orders of more than 10 need a person")
forbid(principal, action == Action::"call", resource == Tool::"create_order") when { context.input.quantity > 10 };
`)
	write("carmy.toml", "policy_file = \"good.cedar\"\n")
	code, stdout, stderr = output(t, carmyCmd(t, dir, "policy", "check"))
	if code != 0 || !strings.Contains(stdout, "good.cedar: 2 policies, valid") {
		t.Fatalf("carmy policy check: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := output(t, carmyCmd(t, dir, "policy", "check", ".", ".")); code != 2 || !strings.Contains(stderr, "usage: carmy policy") {
		t.Errorf("carmy policy check . .: exit %d, %s; want 2 and the usage", code, stderr)
	}
	requests := write("requests.jsonl", `{"principal":"alice","tool":"create_order","input":{"sku":"A","quantity":3},"expect":"allow"}
{"principal":"alice","tool":"create_order","input":{"sku":"A","quantity":30},"expect":"deny"}
{"principal":"alice","tool":"create_order","input":{"sku":"A","quantity":30},"expect":"allow"}
`)
	code, stdout, _ = output(t, carmyCmd(t, dir, "policy", "test", "-policies", good, requests))
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 1 || len(lines) != 3 || !strings.Contains(lines[0], "alice call create_order: allow by ") ||
		!strings.HasSuffix(lines[1], "deny by small-orders (orders of more than 10 need a person)") || !strings.HasSuffix(lines[2], "; want allow") {
		t.Fatalf("carmy policy test: exit %d\n%s", code, stdout)
	}
}
