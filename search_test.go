package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

// searchOut is what search_tools answers.
type searchOut struct {
	Tools []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		Effect       string          `json:"effect"`
		Confirmation string          `json:"confirmation"`
		TaskSupport  string          `json:"task_support"`
		InputSchema  json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

func (o searchOut) names() []string {
	names := []string{}
	for _, t := range o.Tools {
		names = append(names, t.Name)
	}
	return names
}

// searchDoor calls search_tools for a caller through one way in, and
// returns its output, or the refusal.
type searchDoor struct {
	name string
	call func(t *testing.T, c permCaller, input string) (searchOut, permOutcome)
}

func decodeSearch(t *testing.T, raw []byte) searchOut {
	t.Helper()
	var out searchOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("search_tools output %s: %v", raw, err)
	}
	return out
}

// searchDoors are every way in to a registry served by srv, and to the
// stdio registry each caller gets from stdio.
func searchDoors(reg *carmy.Registry, srvURL string, stdio func(t *testing.T, c permCaller) *mcp.ClientSession) []searchDoor {
	ctx := context.Background()
	sessions := map[string]*mcp.ClientSession{}
	mcpDoor := func(version string) searchDoor {
		return searchDoor{"MCP " + version, func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			s := sessions[version+c.name]
			if s == nil {
				var err error
				if s, err = mcpDial(t, bearerClient(c.token()), srvURL, version, nil); err != nil {
					t.Fatal(err)
				}
				sessions[version+c.name] = s
			}
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: mcpArgs(input)})
			o := mcpOutcome(t, res, err)
			if o.Code != "ok" {
				return searchOut{}, o
			}
			b, _ := json.Marshal(res.StructuredContent)
			return decodeSearch(t, b), o
		}}
	}
	return []searchDoor{
		{"Execute", func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			res, err := reg.Execute(ctx, carmy.Call{Tool: "search_tools", Input: json.RawMessage(input), Principal: c.name, Permissions: c.perms})
			if err != nil {
				return searchOut{}, outcomeOf(err)
			}
			return decodeSearch(t, res.Output), outcomeOf(nil)
		}},
		{"Invoke", func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			out, err := carmy.Invoke[searchOut](ctx, reg, "search_tools", json.RawMessage(input), c.options()...)
			return out, outcomeOf(err)
		}},
		{"HTTP API", func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			_, body := bearerDo(t, http.MethodPost, srvURL+"/tools/search_tools", "Bearer "+c.token(), input)
			var res struct {
				Output json.RawMessage
				Error  *carmy.Error
			}
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if res.Error != nil {
				return searchOut{}, outcomeOf(res.Error)
			}
			return decodeSearch(t, res.Output), outcomeOf(nil)
		}},
		mcpDoor("2025-11-25"),
		mcpDoor("2026-07-28"),
		{"MCP over stdio", func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			res, err := stdio(t, c).CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: mcpArgs(input)})
			o := mcpOutcome(t, res, err)
			if o.Code != "ok" {
				return searchOut{}, o
			}
			b, _ := json.Marshal(res.StructuredContent)
			return decodeSearch(t, b), o
		}},
		{"LLM exports and Dispatch", func(t *testing.T, c permCaller, input string) (searchOut, permOutcome) {
			tools, _ := llm.AnthropicTools(reg, c.options()...)
			if !slices.ContainsFunc(tools, func(d llm.AnthropicTool) bool { return d.Name == "search_tools" }) &&
				slices.Contains(c.perms, "tools:read") {
				t.Errorf("the export for %s lacks search_tools", c.name)
			}
			res, err := llm.Dispatch(ctx, reg, "search_tools", input, c.options()...)
			if err != nil {
				return searchOut{}, outcomeOf(err)
			}
			return decodeSearch(t, res.Output), outcomeOf(nil)
		}},
	}
}

