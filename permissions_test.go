package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/benchtools"
	"github.com/carmy-dev/carmy/llm"
)

// PermIn is the input of the tools of the permission tests.
type PermIn struct {
	N int `json:"n" validate:"min=1"`
}

// permWorld is a set of tools guarded by effect permissions, a declared
// permission and the host's policy, with a count of the runs of each.
type permWorld struct {
	mu   sync.Mutex
	runs map[string]int
	defs []*carmy.ToolDef
}

func newPermWorld() *permWorld {
	w := &permWorld{runs: map[string]int{}}
	tool := func(name string, effect carmy.Effect, opts ...carmy.Option) *carmy.ToolDef {
		fn := func(in PermIn) (int, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.runs[name]++
			return in.N, nil
		}
		return carmy.Tool(fn, effect, append(opts, carmy.Name(name), carmy.ParallelSafe(), carmy.Register(false))...)
	}
	w.defs = []*carmy.ToolDef{
		tool("ping", carmy.None),
		tool("look", carmy.Read),
		tool("edit", carmy.Write),
		tool("wipe", carmy.Destructive, carmy.Requires("admin")),
		tool("payroll", carmy.Read),
	}
	return w
}

func (w *permWorld) ran(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[name]
}

// builder reads need tools:read, writes tools:write, wipe also admin, and
// the policy keeps payroll for the approver.
func (w *permWorld) builder() *carmy.Builder {
	return carmy.New().Tool(w.defs...).Logger(quietLogger()).
		EffectPermissions(map[carmy.Effect]string{
			carmy.Read:          "tools:read",
			carmy.Write:         "tools:write",
			carmy.ExternalWrite: "tools:write",
			carmy.Destructive:   "tools:write",
		}).
		Authorize(func(c carmy.Context, m carmy.ToolMetadata) error {
			if m.Name == "payroll" && c.Principal != "approver" {
				return errors.New("payroll is for approvers")
			}
			return nil
		})
}

type permCaller struct {
	name  string
	perms []string
	sees  []string
}

var permCallers = []permCaller{
	{"none", nil, []string{"ping"}},
	{"read", []string{"tools:read"}, []string{"look", "ping"}},
	{"write", []string{"tools:read", "tools:write"}, []string{"edit", "look", "ping"}},
	{"approver", []string{"approve:*", "tools:read"}, []string{"look", "payroll", "ping"}},
}

func (c permCaller) identity() carmy.Identity {
	return carmy.Identity{Principal: c.name, Permissions: c.perms}
}

func (c permCaller) options() []carmy.CallOption {
	return []carmy.CallOption{carmy.WithPrincipal(c.name), carmy.WithPermissions(c.perms...)}
}

func (c permCaller) token() string { return "token-of-" + c.name }

// outcome is what a door answered to one call: "ok", or the code and
// message of the refusal.
type permOutcome struct {
	Code    string
	Message string
	Fields  bool // the refusal has field errors
}

func outcomeOf(err error) permOutcome {
	if err == nil {
		return permOutcome{Code: "ok"}
	}
	var e *carmy.Error
	if !errors.As(err, &e) {
		return permOutcome{Code: "not a carmy error", Message: err.Error()}
	}
	return permOutcome{Code: string(e.Code), Message: e.Message, Fields: len(e.Fields) > 0}
}

func mcpOutcome(t *testing.T, res *mcp.CallToolResult, err error) permOutcome {
	t.Helper()
	if err != nil {
		return permOutcome{Code: "protocol error", Message: err.Error()}
	}
	if !res.IsError {
		return permOutcome{Code: "ok"}
	}
	e := errorObject(t, res)
	msg, _ := e["message"].(string)
	code, _ := e["code"].(string)
	return permOutcome{Code: code, Message: msg, Fields: e["fields"] != nil}
}

// permDoor is one way in: it lists the tools a caller sees and calls one.
type permDoor struct {
	name string
	list func(t *testing.T, c permCaller) []string
	call func(t *testing.T, c permCaller, tool, input string) permOutcome
}

func metadataNames(tools []carmy.ToolMetadata) []string {
	names := []string{}
	for _, m := range tools {
		names = append(names, m.Name)
	}
	return names
}

