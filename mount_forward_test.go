//lint:file-ignore SA1019 the upstream samples and logs, which MCP deprecates from 2026-07-28 on and still serves.

package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// docsUpstream is an upstream with a resource, a resource template, a
// prompt and completions, as a documentation server has.
func docsUpstream() *upstream {
	u := newUpstream()
	u.server.AddResource(&mcp.Resource{URI: "docs://guide", Name: "guide", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "the guide"}}}, nil
		})
	u.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "docs://page/{id}", Name: "page"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "page " + strings.TrimPrefix(req.Params.URI, "docs://page/")}}}, nil
		})
	u.server.AddPrompt(&mcp.Prompt{Name: "summarize", Arguments: []*mcp.PromptArgument{{Name: "topic", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Summarize " + req.Params.Arguments["topic"]}}}}, nil
		})
	return u
}

// TestMountServesResourcesAndPrompts: an upstream's resources (URIs
// unchanged) and prompts (<prefix>_<name>) reach the callers that hold the
// mount's permissions, and every read is audited; the others see none of
// them, and their attempts are audited as refused.
func TestMountServesResourcesAndPrompts(t *testing.T) {
	u := docsUpstream()
	var mu sync.Mutex
	var records []carmy.AuditRecord
	audit := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
		mu.Lock()
		defer mu.Unlock()
		records = append(records, rec)
		return nil
	})
	const reader, stranger = "reader-token", "stranger-token"
	reg := build(t, carmy.New().Audit(audit).
		Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: carmy.HashToken(reader), Principal: "reader", Permissions: []string{"docs:read"}},
			carmy.Token{SHA256: carmy.HashToken(stranger), Principal: "stranger"})).
		Mount("docs", carmy.Endpoint(u.serveHTTP(t).URL), carmy.MountRequires("docs:read")))
	srv := serve(t, reg)
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs, err := mcpDial(t, bearerClient(reader), srv.URL, version, nil)
			if err != nil {
				t.Fatal(err)
			}
			list, err := cs.ListResources(ctx, nil)
			if err != nil || !slices.ContainsFunc(list.Resources, func(r *mcp.Resource) bool { return r.URI == "docs://guide" }) {
				t.Fatalf("resources/list = %+v, %v; want the upstream's docs://guide", list, err)
			}
			templates, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "docs://page/{id}" {
				t.Fatalf("resources/templates/list = %+v, %v", templates, err)
			}
			for uri, want := range map[string]string{"docs://guide": "the guide", "docs://page/7": "page 7"} {
				got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil || got.Contents[0].Text != want {
					t.Errorf("resources/read %s = %+v, %v; want %q", uri, got, err, want)
				}
			}
			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "docs_summarize" {
				t.Fatalf("prompts/list = %+v, %v; want the upstream's prompt as docs_summarize", prompts, err)
			}
			got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "docs_summarize", Arguments: map[string]string{"topic": "mounts"}})
			if err != nil || got.Messages[0].Content.(*mcp.TextContent).Text != "Summarize mounts" {
				t.Fatalf("prompts/get = %+v, %v", got, err)
			}

			other, err := mcpDial(t, bearerClient(stranger), srv.URL, version, nil)
			if err != nil {
				t.Fatal(err)
			}
			if list, err := other.ListResources(ctx, nil); err != nil || len(list.Resources) != 0 {
				t.Errorf("a caller without docs:read listed %+v, %v; want nothing", list, err)
			}
			if prompts, err := other.ListPrompts(ctx, nil); err != nil || len(prompts.Prompts) != 0 {
				t.Errorf("a caller without docs:read listed prompts %+v, %v; want none", prompts, err)
			}
			if _, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://guide"}); err == nil {
				t.Error("a caller without docs:read read docs://guide")
			}
			if _, err := other.GetPrompt(ctx, &mcp.GetPromptParams{Name: "docs_summarize", Arguments: map[string]string{"topic": "x"}}); err == nil {
				t.Error("a caller without docs:read got docs_summarize")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	for _, rec := range records {
		count[string(rec.Decision)+" "+rec.Principal+" "+rec.Tool]++
	}
	for key, want := range map[string]int{
		"read reader docs://guide": 2, "read reader docs://page/7": 2, "read reader docs_summarize": 2,
		"refused stranger docs://guide": 2, "refused stranger docs_summarize": 2,
	} {
		if count[key] != want {
			t.Errorf("%d audit records %q, want %d (all: %v)", count[key], key, want, count)
		}
	}
}