// TestSearchToolsEveryDoor: search_tools finds, for each caller, exactly
// the tools that caller may list, through every door, and never a tool the
// caller's permissions or the host's policy hide; and it is refused, like
// any Read tool, to a caller without the read permission.
func TestSearchToolsEveryDoor(t *testing.T) {
	t.Parallel()
	w := newPermWorld()
	var tokens []carmy.Token
	for _, c := range permCallers {
		tokens = append(tokens, carmy.Token{SHA256: carmy.HashToken(c.token()), Principal: c.name, Permissions: c.perms})
	}
	reg := build(t, w.builder().ToolSearch().Authenticate(carmy.BearerTokens(tokens...)))
	srv := serve(t, reg)
	stdio := map[string]*mcp.ClientSession{}
	stdioSession := func(t *testing.T, c permCaller) *mcp.ClientSession {
		if s := stdio[c.name]; s != nil {
			return s
		}
		s := singleClient(t, build(t, w.builder().ToolSearch().StdioIdentity(c.identity())), "memory", "", nil)
		stdio[c.name] = s
		return s
	}
	const everything = `{"query":"ping look edit wipe payroll","limit":50}`
	for _, c := range permCallers {
		for _, door := range searchDoors(reg, srv.URL, stdioSession) {
			t.Run(c.name+"/"+door.name, func(t *testing.T) {
				out, o := door.call(t, c, everything)
				if !slices.Contains(c.perms, "tools:read") {
					if o.Code != string(carmy.CodePermissionDenied) || !strings.Contains(o.Message, "tools:read") {
						t.Errorf("search by a caller without tools:read: %+v; want permission_denied", o)
					}
					return
				}
				if o.Code != "ok" {
					t.Fatalf("search: %+v", o)
				}
				got := out.names()
				slices.Sort(got)
				if !reflect.DeepEqual(got, c.sees) {
					t.Errorf("found %v; the caller sees %v", got, c.sees)
				}
			})
		}
	}
}

// SearchIn is the input of the tools of the search tests.
type SearchIn struct {
	OrderID string `json:"order_id" jsonschema:"description=The order's number as printed on the receipt"`
	Reason  string `json:"reason,omitempty"`
}

// CancelIn is the input of cancel_order in the search tests.
type CancelIn struct {
	SearchIn
	Receipt string `json:"receipt" jsonschema:"description=The receipt's barcode"`
}

func searchWorld() *carmy.Builder {
	noop := func(SearchIn) (string, error) { return "", nil }
	tool := func(name, desc string, effect carmy.Effect, opts ...carmy.Option) *carmy.ToolDef {
		return carmy.Tool(noop, effect, append(opts, carmy.Name(name), carmy.Description(desc), carmy.Register(false))...)
	}
	cancel := carmy.Tool(func(CancelIn) (string, error) { return "", nil }, carmy.Destructive,
		carmy.Name("cancel_order"), carmy.Description("Cancel an order that has not shipped yet."), carmy.RequireConfirmation(), carmy.Register(false))
	return carmy.New().Logger(quietLogger()).Tool(
		cancel,
		tool("get_order", "Show one order: its lines, total and status.", carmy.Read),
		tool("export_invoices", "Export invoices of a month as CSV.", carmy.Read, carmy.Tasks(carmy.TaskRequired)),
		tool("get_weather", "Current weather for a city.", carmy.Read, carmy.Tasks(carmy.TaskForbidden)),
		tool("list_customers", "Customers by name.", carmy.Read),
		tool("refund", "Give a customer their money back.", carmy.ExternalWrite),
		tool("ship", "Hand an order to the carrier.", carmy.Write),
	).ToolSearch()
}

