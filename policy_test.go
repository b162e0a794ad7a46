package carmy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

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