// TestMountTellsListChanges: when an upstream's resources or prompts
// change, carmy's MCP clients are told, in sessions and on the
// sessionless protocol's listen streams, and list them anew; carmy
// declares that its lists change only where an upstream says it tells.
func TestMountTellsListChanges(t *testing.T) {
	ctx := context.Background()
	u := docsUpstream()
	srv := serve(t, build(t, carmy.New().Mount("docs", carmy.Endpoint(u.serveHTTP(t).URL))))
	type told struct{ resources, prompts chan struct{} }
	clients := map[string]*mcp.ClientSession{}
	heard := map[string]told{}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		h := told{make(chan struct{}, 16), make(chan struct{}, 16)}
		heard[version] = h
		clients[version] = mcpListener(t, srv.URL, version, &mcp.ClientOptions{
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { h.resources <- struct{}{} },
			PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { h.prompts <- struct{}{} },
		})
		caps := clients[version].InitializeResult().Capabilities
		if caps.Resources == nil || !caps.Resources.ListChanged || caps.Prompts == nil || !caps.Prompts.ListChanged {
			t.Fatalf("%s: capabilities %+v; want resources and prompts that say when they change", version, caps)
		}
	}
	wait := func(version, what string, ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the client was not told that the %s changed", version, what)
		}
	}

	u.server.AddResource(&mcp.Resource{URI: "docs://faq", Name: "faq", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "the faq"}}}, nil
		})
	for version, cs := range clients {
		wait(version, "resources", heard[version].resources)
		list, err := cs.ListResources(ctx, nil)
		if err != nil || !slices.ContainsFunc(list.Resources, func(r *mcp.Resource) bool { return r.URI == "docs://faq" }) {
			t.Errorf("%s: resources/list = %+v, %v; want the new docs://faq", version, list, err)
		}
		templates, err := cs.ListResourceTemplates(ctx, nil)
		if err != nil || len(templates.ResourceTemplates) != 1 {
			t.Errorf("%s: resources/templates/list = %+v, %v; want the upstream's one template", version, templates, err)
		}
	}
	u.server.AddPrompt(&mcp.Prompt{Name: "translate"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Translate"}}}}, nil
	})
	for version, cs := range clients {
		wait(version, "prompts", heard[version].prompts)
		list, err := cs.ListPrompts(ctx, nil)
		if err != nil || len(list.Prompts) != 2 || !slices.ContainsFunc(list.Prompts, func(p *mcp.Prompt) bool { return p.Name == "docs_translate" }) {
			t.Errorf("%s: prompts/list = %+v, %v; want docs_summarize and the new docs_translate", version, list, err)
		}
	}

	t.Run("an upstream that does not say when its lists change", func(t *testing.T) {
		quiet := &upstream{calls: map[string]int{}, server: mcp.NewServer(&mcp.Implementation{Name: "quiet", Version: "1"}, &mcp.ServerOptions{
			Capabilities: &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}, Prompts: &mcp.PromptCapabilities{}}})}
		quiet.server.AddResource(&mcp.Resource{URI: "quiet://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
		cs := mcpConnect(t, serve(t, build(t, carmy.New().Mount("quiet", carmy.Endpoint(quiet.serveHTTP(t).URL)))).URL, "2025-11-25", nil)
		caps := cs.InitializeResult().Capabilities
		if caps.Resources == nil || caps.Resources.ListChanged || caps.Prompts == nil || caps.Prompts.ListChanged {
			t.Errorf("capabilities %+v; want resources and prompts served, not said to change", caps)
		}
	})
}

// TestMountResourcesAndPromptsOff: a mount that says so serves neither.
func TestMountResourcesAndPromptsOff(t *testing.T) {
	u := docsUpstream()
	reg := mountBuild(t, u.serveHTTP(t).URL, carmy.MountResources(false), carmy.MountPrompts(false))
	cs := mcpConnect(t, serve(t, reg).URL, "2025-11-25", nil)
	if caps := cs.InitializeResult().Capabilities; caps.Resources != nil || caps.Prompts != nil {
		t.Errorf("capabilities %+v: the mount serves no resources and no prompts", caps)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "docs://guide"}); err == nil {
		t.Error("an upstream resource was read through a mount that serves none")
	}
}

