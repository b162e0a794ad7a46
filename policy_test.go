package carmy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

type TransferIn struct {
	Amount float64 `json:"amount"`
	To     string  `json:"to"`
}

type RestartIn struct {
	Env string `json:"env"`
}

// doorPolicies is the policy set of TestPoliciesEveryDoor: a forbid with
// a reason over an argument, a principal kept from a tool (list and
// call), and a permit that asks for a person's approval.
const doorPolicies = `@id("everyone")
permit(principal, action, resource);

@id("big-transfers")
@reason("transfers above 1,000 need the treasury team")
forbid(principal, action == Action::"call", resource == Tool::"transfer")
when { context.input has amount && context.input.amount.greaterThan(decimal("1000.0")) };

@id("no-restart-for-bob")
forbid(principal == Principal::"bob", action, resource == Tool::"restart");

@id("restart-prod")
@confirm
permit(principal, action == Action::"call", resource == Tool::"restart")
when { context.input.env == "prod" };
`

// policyWorld is the tools of the policy tests and what ran.
type policyWorld struct {
	mu  sync.Mutex
	ran map[string]int
}

func (w *policyWorld) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ran[name]
}

func (w *policyWorld) builder() *carmy.Builder {
	w.ran = map[string]int{}
	note := func(name string) {
		w.mu.Lock()
		w.ran[name]++
		w.mu.Unlock()
	}
	transfer := func(in TransferIn) (string, error) { note("transfer"); return "sent", nil }
	restart := func(in RestartIn) (string, error) { note("restart"); return "restarted", nil }
	ping := func() (string, error) { note("ping"); return "pong", nil }
	return carmy.New().Tool(
		carmy.Tool(transfer, carmy.ExternalWrite, carmy.Name("transfer"), carmy.Register(false)),
		carmy.Tool(restart, carmy.Destructive, carmy.Name("restart"), carmy.Register(false)),
		carmy.Tool(ping, carmy.Read, carmy.Name("ping"), carmy.Register(false)),
	)
}

// policyOutcome is what a door answered: "ok", or the refusal's code,
// message and details.policy.
type policyOutcome struct {
	Code    string
	Message string
	Policy  []string
}

func policyOutcomeOf(err error) policyOutcome {
	if err == nil {
		return policyOutcome{Code: "ok"}
	}
	var e *carmy.Error
	if !errors.As(err, &e) {
		return policyOutcome{Code: "not a carmy error", Message: err.Error()}
	}
	return policyOutcome{Code: string(e.Code), Message: e.Message, Policy: policyIDs(e.Details["policy"])}
}

func policyIDs(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := []string{}
		for _, s := range v {
			str, _ := s.(string)
			out = append(out, str)
		}
		return out
	}
	return nil
}

func policyOutcomeOfMap(e map[string]any) policyOutcome {
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	details, _ := e["details"].(map[string]any)
	return policyOutcome{Code: code, Message: msg, Policy: policyIDs(details["policy"])}
}

