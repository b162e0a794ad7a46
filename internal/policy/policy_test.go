package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cedar-policy/cedar-go/types"
)

var testTools = []Tool{
	{Name: "transfer", Effect: "external_write", Requires: []string{"bank"}, InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"},"count":{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}},"required":["amount","to","count"],"additionalProperties":false}`)},
	{Name: "restart", Effect: "destructive", InputSchema: []byte(`{"type":"object","properties":{"env":{"type":"string"}},"required":["env"],"additionalProperties":false}`)},
}

func mustParse(t *testing.T, cat *Catalog, src string) *Set {
	t.Helper()
	s, err := Parse(cat, "p.cedar", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecide: the annotations act (@reason on a forbid is the reason,
// @confirm on a determining permit asks for a person), the model reads
// the principal's tags and permissions and the tool's attributes, and
// a decision fails closed.
func TestDecide(t *testing.T) {
	cat := NewCatalog(testTools)
	s := mustParse(t, cat, `@id("base")
permit(principal, action, resource);

@id("big")
@reason("transfers above 1000 need the treasury")
forbid(principal, action == Action::"call", resource == Tool::"transfer")
unless { context.input has amount && context.input.amount.lessThanOrEqual(decimal("1000.0")) };

@id("prod")
@confirm
permit(principal, action == Action::"call", resource == Tool::"restart")
when { context.input.env == "prod" };

@id("oncall-only")
forbid(principal, action == Action::"call", resource == Tool::"restart")
unless { principal.hasTag("team") && principal.getTag("team") == "oncall" };

@id("overflow")
forbid(principal, action == Action::"call", resource == Tool::"transfer")
when { context.input.count * 9223372036854775807 > 0 };

@id("bank")
forbid(principal, action == Action::"call", resource)
when { resource.requires.contains("bank") && !principal.permissions.contains("bank") };
`)
	oncall := map[string]string{"team": "oncall"}
	bank := []string{"bank"}
	tests := []struct {
		name string
		req  Request
		want Decision
	}{
		{"a forbid's @reason", Request{Action: Call, Permissions: bank, Tool: "transfer", Input: []byte(`{"amount":1500.5,"to":"x","count":0}`)},
			Decision{Policies: []string{"big"}, Reason: "transfers above 1000 need the treasury"}},
		{"permitted", Request{Action: Call, Permissions: bank, Tool: "transfer", Input: []byte(`{"amount":15,"to":"x","count":0}`)},
			Decision{Allow: true, Policies: []string{"base"}}},
		{"a number Cedar cannot hold exactly is absent: the unless refuses it", Request{Action: Call, Permissions: bank, Tool: "transfer", Input: []byte(`{"amount":0.123456,"to":"x","count":0}`)},
			Decision{Policies: []string{"big"}, Reason: "transfers above 1000 need the treasury"}},
		{"an erring forbid refuses, named", Request{Action: Call, Permissions: bank, Tool: "transfer", Input: []byte(`{"amount":1,"to":"x","count":2}`)},
			Decision{Policies: []string{"overflow"}, Errors: []string{"overflow: "}}},
		{"the tool's requires and the principal's permissions", Request{Action: Call, Tool: "transfer", Input: []byte(`{"amount":1,"to":"x","count":0}`)},
			Decision{Policies: []string{"bank"}}},
		{"@confirm", Request{Action: Call, Metadata: oncall, Tool: "restart", Input: []byte(`{"env":"prod"}`)},
			Decision{Allow: true, Policies: []string{"base", "prod"}, Confirm: true}},
		{"tags", Request{Action: Call, Metadata: map[string]string{"team": "web"}, Tool: "restart", Input: []byte(`{"env":"dev"}`)},
			Decision{Policies: []string{"oncall-only"}}},
		{"list", Request{Action: List, Tool: "restart"}, Decision{Allow: true, Policies: []string{"base"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Door = "go"
			got := s.Decide(cat, tt.req)
			for i, e := range got.Errors { // the message is Cedar's
				if i < len(tt.want.Errors) && strings.HasPrefix(e, tt.want.Errors[i]) {
					got.Errors[i] = tt.want.Errors[i]
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%+v; want %+v", got, tt.want)
			}
		})
	}
	if !s.Possible("restart") || s.Possible("transfer") {
		t.Error("Possible: want restart alone")
	}

	none := mustParse(t, cat, `permit(principal, action == Action::"list", resource);`)
	if d := none.Decide(cat, Request{Action: Call, Tool: "restart", Input: []byte(`{"env":"dev"}`)}); d.Allow || len(d.Policies) != 0 {
		t.Errorf("no permit: %+v; want a refusal naming nothing", d)
	}
}

// TestParseProblems: a set that does not parse, has a duplicate id, names
// a tool that does not exist or reads an input attribute a tool does not
// have is refused, every problem with its file and line.
func TestParseProblems(t *testing.T) {
	cat := NewCatalog(testTools)
	tests := []struct {
		name, src string
		want      []string
	}{
		{"syntax", "permit(principal, action, resource);\n\nforbid(principal, action = Action::\"x\", resource);",
			[]string{"p.cedar:3: parse error at column"}},
		{"unknown tool", "permit(principal, action, resource);\npermit(principal, action, resource == Tool::\"nope\");",
			[]string{`p.cedar:2: policy "p.cedar:2": unknown tool "nope"`}},
		{"unknown input attribute", "permit(principal, action == Action::\"call\", resource == Tool::\"restart\") when { context.input.amount == 1 };",
			[]string{`p.cedar:1: policy "p.cedar:1": attribute ` + "`amount`" + ` in context for Action::"call" not found (against the schema of tool "restart")`}},
		{"duplicate id", "@id(\"x\")\npermit(principal, action, resource);\n@id(\"x\")\nforbid(principal, action, resource);",
			[]string{`p.cedar:3: policy "x": the id is taken by the policy at line 1`}},
		{"reason on a permit", "@reason(\"no\")\npermit(principal, action, resource);",
			[]string{`p.cedar:1: policy "p.cedar:1": @reason is for a forbid`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(cat, "p.cedar", []byte(tt.src))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant %q", err, w)
				}
			}
			var p *Problem
			if !errors.As(err, &p) || p.File != "p.cedar" || p.Line == 0 {
				t.Errorf("%#v: want a *Problem with file and line", err)
			}
		})
	}
}

// TestMapping is the mapping table of docs/policies.md, by the tool's
// declared types and, where none is declared, by the value.
func TestMapping(t *testing.T) {
	dec := func(s string) types.Value {
		d, err := types.ParseDecimal(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		json string
		want types.Value // nil: absent
	}{
		{`"a"`, types.String("a")},
		{`7`, types.Long(7)},
		{`-9223372036854775808`, types.Long(-9223372036854775808)},
		{`9223372036854775808`, nil}, // beyond int64, and beyond decimal
		{`1.5`, dec("1.5")},
		{`1.00001`, nil},
		{`1e3`, types.Long(1000)},
		{`true`, types.Boolean(true)},
		{`null`, nil},
		{`[1,"a"]`, types.NewSet(types.Long(1), types.String("a"))},
		{`[1,null]`, nil},
		{`{"a":1,"b":null}`, types.NewRecord(types.RecordMap{"a": types.Long(1)})},
	}
	for _, tt := range tests {
		got, ok := Value([]byte(tt.json))
		if (tt.want == nil) != !ok || ok && !got.Equal(tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.json, got, ok, tt.want)
		}
	}
	// By the declared type: a number is a decimal even when whole.
	in := input(NewCatalog(testTools).tools["transfer"].in, []byte(`{"amount":1000,"to":"x","count":3}`))
	if v, _ := in.Get("amount"); !v.Equal(dec("1000.0")) {
		t.Errorf("amount %v; want decimal 1000.0", v)
	}
	if v, _ := in.Get("count"); !v.Equal(types.Long(3)) {
		t.Errorf("count %v; want 3", v)
	}
}

// FuzzValue: any JSON maps without a panic, and a value that maps is the
// same value mapped again.
func FuzzValue(f *testing.F) {
	for _, s := range []string{`"a"`, `1`, `1.5`, `1e400`, `-0.0001`, `[1,[2,{"a":null}]]`, `{"a":{"b":[true]}}`, `123456789012345678901234567890`, `0.00005`} {
		f.Add([]byte(s))
	}
	cat := NewCatalog(testTools)
	in := cat.tools["transfer"].in
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := Value(raw)
		if ok {
			again, ok2 := Value(raw)
			if !ok2 || !again.Equal(v) {
				t.Fatalf("%s: %v then %v", raw, v, again)
			}
		}
		_ = input(in, raw)
	})
}

// TestWatch: a changed file is put in force once stable over two polls;
// a bad one leaves the set in force and is reported; a deleted one keeps
// the last set.
func TestWatch(t *testing.T) {
	cat := NewCatalog(testTools)
	path := filepath.Join(t.TempDir(), "p.cedar")
	first := []byte(`permit(principal, action, resource);`)
	if err := os.WriteFile(path, first, 0o600); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(cat, mustParse(t, cat, string(first)))
	events := make(chan Event, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.Watch(ctx, path, first, 5*time.Millisecond, func(ev Event) { events <- ev })
	}()
	defer func() { cancel(); wg.Wait() }()
	next := func() Event {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return Event{}
	}
	write := func(s string) { // whole at once, as a deploy renames a file into place
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	allowed := func() bool {
		d, _ := e.Decide(Request{Action: Call, Tool: "restart", Input: []byte(`{"env":"x"}`)})
		return d.Allow
	}

	write(`forbid(principal, action, resource);`)
	if ev := next(); ev.Kind != Reloaded || allowed() {
		t.Fatalf("%+v; want the forbid in force", ev)
	}
	write(`permit(principal, action, resource == Tool::"nope");`)
	if ev := next(); ev.Kind != Rejected || !strings.Contains(ev.Err.Error(), `unknown tool "nope"`) || allowed() {
		t.Fatalf("%+v; want it rejected, the forbid still in force", ev)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Kind != Missing || allowed() {
		t.Fatalf("%+v; want missing, the forbid still in force", ev)
	}
	write(`permit(principal, action, resource);`)
	if ev := next(); ev.Kind != Reloaded || !allowed() {
		t.Fatalf("%+v; want the permit in force", ev)
	}
}

// TestListCache: list decisions are cached per set version, principal and
// door, and a new set starts afresh.
func TestListCache(t *testing.T) {
	cat := NewCatalog(testTools)
	e := NewEngine(cat, mustParse(t, cat, `permit(principal == Principal::"a", action == Action::"list", resource) when { context.door == "http" };`))
	if !e.Listed(Request{Principal: "a", Tool: "restart", Door: "http"}) || e.Listed(Request{Principal: "a", Tool: "restart", Door: "mcp"}) || e.Listed(Request{Principal: "b", Tool: "restart", Door: "http"}) {
		t.Error("list decisions by principal and door")
	}
	if _, err := e.load("p.cedar", []byte(`forbid(principal, action, resource);`)); err != nil {
		t.Fatal(err)
	}
	if e.Listed(Request{Principal: "a", Tool: "restart", Door: "http"}) {
		t.Error("a new set's decision was not taken")
	}
}

func TestIDs(t *testing.T) {
	cat := NewCatalog(testTools)
	s := mustParse(t, cat, "@id(\"a\")\npermit(principal, action, resource);\n\npermit(principal, action, resource);")
	if got := s.IDs(); !slices.Equal(got, []string{"a", "p.cedar:4"}) {
		t.Errorf("ids %v", got)
	}
}

// TestRecatalog: a tool added to the catalog, or changed, is governed at
// once by the policies in force, validated against it; a tool the
// policies do not validate against changes nothing.
func TestRecatalog(t *testing.T) {
	cat := NewCatalog(testTools)
	e := NewEngine(cat, mustParse(t, cat, `@id("all")
permit(principal, action, resource);

@id("no-destructive")
forbid(principal, action == Action::"call", resource) when { resource.effect == "destructive" };

@id("envs")
@confirm
permit(principal, action == Action::"call", resource == Tool::"restart") when { context.input.env == "prod" };`))
	allowed := func(tool string) bool {
		d, _ := e.Decide(Request{Action: Call, Principal: "a", Tool: tool, Input: []byte(`{"env":"prod"}`)})
		return d.Allow && len(d.Errors) == 0
	}
	env := []byte(`{"type":"object","properties":{"env":{"type":"string"}},"required":["env"]}`)
	if err := e.Recatalog(Tool{Name: "wipe", Effect: "destructive", InputSchema: env}, Tool{Name: "peek", Effect: "read", InputSchema: env}); err != nil {
		t.Fatal(err)
	}
	if allowed("wipe") || !allowed("peek") {
		t.Errorf("new tools: wipe allowed %v, peek allowed %v; want the forbid of destructive tools to govern wipe alone", allowed("wipe"), allowed("peek"))
	}
	set := e.Set()
	if err := e.Recatalog(Tool{Name: "peek", Effect: "destructive", InputSchema: env}); err != nil || allowed("peek") {
		t.Errorf("a tool whose effect rose: err %v, allowed %v; want it forbidden at once", err, allowed("peek"))
	}
	if e.Set() == set {
		t.Error("a changed catalog kept the set of the old one: calls decided under it are not decided again")
	}
	// restart's policy reads context.input.env: a restart without env
	// does not validate, and changes nothing.
	set = e.Set()
	err := e.Recatalog(Tool{Name: "restart", Effect: "destructive", InputSchema: []byte(`{"type":"object"}`)})
	var p *Problem
	if !errors.As(err, &p) || p.Policy != "envs" || e.Set() != set {
		t.Errorf("err = %v; want the problem of policy envs, and the set in force unchanged", err)
	}
	if !e.Set().Possible("restart") {
		t.Error("a refused change lost restart's @confirm")
	}
}