// TestSearchToolsOutput: hits come best first, each with what a model
// needs to call it, and the limit (5 by default) bounds them.
func TestSearchToolsOutput(t *testing.T) {
	t.Parallel()
	reg := build(t, searchWorld())
	ctx := context.Background()
	run := func(t *testing.T, input string) searchOut {
		t.Helper()
		out, err := carmy.Invoke[searchOut](ctx, reg, "search_tools", json.RawMessage(input))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	out := run(t, `{"query":"cancel an order"}`)
	if got := out.names(); len(got) < 2 || got[0] != "cancel_order" {
		t.Fatalf("cancel an order found %v; want cancel_order first", got)
	}
	hit := out.Tools[0]
	meta, _ := reg.Lookup("cancel_order")
	if hit.Description != meta.Description || hit.Effect != "destructive" || hit.Confirmation != "required" ||
		hit.TaskSupport != "optional" || string(hit.InputSchema) != string(meta.InputSchema) {
		t.Errorf("cancel_order's hit: %+v", hit)
	}

	for _, tc := range []struct {
		query, tool, confirmation, tasks string
	}{
		{"export invoices csv", "export_invoices", "none", "required"},
		{"weather", "get_weather", "none", "forbidden"},
		{"barcode", "cancel_order", "required", "optional"}, // a field's description
	} {
		t.Run(tc.query, func(t *testing.T) {
			out := run(t, fmt.Sprintf(`{"query":%q,"limit":1}`, tc.query))
			if len(out.Tools) != 1 || out.Tools[0].Name != tc.tool || out.Tools[0].Confirmation != tc.confirmation || out.Tools[0].TaskSupport != tc.tasks {
				t.Errorf("found %+v; want %s (confirmation %s, task support %s)", out.Tools, tc.tool, tc.confirmation, tc.tasks)
			}
		})
	}

	// Every tool has the field order_id: without a limit, five.
	if got := run(t, `{"query":"order id"}`).names(); len(got) != 5 {
		t.Errorf("order id found %v; want the default limit, 5", got)
	}
	if got := run(t, `{"query":"order id","limit":50}`).names(); len(got) != 7 || slices.Contains(got, "search_tools") {
		t.Errorf("order id with limit 50 found %v; want the 7 tools, not search_tools itself", got)
	}
	if got := run(t, `{"query":"unicorns"}`); got.Tools == nil || len(got.Tools) != 0 {
		t.Errorf("a query that matches nothing: %+v; want an empty list", got)
	}

	m, ok := reg.Lookup("search_tools")
	if !ok || m.Effect != carmy.Read || !m.ParallelSafe {
		t.Errorf("search_tools' metadata: %+v", m)
	}
}

// TestSearchToolsBadInput: an empty or too long query and a limit out of
// range are invalid_input naming the field, on every door alike.
func TestSearchToolsBadInput(t *testing.T) {
	t.Parallel()
	reg := build(t, searchWorld())
	for _, tc := range []struct {
		input, field string
	}{
		{`{"query":""}`, "query"},
		{`{}`, "query"},
		{`{"query":"` + strings.Repeat("é", 513) + `"}`, "query"},
		{`{"query":"order","limit":0}`, "limit"},
		{`{"query":"order","limit":51}`, "limit"},
		{`{"query":"order","limit":-1}`, "limit"},
	} {
		t.Run(tc.input[:min(len(tc.input), 30)], func(t *testing.T) {
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "search_tools", Input: json.RawMessage(tc.input)})
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput || len(e.Fields) == 0 || e.Fields[0].Path != tc.field {
				t.Errorf("%s: %v; want invalid_input on %s", tc.input, err, tc.field)
			}
		})
	}
	// 512 characters, several bytes each, are not too long.
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "search_tools", Input: json.RawMessage(`{"query":"` + strings.Repeat("é", 512) + `"}`)}); err != nil {
		t.Errorf("512 characters: %v", err)
	}
}

// TestSearchToolsNameTaken: a tool of the host's named search_tools is a
// Build error with tool search on, and an ordinary tool with it off.
func TestSearchToolsNameTaken(t *testing.T) {
	t.Parallel()
	mine := carmy.Tool(func(SearchIn) (string, error) { return "mine", nil }, carmy.Read, carmy.Name("search_tools"), carmy.Register(false))
	_, err := carmy.New().Tool(mine).ToolSearch().Build()
	var be *carmy.BuildError
	if !errors.As(err, &be) || be.Tool != "search_tools" || !strings.Contains(err.Error(), "Builder.ToolSearch") || !strings.Contains(be.Site, "search_test.go") {
		t.Errorf("Build: %v; want a BuildError at the tool's declaration naming Builder.ToolSearch", err)
	}
	reg := build(t, carmy.New().Tool(mine))
	if out, err := carmy.Invoke[string](context.Background(), reg, "search_tools", json.RawMessage(`{"order_id":"1"}`)); err != nil || out != "mine" {
		t.Errorf("without tool search, the host's search_tools: %q, %v", out, err)
	}
}