// TestPoliciesEveryDoor: one policy set decides alike on every door (Go,
// the HTTP API, MCP over HTTP in both generations, a task, llm.Dispatch):
// a forbid over an argument refuses with its @reason as the message and
// details.policy naming it; a forbid keeps a principal from a tool in
// every list and every call; a permit with @confirm makes a call need a
// person's approval. What the policies refuse never runs.
func TestPoliciesEveryDoor(t *testing.T) {
	t.Parallel()
	w := &policyWorld{}
	var (
		mu      sync.Mutex
		records []carmy.AuditRecord
	)
	reg := build(t, w.builder().Policies(doorPolicies).
		Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: carmy.HashToken("token-alice"), Principal: "alice"},
			carmy.Token{SHA256: carmy.HashToken("token-bob"), Principal: "bob"})).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			mu.Lock()
			records = append(records, rec)
			mu.Unlock()
			return nil
		})))
	srv := serve(t, reg)
	ctx := context.Background()
	sessions := map[string]*mcp.ClientSession{}
	session := func(t *testing.T, version, who string) *mcp.ClientSession {
		if s := sessions[version+who]; s != nil {
			return s
		}
		s, err := mcpDial(t, bearerClient("token-"+who), srv.URL, version, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions[version+who] = s
		return s
	}
	type door struct {
		name string
		list func(t *testing.T, who string) []string
		call func(t *testing.T, who, tool, input string) policyOutcome
	}
	mcpDoor := func(version string) door {
		return door{"MCP " + version,
			func(t *testing.T, who string) []string { return mcpNames(t, session(t, version, who)) },
			func(t *testing.T, who, tool, input string) policyOutcome {
				res, err := session(t, version, who).CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: mcpArgs(input)})
				if err != nil {
					return policyOutcome{Code: "protocol error", Message: err.Error()}
				}
				if !res.IsError {
					return policyOutcome{Code: "ok"}
				}
				return policyOutcomeOfMap(errorObject(t, res))
			}}
	}
	doors := []door{
		{"Go",
			func(t *testing.T, who string) []string {
				return metadataNames(reg.ToolsFor(ctx, carmy.Identity{Principal: who}))
			},
			func(t *testing.T, who, tool, input string) policyOutcome {
				_, err := reg.Execute(ctx, carmy.Call{Tool: tool, Principal: who, Input: json.RawMessage(input)})
				return policyOutcomeOf(err)
			}},
		{"HTTP API",
			func(t *testing.T, who string) []string {
				return metadataNames(listedOverHTTP(t, srv.URL, "Bearer token-"+who))
			},
			func(t *testing.T, who, tool, input string) policyOutcome {
				status, body := bearerDo(t, http.MethodPost, srv.URL+"/tools/"+tool, "Bearer token-"+who, input)
				var e struct{ Error map[string]any }
				_ = json.Unmarshal(body, &e)
				if e.Error == nil {
					if status != http.StatusOK {
						t.Fatalf("POST /tools/%s: %d %s", tool, status, body)
					}
					return policyOutcome{Code: "ok"}
				}
				o := policyOutcomeOfMap(e.Error)
				if o.Code == string(carmy.CodePermissionDenied) && status != http.StatusForbidden {
					t.Errorf("permission_denied answered with %d", status)
				}
				return o
			}},
		mcpDoor("2025-11-25"),
		mcpDoor("2026-07-28"),
		{"a task",
			nil,
			func(t *testing.T, who, tool, input string) policyOutcome {
				task, err := reg.Start(ctx, carmy.Call{Tool: tool, Principal: who, Input: json.RawMessage(input)})
				if err != nil {
					return policyOutcomeOf(err)
				}
				if task.Status == carmy.TaskInputRequired && task.ApprovalID != "" {
					_ = task.Cancel(ctx)
					return policyOutcome{Code: string(carmy.CodeConfirmationRequired)} // it waits for a person
				}
				_, err = task.Wait(ctx)
				return policyOutcomeOf(err)
			}},
		{"llm.Dispatch",
			func(t *testing.T, who string) []string {
				tools, err := llm.OpenAITools(reg, carmy.WithPrincipal(who))
				if err != nil {
					t.Fatal(err)
				}
				names := []string{}
				for _, tool := range tools {
					names = append(names, tool.Function.Name)
				}
				return names
			},
			func(t *testing.T, who, tool, input string) policyOutcome {
				_, err := llm.Dispatch(ctx, reg, tool, input, carmy.WithPrincipal(who))
				return policyOutcomeOf(err)
			}},
	}
	refused := func(msg string, ids ...string) policyOutcome {
		return policyOutcome{Code: string(carmy.CodePermissionDenied), Message: msg, Policy: ids}
	}
	cases := []struct {
		name, who, tool, input string
		want                   policyOutcome
	}{
		{"forbid with @reason over an argument", "alice", "transfer", `{"amount":5000,"to":"x"}`,
			refused("transfers above 1,000 need the treasury team", "big-transfers")},
		{"the argument rule lets a small one through", "alice", "transfer", `{"amount":10.5,"to":"x"}`, policyOutcome{Code: "ok"}},
		{"@confirm asks a person", "alice", "restart", `{"env":"prod"}`, policyOutcome{Code: string(carmy.CodeConfirmationRequired)}},
		{"no @confirm permit determines", "alice", "restart", `{"env":"dev"}`, policyOutcome{Code: "ok"}},
		{"a principal kept from a tool", "bob", "restart", `{"env":"dev"}`, refused("", "no-restart-for-bob")},
	}
	for _, d := range doors {
		t.Run(d.name, func(t *testing.T) {
			if d.list != nil {
				if got, want := d.list(t, "alice"), []string{"ping", "restart", "transfer"}; !reflect.DeepEqual(got, want) {
					t.Errorf("alice sees %v; want %v", got, want)
				}
				if got, want := d.list(t, "bob"), []string{"ping", "transfer"}; !reflect.DeepEqual(got, want) {
					t.Errorf("bob sees %v; want %v", got, want)
				}
			}
			for _, c := range cases {
				before := w.count(c.tool)
				got := d.call(t, c.who, c.tool, c.input)
				if got.Code == string(carmy.CodeConfirmationRequired) {
					got.Message = ""
				}
				want := c.want
				if want.Message == "" && got.Code == string(carmy.CodePermissionDenied) {
					if !strings.Contains(got.Message, "no-restart-for-bob") {
						t.Errorf("%s: message %q does not name the policy", c.name, got.Message)
					}
					got.Message = ""
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %+v; want %+v", c.name, got, want)
				}
				if ran := w.count(c.tool) > before; ran != (want.Code == "ok") {
					t.Errorf("%s: ran = %v", c.name, ran)
				}
			}
		})
	}

	// The audit names the set and the determining policies.
	sum := sha256.Sum256([]byte(doorPolicies))
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, rec := range records {
		if rec.Tool == "transfer" && rec.Decision == carmy.AuditRefused {
			found = true
			if rec.PolicySet != hex.EncodeToString(sum[:]) || !slices.Equal(rec.Policies, []string{"big-transfers"}) {
				t.Errorf("audit record %+v; want the set's SHA-256 and big-transfers", rec)
			}
		}
	}
	if !found {
		t.Error("no audit record of the refused transfer")
	}
}