// bearerDo sends a request with an Authorization header and a JSON body,
// and returns the status and the body of the answer.
func bearerDo(t *testing.T, method, url, authorization, body string) (int, []byte) {
	t.Helper()
	res, b := roundTrip(t, nil, method, url, body, "Authorization", authorization, "Content-Type", "application/json")
	return res.StatusCode, b
}

// listedOverHTTP returns what GET /tools lists for a caller.
func listedOverHTTP(t *testing.T, base, authorization string) []carmy.ToolMetadata {
	t.Helper()
	status, body := bearerDo(t, http.MethodGet, base+"/tools", authorization, "")
	var tools []carmy.ToolMetadata
	if err := json.Unmarshal(body, &tools); status != http.StatusOK || err != nil {
		t.Fatalf("GET /tools: %d %s", status, body)
	}
	return tools
}

func mcpNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	list, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func mcpArgs(input string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(input), &m)
	return m
}

// TestPermissionsEveryDoor: callers with no permission, read, write and
// an approver's see the same tools and get the same refusals through every
// door: Go (Execute, Invoke, ToolsFor), the HTTP API, MCP over HTTP in both
// generations, MCP over stdio and the LLM exports with llm.Dispatch. A
// tool a caller cannot see is refused as permission_denied, naming what is
// missing, before its input is read, and never runs.
func TestPermissionsEveryDoor(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	var tokens []carmy.Token
	for _, c := range permCallers {
		tokens = append(tokens, carmy.Token{SHA256: carmy.HashToken(c.token()), Principal: c.name, Permissions: c.perms})
	}
	reg := build(t, w.builder().Authenticate(carmy.BearerTokens(tokens...)))
	srv := serve(t, reg)
	ctx := context.Background()

	sessions := map[string]*mcp.ClientSession{} // by version and caller
	session := func(t *testing.T, version string, c permCaller) *mcp.ClientSession {
		key := version + " " + c.name
		if s := sessions[key]; s != nil {
			return s
		}
		s, err := mcpDial(t, bearerClient(c.token()), srv.URL, version, nil)
		if err != nil {
			t.Fatal(err)
		}
		sessions[key] = s
		return s
	}
	stdio := map[string]*mcp.ClientSession{}
	stdioSession := func(t *testing.T, c permCaller) *mcp.ClientSession {
		if s := stdio[c.name]; s != nil {
			return s
		}
		r := build(t, w.builder().StdioIdentity(c.identity()))
		s := singleClient(t, r, "memory", "", nil)
		stdio[c.name] = s
		return s
	}

	mcpDoor := func(version string) permDoor {
		return permDoor{"MCP " + version,
			func(t *testing.T, c permCaller) []string { return mcpNames(t, session(t, version, c)) },
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				res, err := session(t, version, c).CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: mcpArgs(input)})
				return mcpOutcome(t, res, err)
			}}
	}
	doors := []permDoor{
		{"Execute and ToolsFor",
			func(t *testing.T, c permCaller) []string { return metadataNames(reg.ToolsFor(ctx, c.identity())) },
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				_, err := reg.Execute(ctx, carmy.Call{Tool: tool, Input: json.RawMessage(input), Principal: c.name, Permissions: c.perms})
				return outcomeOf(err)
			}},
		{"Invoke",
			nil,
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				_, err := carmy.Invoke[int](ctx, reg, tool, json.RawMessage(input), c.options()...)
				return outcomeOf(err)
			}},
		{"HTTP API",
			func(t *testing.T, c permCaller) []string {
				return metadataNames(listedOverHTTP(t, srv.URL, "Bearer "+c.token()))
			},
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				status, body := bearerDo(t, http.MethodPost, srv.URL+"/tools/"+tool, "Bearer "+c.token(), input)
				var e struct{ Error *carmy.Error }
				_ = json.Unmarshal(body, &e)
				if e.Error == nil {
					if status != http.StatusOK {
						t.Fatalf("POST /tools/%s: %d %s", tool, status, body)
					}
					return permOutcome{Code: "ok"}
				}
				if e.Error.Code == carmy.CodePermissionDenied && status != http.StatusForbidden {
					t.Errorf("permission_denied answered with %d", status)
				}
				return outcomeOf(e.Error)
			}},
		mcpDoor("2025-11-25"),
		mcpDoor("2026-07-28"),
		{"MCP over stdio",
			func(t *testing.T, c permCaller) []string { return mcpNames(t, stdioSession(t, c)) },
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				res, err := stdioSession(t, c).CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: mcpArgs(input)})
				return mcpOutcome(t, res, err)
			}},
		{"LLM exports and Dispatch",
			func(t *testing.T, c permCaller) []string {
				tools, err := llm.OpenAITools(reg, c.options()...)
				if err != nil {
					t.Fatal(err)
				}
				names := []string{}
				for _, tool := range tools {
					names = append(names, tool.Function.Name)
				}
				anthropic, _ := llm.AnthropicTools(reg, c.options()...)
				gemini, _ := llm.GeminiFunctions(reg, c.options()...)
				if len(anthropic) != len(names) || len(gemini) != len(names) {
					t.Errorf("OpenAI %d tools, Anthropic %d, Gemini %d", len(names), len(anthropic), len(gemini))
				}
				return names
			},
			func(t *testing.T, c permCaller, tool, input string) permOutcome {
				_, err := llm.Dispatch(ctx, reg, tool, input, c.options()...)
				return outcomeOf(err)
			}},
	}

	all := []string{"edit", "look", "payroll", "ping", "wipe"}
	for _, c := range permCallers {
		// What Execute answers is what every door must answer.
		want := map[string]permOutcome{}
		for _, tool := range all {
			input := `{"n":1}`
			if !slices.Contains(c.sees, tool) {
				input = `{"n":0,"unknown":true}` // invalid: a refusal must come first
			}
			_, err := reg.Execute(ctx, carmy.Call{Tool: tool, Input: json.RawMessage(input), Principal: c.name, Permissions: c.perms})
			want[tool] = outcomeOf(err)
		}
		for _, door := range doors {
			t.Run(c.name+"/"+door.name, func(t *testing.T) {
				if door.list != nil {
					if got := door.list(t, c); !reflect.DeepEqual(got, c.sees) {
						t.Errorf("lists %v; want %v", got, c.sees)
					}
				}
				for _, tool := range all {
					visible := slices.Contains(c.sees, tool)
					input := `{"n":1}`
					if !visible {
						input = `{"n":0,"unknown":true}`
					}
					before := w.ran(tool)
					got := door.call(t, c, tool, input)
					if ran := w.ran(tool) > before; ran != visible {
						t.Errorf("%s: ran = %v, want %v", tool, ran, visible)
					}
					if got != want[tool] {
						t.Errorf("%s: %+v; Execute answers %+v", tool, got, want[tool])
					}
					switch {
					case visible && got.Code != "ok":
						t.Errorf("%s: %+v; want it to run", tool, got)
					case !visible && (got.Code != string(carmy.CodePermissionDenied) || got.Fields):
						t.Errorf("%s: %+v; want permission_denied without field errors", tool, got)
					}
				}
			})
		}
	}
}