// TestDeferredTools: a tool declared Deferred, or named by carmy.toml's
// deferred_tools, says defer_loading in GET /tools and in MCP tools/list
// (on the tool, as mcp-go writes it, and in _meta) in both generations,
// and stays listed and callable; other tools say nothing of it.
func TestDeferredTools(t *testing.T) {
	t.Parallel()
	noop := func(SearchIn) (string, error) { return "done", nil }
	reg := build(t, carmy.New().Logger(quietLogger()).Tool(
		carmy.Tool(noop, carmy.Read, carmy.Name("export_invoices"), carmy.Deferred(), carmy.Register(false)),
		carmy.Tool(noop, carmy.Read, carmy.Name("get_order"), carmy.Register(false)),
	))
	srv := serve(t, reg)

	for _, m := range listedOverHTTP(t, srv.URL, "") {
		if m.Deferred != (m.Name == "export_invoices") {
			t.Errorf("GET /tools: %s has Deferred %v", m.Name, m.Deferred)
		}
	}
	_, body := bearerDo(t, http.MethodGet, srv.URL+"/tools", "", "")
	if n := strings.Count(string(body), `"defer_loading":true`); n != 1 {
		t.Errorf("GET /tools says defer_loading %d times: %s", n, body)
	}

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"export_invoices","arguments":{"order_id":"1"}}}`
			session := ""
			if version == "2026-07-28" {
				meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
				list = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`
				call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"export_invoices","arguments":{"order_id":"1"},` + meta + `}}`
			} else {
				session = openSession(t, srv)
				mcpPostSession(t, srv.URL, version, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
			}
			var res struct {
				Result struct {
					Tools []struct {
						Name         string         `json:"name"`
						DeferLoading *bool          `json:"defer_loading"`
						Meta         map[string]any `json:"_meta"`
					} `json:"tools"`
				} `json:"result"`
			}
			raw := mcpPostSession(t, srv.URL, version, session, list, map[string]string{"Mcp-Method": "tools/list"})
			if err := json.Unmarshal(raw, &res); err != nil || len(res.Result.Tools) != 2 {
				t.Fatalf("tools/list: %s (%v)", raw, err)
			}
			for _, tool := range res.Result.Tools {
				deferred := tool.Name == "export_invoices"
				if got := tool.DeferLoading != nil && *tool.DeferLoading; got != deferred || (!deferred && tool.DeferLoading != nil) {
					t.Errorf("%s: defer_loading %v", tool.Name, tool.DeferLoading)
				}
				if got, _ := tool.Meta["carmy/defer_loading"].(bool); got != deferred {
					t.Errorf("%s: _meta carmy/defer_loading %v", tool.Name, tool.Meta["carmy/defer_loading"])
				}
			}
			out := mcpPostSession(t, srv.URL, version, session, call, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "export_invoices"})
			if !strings.Contains(string(out), `"done"`) || strings.Contains(string(out), `"isError":true`) {
				t.Errorf("calling the deferred tool: %s", out)
			}
		})
	}
}

// TestAppToolSearch: carmy.toml's tool_search turns search_tools on and
// deferred_tools marks tools Deferred; a deferred_tools entry that names
// no tool is a Build error at its line.
func TestAppToolSearch(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	noop := carmy.Tool(func(SearchIn) (string, error) { return "", nil }, carmy.Read, carmy.Name("export_invoices"), carmy.Register(false))
	t.Setenv("CARMY_CONFIG", writeConfig(t, "tool_search = true\ndeferred_tools = [\"export_invoices\"]\n"))
	reg := build(t, carmy.App().Tool(noop))
	if m, ok := reg.Lookup("export_invoices"); !ok || !m.Deferred {
		t.Errorf("export_invoices: %+v; want it deferred", m)
	}
	if _, ok := reg.Lookup("search_tools"); !ok {
		t.Error("tool_search = true serves no search_tools")
	}

	t.Setenv("CARMY_CONFIG", writeConfig(t, "listen = \"127.0.0.1:0\"\ndeferred_tools = [\"export_invoice\"]\n"))
	_, err := carmy.App().Tool(noop).Build()
	if err == nil || !strings.Contains(err.Error(), "carmy.toml:2: deferred_tools: there is no tool named \"export_invoice\"") {
		t.Errorf("Build: %v; want the line of deferred_tools", err)
	}
}

// ManyIn is the input of the generated tools of the search benchmarks.
type ManyIn struct {
	ID     string `json:"id" jsonschema:"description=The record's identifier"`
	Filter string `json:"filter,omitempty" jsonschema:"description=Words that narrow what is returned"`
	Limit  int    `json:"limit,omitempty"`
}

// manyTools returns n generated tools of a large API: a verb, a noun and
// a service each, half of them needing a permission the benchmarks'
// caller lacks, so that a search checks visibility as it goes.
func manyTools(n int) []*carmy.ToolDef {
	verbs := []string{"get", "list", "create", "update", "delete", "export", "import", "sync", "archive", "approve", "search", "count", "merge", "assign", "close", "reopen", "tag", "notify", "schedule", "refund"}
	nouns := []string{"order", "invoice", "customer", "ticket", "user", "report", "shipment", "payment", "product", "contract", "lead", "campaign", "subscription", "warehouse", "employee", "project", "task", "document", "calendar", "message", "vendor", "asset", "budget", "claim", "license"}
	fn := func(ManyIn) (string, error) { return "", nil }
	defs := make([]*carmy.ToolDef, n)
	for i := range n {
		v, o, svc := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)], i/(len(verbs)*len(nouns))
		opts := []carmy.Option{
			carmy.Name(fmt.Sprintf("%s_%s_s%d", v, o, svc)),
			carmy.Description(fmt.Sprintf("%s the %s records of service %d; returns them with their status, owner and history.", strings.ToUpper(v[:1])+v[1:], o, svc)),
			carmy.ParallelSafe(), carmy.Register(false),
		}
		if i%2 == 1 {
			opts = append(opts, carmy.Requires("admin"))
		}
		defs[i] = carmy.Tool(fn, carmy.Read, opts...)
	}
	return defs
}

// BenchmarkBuildManyTools: Build's time with 10,000 tools, with
// search_tools (which indexes them) and without.
func BenchmarkBuildManyTools(b *testing.B) {
	defs := manyTools(10_000)
	for _, search := range []bool{false, true} {
		b.Run(fmt.Sprintf("search=%v", search), func(b *testing.B) {
			for b.Loop() {
				bld := carmy.New().Tool(defs...).Logger(quietLogger())
				if search {
					bld.ToolSearch()
				}
				reg, err := bld.Build()
				if err != nil {
					b.Fatal(err)
				}
				reg.Close()
			}
		})
	}
}

// BenchmarkSearchManyTools: one search_tools call through Execute over
// 10,000 tools, by a caller who may list half of them; p50 and p99 are
// those of the calls measured one by one.
func BenchmarkSearchManyTools(b *testing.B) {
	reg, err := carmy.New().Tool(manyTools(10_000)...).Logger(quietLogger()).ToolSearch().Build()
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	queries := []string{
		`{"query":"export the invoices of a service"}`,
		`{"query":"refund a payment","limit":10}`,
		`{"query":"who owns this customer record","limit":20}`,
		`{"query":"close ticket"}`,
		`{"query":"status history","limit":50}`,
		`{"query":"schedule calendar message for employee"}`,
	}
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		_, err := reg.Execute(ctx, carmy.Call{Tool: "search_tools", Input: json.RawMessage(queries[i%len(queries)]), Principal: "bench"})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds()), "p99-µs")
}

// ToolSearch adds search_tools: a model describes what it needs and gets
// the tools it may call for it, best first, with their input schemas.
func ExampleBuilder_ToolSearch() {
	type Order struct {
		OrderID string `json:"order_id" jsonschema:"description=The order's number"`
	}
	cancel := carmy.Tool(func(Order) error { return nil }, carmy.Destructive, carmy.Name("cancel_order"),
		carmy.Description("Cancel an order that has not shipped."), carmy.RequireConfirmation(), carmy.Register(false))
	track := carmy.Tool(func(Order) (string, error) { return "", nil }, carmy.Read, carmy.Name("track_order"),
		carmy.Description("Where an order is now."), carmy.Register(false))
	payroll := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("cancel_payroll_run"),
		carmy.Description("Cancel this month's payroll run."), carmy.Requires("hr"), carmy.Register(false))
	reg, _ := carmy.New().Tool(cancel, track, payroll).ToolSearch().Build()
	defer reg.Close()

	// The caller lacks "hr": cancel_payroll_run is never found for it.
	res, _ := reg.Execute(context.Background(), carmy.Call{Tool: "search_tools", Input: json.RawMessage(`{"query":"cancel an order","limit":2}`)})
	var out struct {
		Tools []struct {
			Name, Effect, Confirmation string
			TaskSupport                string          `json:"task_support"`
			InputSchema                json.RawMessage `json:"input_schema"`
		}
	}
	_ = json.Unmarshal(res.Output, &out)
	for _, t := range out.Tools {
		fmt.Println(t.Name, t.Effect, t.Confirmation, t.TaskSupport)
		fmt.Println(" ", string(t.InputSchema))
	}
	// Output:
	// cancel_order destructive required optional
	//   {"type":"object","properties":{"order_id":{"type":"string","description":"The order's number"}},"required":["order_id"],"additionalProperties":false}
	// track_order read none optional
	//   {"type":"object","properties":{"order_id":{"type":"string","description":"The order's number"}},"required":["order_id"],"additionalProperties":false}
}