// TestPolicyApprove: the approve action governs who decides an approval,
// on the HTTP API and with Registry.Decide, and a refusal names the
// policy; the call's own principal never decides, whatever the policies.
func TestPolicyApprove(t *testing.T) {
	t.Parallel()
	w := &policyWorld{}
	reg := build(t, w.builder().Policies(`permit(principal, action, resource);

@id("carol-approves-restarts")
forbid(principal, action == Action::"approve", resource == Tool::"restart")
unless { principal == Principal::"carol" && context.requester != principal && context.input.env == "prod" };

@id("restart-prod")
@confirm
permit(principal, action == Action::"call", resource == Tool::"restart")
when { context.input.env == "prod" };
`).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent"},
		carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob", Permissions: []string{"approve:*"}},
		carmy.Token{SHA256: carmy.HashToken("carol"), Principal: "carol", Permissions: []string{"approve:*"}})))
	srv := serve(t, reg)
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	c := http.DefaultClient
	ask := func() string {
		_, body := httpDo(t, c, "POST", srv.URL+"/tools/restart", `{"env":"prod"}`, as("agent")...)
		id := detail(body, "approval_id")
		if id == "" {
			t.Fatalf("call = %v; want an approval", body)
		}
		return id
	}
	id := ask()
	status, body := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "{}", as("bob")...)
	if e := errObj(body); status != http.StatusForbidden || e["code"] != "permission_denied" || !reflect.DeepEqual(policyIDs(e["details"].(map[string]any)["policy"]), []string{"carol-approves-restarts"}) {
		t.Fatalf("bob approving = %d %v; want 403 naming the policy", status, body)
	}
	err := reg.Decide(context.Background(), id, true, "bob")
	if o := policyOutcomeOf(err); o.Code != string(carmy.CodePermissionDenied) || !slices.Equal(o.Policy, []string{"carol-approves-restarts"}) {
		t.Fatalf("Decide by bob: %v; want permission_denied naming the policy", err)
	}
	if status, body := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "{}", as("carol")...); status != http.StatusOK {
		t.Fatalf("carol approving = %d %v", status, body)
	}
	if status, _ := httpDo(t, c, "POST", srv.URL+"/tools/restart", `{"env":"prod"}`, as("agent")...); status != http.StatusOK || w.count("restart") != 1 {
		t.Fatalf("the approved call = %d; want it run once", status)
	}
	// Decide too, by carol.
	id = ask()
	if err := reg.Decide(context.Background(), id, false, "carol"); err != nil {
		t.Fatalf("Decide by carol: %v", err)
	}
}