// TestPermissionRefusal: the refusal names every missing permission, in
// its message and in details.missing, and the metadata lists what a call
// needs.
func TestPermissionRefusal(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	reg, err := w.builder().Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	m, _ := reg.Lookup("wipe")
	if want := []string{"admin", "tools:write"}; !reflect.DeepEqual(m.Requires, want) {
		t.Errorf("wipe requires %v; want %v", m.Requires, want)
	}
	if m, _ := reg.Lookup("ping"); m.Requires != nil {
		t.Errorf("ping requires %v; want nothing", m.Requires)
	}
	tests := []struct {
		perms   []string
		missing []string
		message string
	}{
		{nil, []string{"admin", "tools:write"}, `wipe needs the permissions "admin" and "tools:write", which this caller was not granted`},
		{[]string{"tools:write"}, []string{"admin"}, `wipe needs the permission "admin", which this caller was not granted`},
	}
	for _, tt := range tests {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "wipe", Permissions: tt.perms})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodePermissionDenied {
			t.Fatalf("%v: %v", tt.perms, err)
		}
		if !strings.HasPrefix(e.Message, tt.message) || len(e.Message) > 300 {
			t.Errorf("%v: message %q; want it to start %q", tt.perms, e.Message, tt.message)
		}
		if got, _ := e.Details["missing"].([]string); !reflect.DeepEqual(got, tt.missing) {
			t.Errorf("%v: details %v; want missing %v", tt.perms, e.Details, tt.missing)
		}
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "wipe", Input: []byte(`{"n":1}`), Permissions: []string{"admin", "tools:write"}}); err != nil {
		t.Fatal(err)
	}
}