// TestMountForwardsSamplingAndLogs: an upstream may ask the caller's client
// to sample only where the mount says so, and its log messages during a
// call reach the caller, in order and before the result.
func TestMountForwardsSamplingAndLogs(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []carmy.MountOption
		want string
	}{
		{"configured", []carmy.MountOption{carmy.MountSampling()}, "the model says hi"},
		// carmy does not declare sampling: the upstream's SDK refuses.
		{"not configured", nil, "sampling"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream()
			u.server.AddTool(&mcp.Tool{Name: "think", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					for _, msg := range []string{"one", "two", "three"} {
						_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
					}
					res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
					if err != nil {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
					}
					return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
				})
			// Event streams, where the messages of a call precede its result.
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil))
			t.Cleanup(up.Close)
			t.Cleanup(up.CloseClientConnections)
			reg := mountBuild(t, up.URL, c.opts...)
			var mu sync.Mutex
			var logs []string
			sampled := 0
			cs := mcpConnect(t, serve(t, reg).URL, "2025-11-25", &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					sampled++
					mu.Unlock()
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "the model says " + req.Params.Messages[0].Content.(*mcp.TextContent).Text}}, nil
				},
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					mu.Lock()
					defer mu.Unlock()
					if s, ok := req.Params.Data.(string); ok {
						logs = append(logs, s)
					}
				},
			})
			if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_think", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, c.want) {
				t.Errorf("the call answered %q, want %q", got, c.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := map[bool]int{true: 1, false: 0}[c.opts != nil]; sampled != want {
				t.Errorf("the caller sampled %d times, want %d", sampled, want)
			}
			if !slices.Equal(logs, []string{"one", "two", "three"}) {
				t.Errorf("the caller got the log messages %q, want the upstream's three, before the result", logs)
			}
		})
	}
}

// TestMountSamplingTheCallerCannotDo: a caller that did not declare
// sampling gets the protocol's missing capability error, not the
// upstream's reading of the refusal.
func TestMountSamplingTheCallerCannotDo(t *testing.T) {
	u := newUpstream()
	u.server.AddTool(&mcp.Tool{Name: "think", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if _, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled"}}}, nil
		})
	reg := mountBuild(t, u.serveHTTP(t).URL, carmy.MountSampling())
	res, err := reg.Execute(context.Background(), carmy.Call{Tool: "fs_think", Input: json.RawMessage(`{}`)})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !strings.Contains(e.Message, "sample") {
		t.Fatalf("Execute = %+v, %v; want unavailable: the caller cannot sample", res, err)
	}
	cs, err := mcpDial(t, nil, serve(t, reg).URL, "2026-07-28", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_think", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "sampling") {
		t.Errorf("a sessionless client without sampling got %v, want the missing capability error", err)
	}
}

// TestMountKeepsTaskSupport: an upstream tool that forbids tasks is not
// run as a caller's task either.
func TestMountKeepsTaskSupport(t *testing.T) {
	up := build(t, carmy.New().Tool(
		carmy.Tool(func() (string, error) { return "done", nil }, carmy.Read, carmy.Name("quick"), carmy.Tasks(carmy.TaskForbidden)),
		carmy.Tool(func() (string, error) { return "done", nil }, carmy.Read, carmy.Name("slow"))))
	reg := mountBuild(t, serve(t, up).URL+"/mcp")
	tasks := map[string]carmy.TaskSupport{}
	for _, m := range reg.ToolsFor(context.Background(), carmy.Identity{}) {
		tasks[m.Name] = m.Tasks
	}
	if tasks["fs_quick"] != carmy.TaskForbidden || tasks["fs_slow"] != carmy.TaskOptional {
		t.Errorf("task support %v: want fs_quick forbidden as upstream, fs_slow optional", tasks)
	}
	if _, err := reg.Start(context.Background(), carmy.Call{Tool: "fs_quick", Input: json.RawMessage(`{}`)}); err == nil {
		t.Error("a task of a tool its upstream runs only synchronously was started")
	}
}

// TestMountQuestionInSessionlessRounds: a caller of the sessionless
// protocol is asked an upstream's question in carmy's own round; the
// upstream call stops there, and the round that brings the answer calls
// the upstream again, which gets the answer.
func TestMountQuestionInSessionlessRounds(t *testing.T) {
	u := newUpstream()
	var mu sync.Mutex
	var actions []string
	u.server.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			actions = append(actions, res.Action)
			mu.Unlock()
			name, _ := res.Content["name"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + name}}}, nil
		})
	reg := mountBuild(t, u.serveHTTP(t).URL)
	var asked []string
	cs, err := mcpDial(t, nil, serve(t, reg).URL, "2026-07-28", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_ask", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "accept Ada" {
		t.Fatalf("result %q, want the upstream's answer to the round's answer", text)
	}
	if !slices.Equal(asked, []string{"Server fs asks: Your name?"}) {
		t.Errorf("the caller was asked %q, want the upstream's question once, labelled", asked)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(actions, []string{"cancel", "accept"}) {
		t.Errorf("the upstream got %q, want its first call stopped (cancel) and the round's call answered", actions)
	}
}