// TestPolicyFailsClosed: a call decision with an evaluation error is
// refused, naming the policy that erred, though Cedar would skip an
// erring forbid; a list decision with an error hides the tool.
func TestPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	type In struct {
		N int `json:"n"`
	}
	ran := 0
	reg := build(t, carmy.New().Tool(
		carmy.Tool(func(in In) error { ran++; return nil }, carmy.Write, carmy.Name("scale"), carmy.Register(false)),
		carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("hidden"), carmy.Register(false)),
	).Policies(`permit(principal, action, resource);

@id("overflow")
forbid(principal, action == Action::"call", resource == Tool::"scale")
when { context.input.n * 9223372036854775807 > 100 };

@id("list-overflow")
forbid(principal, action == Action::"list", resource == Tool::"hidden")
when { (if principal.permissions.isEmpty() then 9223372036854775807 else 0) + 1 < 0 };
`))
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: "scale", Input: []byte(`{"n":2}`)})
	if o := policyOutcomeOf(err); o.Code != string(carmy.CodePermissionDenied) || !slices.Equal(o.Policy, []string{"overflow"}) || !strings.Contains(o.Message, "failed to evaluate") || ran != 0 {
		t.Fatalf("%+v; want a refusal naming the policy that erred", o)
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "scale", Input: []byte(`{"n":0}`)}); err != nil || ran != 1 {
		t.Fatalf("n = 0: %v; want it run", err)
	}
	if got := metadataNames(reg.ToolsFor(context.Background(), carmy.Identity{Principal: "a"})); !slices.Equal(got, []string{"scale"}) {
		t.Errorf("lists %v; want the tool whose list decision erred hidden", got)
	}
	if got := metadataNames(reg.ToolsFor(context.Background(), carmy.Identity{Principal: "a", Permissions: []string{"x"}})); !slices.Equal(got, []string{"hidden", "scale"}) {
		t.Errorf("lists %v; want both", got)
	}
}

// TestPolicyBuildErrors: a policy set that does not parse or validate is
// a Build error naming the file and line of every mistake.
func TestPolicyBuildErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "team.cedar")
	if err := os.WriteFile(path, []byte("permit(principal, action, resource);\n\n@id(\"x\")\npermit(principal, action, resource == Tool::\"trasnfer\");\n@id(\"x\")\npermit(principal, action == Action::\"call\", resource == Tool::\"restart\") when { context.input.environment == \"prod\" };\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    *carmy.Builder
		want []string
	}{
		{"file", (&policyWorld{}).builder().PolicyFile(path), []string{
			path + `:3: policy "x": unknown tool "trasnfer"`,
			path + `:5: policy "x": the id is taken by the policy at line 3`,
		}},
		{"text", (&policyWorld{}).builder().Policies(`permit(principal, action == Action::"call", resource == Tool::"restart") when { context.input.environment == "prod" };`), []string{
			"policies:1", "attribute `environment` in context for Action::\"call\" not found",
		}},
		{"syntax", (&policyWorld{}).builder().Policies("permit(principal, action, resource);\npermit(principal action, resource);"), []string{"policies:2: parse error"}},
		{"missing file", (&policyWorld{}).builder().PolicyFile(path + ".gone"), []string{"policy file:"}},
		{"mode", (&policyWorld{}).builder().Policies("").PolicyMode("loud"), []string{`PolicyMode: "loud" is not a mode`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.b.Build()
			var be *carmy.BuildError
			if !errors.As(err, &be) {
				t.Fatalf("Build: %v; want BuildErrors", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build: %v\nwant %q", err, w)
				}
			}
		})
	}
}