// TestPermissionsBuildErrors: a permission that could not be an OAuth
// scope, an unknown effect and an empty permission are Build errors, each
// reported.
func TestPermissionsBuildErrors(t *testing.T) {
	t.Parallel()
	run := func(PermIn) error { return nil }
	tests := []struct {
		name string
		b    *carmy.Builder
		want string
	}{
		{"empty", carmy.New().Tool(carmy.Tool(run, carmy.Read, carmy.Name("a"), carmy.Requires(""), carmy.Register(false))), `permission "" must be 1 to 128`},
		{"space", carmy.New().Tool(carmy.Tool(run, carmy.Read, carmy.Name("a"), carmy.Requires("tools read"), carmy.Register(false))), `permission "tools read" may hold only printable ASCII`},
		{"quote", carmy.New().Tool(carmy.Tool(run, carmy.Read, carmy.Name("a"), carmy.Requires(`a"b`), carmy.Register(false))), `may hold only printable ASCII`},
		{"unknown effect", carmy.New().EffectPermissions(map[carmy.Effect]string{0: "x"}), "EffectPermissions: effect(0) is not an effect"},
		{"empty effect permission", carmy.New().EffectPermissions(map[carmy.Effect]string{carmy.Write: ""}), "EffectPermissions of write: permission \"\""},
		{"hand-written", carmy.New().Tool(carmy.Impl[PermIn, int](permImpl{requires: []string{"é"}})), `Requires: permission "é"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.b.Build()
			var be *carmy.BuildError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build: %v; want a BuildError with %q", err, tt.want)
			}
		})
	}
}

type permImpl struct{ requires []string }

func (p permImpl) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{Name: "impl", Effect: carmy.Read, Requires: p.requires}
}

func (permImpl) Execute(carmy.Context, PermIn) (int, error) { return 1, nil }

// TestRequiresHandWritten: a hand-written tool's metadata declares its
// permissions, which the effect's join; Requires given twice adds up.
func TestRequiresHandWritten(t *testing.T) {
	t.Parallel()
	twice := carmy.Tool(func(PermIn) error { return nil }, carmy.Read, carmy.Name("twice"), carmy.Requires("b", "a"), carmy.Requires("c", "a"), carmy.Register(false))
	reg, err := carmy.New().Tool(carmy.Impl[PermIn, int](permImpl{requires: []string{"z"}}), twice).
		EffectPermissions(map[carmy.Effect]string{carmy.Read: "tools:read"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for name, want := range map[string][]string{"impl": {"tools:read", "z"}, "twice": {"a", "b", "c", "tools:read"}} {
		if m, _ := reg.Lookup(name); !reflect.DeepEqual(m.Requires, want) {
			t.Errorf("%s requires %v; want %v", name, m.Requires, want)
		}
	}
	_, err = carmy.Invoke[int](context.Background(), reg, "impl", PermIn{N: 1}, carmy.WithPermissions("tools:read"))
	if carmy.CodeOf(err) != carmy.CodePermissionDenied || !strings.Contains(err.Error(), `"z"`) {
		t.Fatalf("impl without z: %v", err)
	}
}

// TestToolsForPolicy: lists ask the policy with the caller's identity, the
// tool's metadata and no execution; a policy that panics leaves the tool
// out of the list, and the list still comes.
func TestToolsForPolicy(t *testing.T) {
	t.Parallel()
	run := func(PermIn) error { return nil }
	var seen []string
	reg, err := carmy.New().Tool(
		carmy.Tool(run, carmy.Read, carmy.Name("a"), carmy.Register(false)),
		carmy.Tool(run, carmy.Read, carmy.Name("b"), carmy.Register(false)),
		carmy.Tool(run, carmy.Read, carmy.Name("c"), carmy.Register(false)),
	).Authorize(func(c carmy.Context, m carmy.ToolMetadata) error {
		seen = append(seen, c.Principal+" "+c.Session+" "+c.ExecutionID+" "+m.Name)
		switch m.Name {
		case "b":
			panic("policy bug")
		case "c":
			if !c.Permissions.Has("see:c") {
				return errors.New("no")
			}
		}
		return nil
	}).Logger(slog.New(slog.NewTextHandler(io.Discard, nil))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	got := metadataNames(reg.ToolsFor(context.Background(), carmy.Identity{Principal: "ann", Session: "s"}))
	if !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("ann sees %v", got)
	}
	if want := []string{"ann s  a", "ann s  b", "ann s  c"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("the policy saw %q; want %q", seen, want)
	}
	got = metadataNames(reg.ToolsFor(context.Background(), carmy.Identity{Principal: "bob", Permissions: []string{"see:c"}}))
	if !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("bob sees %v", got)
	}
}

// TestPermissionsOAuth: against a local issuer, the protected resource
// metadata lists the permissions tools require as scopes, a token sees the
// tools its scopes allow, and a call refused for a missing scope answers
// 403 with the RFC 6750 challenge naming the scopes the call needs; a
// refusal of the host's policy has no such challenge, as more scopes
// would not help.
func TestPermissionsOAuth(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	w := newPermWorld()
	reg := build(t, w.builder().Authenticate(newOAuth(t, iss, "tools")))
	srv := serve(t, reg)
	meta := srv.URL + "/.well-known/oauth-protected-resource"

	r := do(t, "GET", meta, "")
	if got, want := r.body["scopes_supported"], []any{"tools", "admin", "tools:read", "tools:write"}; !reflect.DeepEqual(got, want) {
		t.Errorf("scopes_supported %v; want %v", got, want)
	}
	reader := "Bearer " + sign(t, jose.ES256, ecKey(), "es", iss.claims("alice", "tools tools:read"))
	tools := listedOverHTTP(t, srv.URL, reader)
	if got := metadataNames(tools); !reflect.DeepEqual(got, []string{"look", "ping"}) {
		t.Errorf("alice with tools:read sees %v", got)
	}
	if !reflect.DeepEqual(tools[0].Requires, []string{"tools:read"}) {
		t.Errorf("look requires %v in GET /tools", tools[0].Requires)
	}

	for _, tc := range []struct {
		tool      string
		status    int
		challenge string
	}{
		{"look", 200, ""},
		{"edit", 403, `Bearer error="insufficient_scope", scope="tools tools:write", resource_metadata="` + meta + `"`},
		{"wipe", 403, `Bearer error="insufficient_scope", scope="tools admin tools:write", resource_metadata="` + meta + `"`},
		{"payroll", 403, ""},
	} {
		before := w.ran(tc.tool)
		r := do(t, "POST", srv.URL+"/tools/"+tc.tool, `{"n":1}`, "Authorization", reader)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d (%v)", tc.tool, r.status, tc.status, r.body)
		}
		if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
			t.Errorf("%s: WWW-Authenticate\n got %s\nwant %s", tc.tool, got, tc.challenge)
		}
		if ran := w.ran(tc.tool) > before; ran != (tc.status == 200) {
			t.Errorf("%s: ran = %v", tc.tool, ran)
		}
		if tc.challenge != "" {
			challenges, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate"))
			if err != nil || len(challenges) != 1 || challenges[0].Params["error"] != "insufficient_scope" {
				t.Errorf("%s: the SDK reads %+v, %v", tc.tool, challenges, err)
			}
		}
	}
	writer := sign(t, jose.ES256, ecKey(), "es", iss.claims("bob", "tools tools:read tools:write"))
	if r := do(t, "POST", srv.URL+"/tools/edit", `{"n":1}`, "Authorization", "Bearer "+writer); r.status != 200 {
		t.Errorf("bob with tools:write: %d %v", r.status, r.body)
	}
}

// TestUnknownToolSuggestsVisible: the refusal of an unknown tool suggests
// and lists only tools the caller may call.
func TestUnknownToolSuggestsVisible(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	reg, err := w.builder().Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tests := []struct {
		tool  string
		perms []string
		want  string
	}{
		{"wip", []string{"admin", "tools:write"}, `unknown tool "wip"; did you mean "wipe"?`},
		{"wip", nil, `unknown tool "wip"; the tools are ping`},
		{"edt", []string{"tools:read"}, `unknown tool "edt"; the tools are look, ping`},
	}
	for _, tt := range tests {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: tt.tool, Permissions: tt.perms})
		if carmy.CodeOf(err) != carmy.CodeUnknownTool || err.(*carmy.Error).Message != tt.want {
			t.Errorf("%s with %v: %v; want %q", tt.tool, tt.perms, err, tt.want)
		}
	}
	empty, err := carmy.New().Build()
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, err := empty.Execute(context.Background(), carmy.Call{Tool: "x"}); err == nil || err.(*carmy.Error).Message != `unknown tool "x"; there is no tool to call` {
		t.Errorf("no tools: %v", err)
	}
}

// TestPermissionRefusalDecided: a refusal for a missing permission is a
// decision of the runtime like any other: middleware sees it and the
// audit records it.
func TestPermissionRefusalDecided(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	var mu sync.Mutex
	var seen, audited []string
	reg, err := w.builder().
		Use(func(next carmy.CallFunc) carmy.CallFunc {
			return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
				res, err := next(ctx, req)
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, req.Tool.Name+" "+string(carmy.CodeOf(err)))
				return res, err
			}
		}).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			mu.Lock()
			defer mu.Unlock()
			audited = append(audited, string(rec.Decision)+" "+rec.Tool+" "+string(rec.Code)+" "+rec.Principal)
			return nil
		})).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "wipe", Input: []byte(`{"n":"x"}`), Principal: "eve", Permissions: []string{"tools:write"}})
	if carmy.CodeOf(err) != carmy.CodePermissionDenied {
		t.Fatal(err)
	}
	if want := []string{"wipe permission_denied"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("middleware saw %q; want %q", seen, want)
	}
	if want := []string{"refused wipe permission_denied eve"}; !reflect.DeepEqual(audited, want) {
		t.Errorf("audit %q; want %q", audited, want)
	}
}

// TestPermissionsMCPMeta: tools/list carries the permissions a tool needs
// in its _meta, and leaves them out for a tool that needs none.
func TestPermissionsMCPMeta(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	reg, err := w.builder().StdioIdentity(carmy.Identity{Principal: "root", Permissions: []string{"admin", "tools:read", "tools:write"}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s := singleClient(t, reg, "memory", "", nil)
	list, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, tool := range list.Tools {
		got[tool.Name] = tool.Meta["carmy/requires"]
	}
	want := map[string]any{"edit": []any{"tools:write"}, "look": []any{"tools:read"}, "ping": nil, "wipe": []any{"admin", "tools:write"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("_meta carmy/requires %v; want %v (payroll is the approver's)", got, want)
	}
}

// BenchmarkExecutePermissions is BenchmarkExecute's small call of a tool
// that requires a permission and whose effect needs another, by a caller
// that holds both among others: the price of the check on the call path.
func BenchmarkExecutePermissions(b *testing.B) {
	ctx := context.Background()
	c := benchCases()[0]
	reg, err := carmy.New().Tool(carmy.Tool(benchtools.CreateOrderFunc, carmy.Write, carmy.Name("create_order"), carmy.ParallelSafe(), carmy.Requires("orders"), carmy.Register(false))).
		EffectPermissions(map[carmy.Effect]string{carmy.Write: "tools:write"}).Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	call := carmy.Call{Tool: c.call, Input: []byte(c.input), Permissions: []string{"tools:read", "tools:write", "orders", "confirm:x"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Execute(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEffectPermissionsFromConfig: carmy.toml's [effect_permissions] table
// is Builder.EffectPermissions; a bad value or key names its line.
func TestEffectPermissionsFromConfig(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	t.Setenv("CARMY_CONFIG", writeConfig(t, "[effect_permissions]\nread = \"tools:read\"\nwrite = \"tools:write\"\n"))
	edit := carmy.Tool(func(PermIn) error { return nil }, carmy.Write, carmy.Name("config_edit"), carmy.Requires("edits"), carmy.Register(false))
	reg, err := carmy.App().Tool(edit).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if m, _ := reg.Lookup("config_edit"); !reflect.DeepEqual(m.Requires, []string{"edits", "tools:write"}) {
		t.Errorf("config_edit requires %v", m.Requires)
	}

	path := writeConfig(t, "\n[effect_permissions]\nread = \"tools read\"\nwrit = \"x\"\n")
	t.Setenv("CARMY_CONFIG", path)
	_, err = carmy.App().Build()
	for _, want := range []string{path + `:2: unknown key "effect_permissions.writ"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build = %v; want %q", err, want)
		}
	}
	path = writeConfig(t, "[effect_permissions]\nread = \"tools read\"\n")
	t.Setenv("CARMY_CONFIG", path)
	if _, err = carmy.App().Build(); err == nil || !strings.Contains(err.Error(), path+`:1: EffectPermissions of read: permission "tools read"`) {
		t.Errorf("Build = %v; want the bad permission at its line", err)
	}
}