// writeAtomically puts a file in place whole, as a deploy does.
func writeAtomically(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyFileReload: a changed policy file is put in force without a
// restart; a bad one leaves the set in force, is audited with why; a
// deleted one keeps the last set.
func TestPolicyFileReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policies.cedar")
	writeAtomically(t, path, `permit(principal, action, resource);`)
	records := make(chan carmy.AuditRecord, 64)
	reg := build(t, (&policyWorld{}).builder().PolicyFile(path).PolicyPoll(5*time.Millisecond).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			if rec.Tool == "" {
				records <- rec
			}
			return nil
		})))
	call := func() policyOutcome {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "restart", Input: []byte(`{"env":"dev"}`)})
		return policyOutcomeOf(err)
	}
	next := func(want carmy.AuditDecision) carmy.AuditRecord {
		t.Helper()
		select {
		case rec := <-records:
			if rec.Decision != want {
				t.Fatalf("audit %+v; want %s", rec, want)
			}
			return rec
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s record", want)
		}
		return carmy.AuditRecord{}
	}
	if o := call(); o.Code != "ok" {
		t.Fatalf("%+v", o)
	}
	forbid := "@id(\"freeze\")\n@reason(\"frozen for the release\")\nforbid(principal, action == Action::\"call\", resource == Tool::\"restart\");\npermit(principal, action, resource);\n"
	writeAtomically(t, path, forbid)
	sum := sha256.Sum256([]byte(forbid))
	if rec := next(carmy.AuditPolicyReloaded); rec.PolicySet != hex.EncodeToString(sum[:]) {
		t.Errorf("reload record %+v; want the new set's SHA-256", rec)
	}
	if o := call(); o.Message != "frozen for the release" {
		t.Fatalf("%+v; want the reloaded forbid", o)
	}
	writeAtomically(t, path, `permit(principal, action, resource == Tool::"nope");`)
	if rec := next(carmy.AuditPolicyRejected); !strings.Contains(rec.Detail, `unknown tool "nope"`) || rec.PolicySet != hex.EncodeToString(sum[:]) {
		t.Errorf("rejection record %+v; want why, and the set kept", rec)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if o := call(); o.Message != "frozen for the release" {
		t.Fatalf("%+v; want the set kept", o)
	}
}

// TestPolicyShadow: in shadow mode every decision is evaluated and
// audited, none enforced.
func TestPolicyShadow(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		recs []carmy.AuditRecord
	)
	w := &policyWorld{}
	reg := build(t, w.builder().PolicyMode("shadow").Policies(`@id("no-transfers") forbid(principal, action, resource == Tool::"transfer");`).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			mu.Lock()
			recs = append(recs, rec)
			mu.Unlock()
			return nil
		})))
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "transfer", Input: []byte(`{"amount":1,"to":"x"}`)}); err != nil || w.count("transfer") != 1 {
		t.Fatalf("%v; want it run", err)
	}
	if got := metadataNames(reg.ToolsFor(context.Background(), carmy.Identity{})); !slices.Contains(got, "transfer") {
		t.Errorf("lists %v; want transfer", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 || recs[0].Decision != carmy.AuditExecuted || !slices.Equal(recs[0].Policies, []string{"no-transfers"}) || !strings.HasPrefix(recs[0].Detail, "shadow: ") {
		t.Errorf("audit %+v; want the executed call with what the policies would have done", recs)
	}
}

// TestPolicyListConfirmation: lists say a tool's confirmation is
// "possible" when a permit with @confirm admits it.
func TestPolicyListConfirmation(t *testing.T) {
	t.Parallel()
	reg := build(t, (&policyWorld{}).builder().Policies(doorPolicies))
	srv := serve(t, reg)
	for _, m := range listedOverHTTP(t, srv.URL, "") {
		want := carmy.ConfirmationNone
		if m.Name == "restart" {
			want = carmy.ConfirmationPossible
		}
		if m.Confirmation != want {
			t.Errorf("%s: confirmation %s; want %s", m.Name, m.Confirmation, want)
		}
	}
}

// Policies in Cedar decide who may call which tool with which
// arguments; a refusal names the policy, and its @reason is the message.
func ExampleBuilder_Policies() {
	type Transfer struct {
		Amount float64 `json:"amount"`
		To     string  `json:"to"`
	}
	transfer := func(in Transfer) (string, error) { return fmt.Sprintf("sent %.2f to %s", in.Amount, in.To), nil }
	reg, err := carmy.New().
		Tool(carmy.Tool(transfer, carmy.ExternalWrite, carmy.Name("transfer"), carmy.Register(false))).
		Policies(`
permit(principal, action, resource);

@id("large-transfers")
@reason("transfers above 1,000 need the treasury team")
forbid(principal, action == Action::"call", resource == Tool::"transfer")
unless { context.input has amount && context.input.amount.lessThanOrEqual(decimal("1000.0")) };
`).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	for _, in := range []string{`{"amount":250,"to":"bob"}`, `{"amount":5000,"to":"bob"}`} {
		res, err := reg.Execute(context.Background(), carmy.Call{Tool: "transfer", Principal: "alice", Input: []byte(in)})
		var e *carmy.Error
		if errors.As(err, &e) {
			fmt.Println(e.Code, e.Details["policy"], e.Message)
			continue
		}
		fmt.Println(string(res.Output))
	}
	// Output:
	// "sent 250.00 to bob"
	// permission_denied [large-transfers] transfers above 1,000 need the treasury team
}
