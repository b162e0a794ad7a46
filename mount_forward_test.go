//lint:file-ignore SA1019 the upstream samples and logs, which MCP deprecates from 2026-07-28 on and still serves.

package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/mcpwire"
	"github.com/carmy-dev/carmy/store"
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
// sessionless protocol's listen streams, and list them anew, and again
// when carmy reconnects to the upstream; carmy declares that its lists
// change only where an upstream says it tells.
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

	t.Run("after a reconnection", func(t *testing.T) {
		for ss := range u.server.Sessions() { // the upstream ends carmy's session
			_ = ss.Close()
		}
		for version := range clients {
			wait(version, "resources", heard[version].resources)
			wait(version, "prompts", heard[version].prompts)
		}
	})
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
			// The messages precede the result on the wire; the client hands
			// notifications to its handler apart from results, so they may
			// reach it a moment after CallTool returns.
			waitFor(t, "the upstream's three log messages", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(logs) >= 3
			})
			mu.Lock()
			defer mu.Unlock()
			if want := map[bool]int{true: 1, false: 0}[c.opts != nil]; sampled != want {
				t.Errorf("the caller sampled %d times, want %d", sampled, want)
			}
			if !slices.Equal(logs, []string{"one", "two", "three"}) {
				t.Errorf("the caller got the log messages %q, want the upstream's three, in order", logs)
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
		carmy.Tool(func() (string, error) { return "done", nil }, carmy.Read, carmy.Name("quick"), carmy.Tasks(carmy.TaskForbidden), carmy.Register(false)),
		carmy.Tool(func() (string, error) { return "done", nil }, carmy.Read, carmy.Name("slow"), carmy.Register(false))))
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

// Pick is the question of the upstream's pick tool.
type Pick struct {
	Color string `json:"color"`
}

// Sizing is the question the upstream's size tool asks before its task.
type Sizing struct {
	Size string `json:"size"`
}

// taskUpstream is a carmy registry served over HTTP, which speaks MCP's
// tasks, as an upstream whose tools run only as tasks: job waits to be
// released (or for its task's cancel, which it reports), several at once
// (parallel-safe: the order of calls is carmy's to keep), broken reports a
// tool error, crash panics (its task fails), pick asks a question, size
// asks its question before its task starts where the protocol lets it
// (input-required rounds, 2026-07-28), stamp writes (the mount has a
// person confirm it).
type taskUpstream struct {
	url       string
	ran       atomic.Int32
	release   chan struct{}
	cancelled chan struct{}
	stamped   atomic.Int32
}

func newTaskUpstream(t *testing.T) *taskUpstream {
	u := &taskUpstream{release: make(chan struct{}, 4), cancelled: make(chan struct{}, 4)}
	type JobInput struct {
		N int `json:"n"`
	}
	up := build(t, carmy.New().Tool(
		carmy.Tool(func(ctx carmy.Context, in JobInput) (string, error) {
			u.ran.Add(1)
			select {
			case <-u.release:
				return fmt.Sprintf("job %d done", in.N), nil
			case <-ctx.Done():
				u.cancelled <- struct{}{}
				return "", ctx.Err()
			}
		}, carmy.Read, carmy.Name("job"), carmy.Tasks(carmy.TaskRequired), carmy.Timeout(time.Minute), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() (string, error) {
			return "", carmy.Errorf(carmy.CodeInvalidInput, "no such job")
		}, carmy.Read, carmy.Name("broken"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
		carmy.Tool(func() (string, error) {
			panic("the upstream's job crashed")
		}, carmy.Read, carmy.Name("crash"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
		asking("Which color?", func(p Pick) string { return "picked " + p.Color }, carmy.Name("pick")),
		asking("Which size?", func(z Sizing) string { return "sized " + z.Size }, carmy.Name("size"), carmy.TaskAfterInput()),
		carmy.Tool(func() (string, error) {
			u.stamped.Add(1)
			return "stamped", nil
		}, carmy.Write, carmy.Name("stamp"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false))))
	u.url = serve(t, up).URL + "/mcp"
	return u
}

// asking is a task-only tool of the task upstream that asks message with
// the form F and answers what done makes of the answer.
func asking[F any](message string, done func(F) string, opts ...carmy.Option) *carmy.ToolDef {
	return carmy.Tool(func(ctx carmy.Context) (string, error) {
		var f F
		if ok, err := ctx.Elicit(message, &f); err != nil || !ok {
			return "", fmt.Errorf("no answer to %q: %v", message, err)
		}
		return done(f), nil
	}, carmy.Read, append([]carmy.Option{carmy.Tasks(carmy.TaskRequired), carmy.Register(false)}, opts...)...)
}

// sessionlessOnly serves the carmy registry at url, which speaks both
// protocol generations, as a server of the sessionless generation alone
// answers initialize: with 2026-07-28, the tasks extension and no session,
// so that its client speaks that generation.
func sessionlessOnly(t *testing.T, url string) string {
	return relay(t, url, func(w http.ResponseWriter, body []byte, resp *http.Response) {
		for k, v := range resp.Header {
			if !strings.EqualFold(k, "Mcp-Session-Id") && !strings.EqualFold(k, "Content-Length") {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		if !bytes.Contains(body, []byte(`"method":"initialize"`)) {
			_, _ = io.Copy(w, resp.Body)
			return
		}
		out, _ := io.ReadAll(resp.Body)
		out = bytes.ReplaceAll(out, []byte(`"protocolVersion":"2025-11-25"`), []byte(`"protocolVersion":"2026-07-28"`))
		_, _ = w.Write(bytes.Replace(out, []byte(`"capabilities":{`), []byte(`"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},`), 1))
	})
}

// relay serves what url serves: each request is sent on to url, and
// answer writes the answer to it, given the request's body and url's
// response.
func relay(t *testing.T, url string, answer func(w http.ResponseWriter, body []byte, resp *http.Response)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, url, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer(w, body, resp)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestMountCallsTaskOnlyToolsAsTasks: an upstream tool that runs only as a
// task is a tool of carmy's that runs only as a task, and carmy calls it
// as the upstream's task: its result, its tool error (a completed task
// whose result is an error, over MCP), its failure (a failed task), its
// question, its cancel, and a replay by request id that never reaches the
// upstream twice, in Go and over MCP.
func TestMountCallsTaskOnlyToolsAsTasks(t *testing.T) {
	for _, gen := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(gen, func(t *testing.T) {
			u := newTaskUpstream(t)
			url := u.url
			if gen == "2026-07-28" {
				url = sessionlessOnly(t, url)
			}
			confirm := true
			upstreamTasks(t, u, mountBuild(t, url, carmy.MountTool("stamp", carmy.ToolOverride{Confirm: &confirm})))
		})
	}
}

// TestMountLetsTheUpstreamDecide: where the upstream speaks the
// sessionless protocol with tasks, it decides, call by call, whether a
// call of a tool that runs only as a task asks first or makes its task at
// once, and a sessionless caller that takes tasks sees what it decided,
// over HTTP and stdio: the upstream's question in an input-required round
// before any task, and the task once answered (size); or carmy's task at
// once, which reads the upstream's task that the first call made, never
// sending the call twice nor counting it twice against the rate (job). A
// task of carmy's that cannot start cancels the upstream's, which nothing
// would read.
func TestMountLetsTheUpstreamDecide(t *testing.T) {
	u := newTaskUpstream(t)
	url := sessionlessOnly(t, u.url)
	// Three calls of job an hour, one per door and one replayed: each
	// call counted once, its retries not at all.
	rate := carmy.MountTool("job", carmy.ToolOverride{RateLimit: store.Rate{Calls: 3, Per: time.Hour}})
	// What the MCP request of each call said of itself, as middleware sees it.
	var mu sync.Mutex
	var seen []carmy.MCPRequest
	reg := build(t, carmy.New().Use(func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			mu.Lock()
			seen = append(seen, req.MCP())
			mu.Unlock()
			return next(ctx, req)
		}
	}).Mount("fs", carmy.Endpoint(url), rate))
	srv := serve(t, reg)
	for _, door := range []struct {
		name string
		rpc  func(t *testing.T, method, name, params string) (map[string]any, int)
	}{
		{"http", func(t *testing.T, method, name, params string) (map[string]any, int) {
			r, code, _ := taskMCP{t: t, url: srv.URL, tasks: true}.rpc(method, name, params)
			return r, code
		}},
		{"stdio", sessionlessStdio(t, reg)},
	} {
		t.Run(door.name, func(t *testing.T) {
			await := func(id string) map[string]any {
				t.Helper()
				var r map[string]any
				waitFor(t, "the task to complete", func() bool {
					r, _ = door.rpc(t, "tasks/get", id, `"taskId":"`+id+`",`)
					return r["status"] == "completed"
				})
				return r
			}

			t.Run("asks first", func(t *testing.T) {
				mu.Lock()
				seen = nil
				mu.Unlock()
				r, code := door.rpc(t, "tools/call", "fs_size", `"name":"fs_size","arguments":{},`)
				questions, _ := r["inputRequests"].(map[string]any)
				if code != 0 || r["resultType"] != "input_required" || r["taskId"] != nil || len(questions) != 1 {
					t.Fatalf("the first call: %v (error %d); want the upstream's question in a round, no task", r, code)
				}
				key := slices.Collect(maps.Keys(questions))[0]
				if q := jsonText(questions[key]); !strings.Contains(q, "Server fs asks: Which size?") {
					t.Errorf("the question %s; want the upstream's, labelled", q)
				}
				transport := map[string]string{"http": "tcp", "stdio": "pipe"}[door.name]
				mu.Lock()
				if len(seen) != 1 || seen[0].Method != "tools/call" || seen[0].ProtocolVersion != "2026-07-28" || seen[0].Transport != transport || len(seen[0].ID) == 0 {
					t.Errorf("the first call's MCP request, to middleware: %+v; want tools/call, 2026-07-28 over %s, with its id", seen, transport)
				}
				mu.Unlock()
				state, _ := json.Marshal(r["requestState"])
				r, code = door.rpc(t, "tools/call", "fs_size", `"name":"fs_size","arguments":{},"inputResponses":{"`+key+
					`":{"action":"accept","content":{"size":"large"}}},"requestState":`+string(state)+`,`)
				id, _ := r["taskId"].(string)
				if code != 0 || r["resultType"] != "task" || id == "" || r["requestState"] != nil || r["inputRequests"] != nil {
					t.Fatalf("the answering call: %v (error %d); want the task, without the round's state", r, code)
				}
				if text := jsonText(await(id)["result"]); !strings.Contains(text, "sized large") {
					t.Errorf("result %s; want the upstream's answer to the round's answer", text)
				}
			})

			t.Run("makes its task at once", func(t *testing.T) {
				before := u.ran.Load()
				r, code := door.rpc(t, "tools/call", "fs_job", `"name":"fs_job","arguments":{"n":7},`)
				id, _ := r["taskId"].(string)
				if code != 0 || r["resultType"] != "task" || id == "" {
					t.Fatalf("the call: %v (error %d); want carmy's task at once", r, code)
				}
				u.release <- struct{}{}
				if text := jsonText(await(id)["result"]); !strings.Contains(text, "job 7 done") {
					t.Errorf("result %s; want the upstream's", text)
				}
				if n := u.ran.Load() - before; n != 1 {
					t.Errorf("the upstream ran the job %d times; want once", n)
				}
			})
		})
	}

	t.Run("replayed by request id", func(t *testing.T) {
		before := u.ran.Load()
		call := func() map[string]any {
			t.Helper()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs_job","arguments":{"n":9},"_meta":{"carmy/request_id":"job-9",` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
			var msg struct{ Result map[string]any }
			if err := json.Unmarshal(mcpPostSession(t, srv.URL, "2026-07-28", "", body, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "fs_job"}), &msg); err != nil {
				t.Fatal(err)
			}
			return msg.Result
		}
		first := call()
		id, _ := first["taskId"].(string)
		if id == "" {
			t.Fatalf("the first call: %v; want carmy's task", first)
		}
		// While the task runs (the upstream's job waits to be released),
		// the retry gets it at once, not its end.
		if again := call(); again["taskId"] != id || again["resultType"] != "task" || again["status"] != "working" {
			t.Fatalf("the retry while the task runs: %v; want task %s, working", again, id)
		}
		u.release <- struct{}{}
		taskMCP{t: t, url: srv.URL, tasks: true}.await(id, "completed")
		if again := call(); again["taskId"] != id {
			t.Errorf("the retry once the task ended: %v; want task %s", again, id)
		}
		if n := u.ran.Load() - before; n != 1 {
			t.Errorf("the upstream ran the job %d times for one request id; want once", n)
		}
	})

	t.Run("one at a time", func(t *testing.T) {
		// A tool that writes is not parallel-safe: the call handed off
		// keeps its turn for its task, so the next call reaches the
		// upstream only once the first's task has ended.
		// The upstream answers each call late, so that the second call
		// waits for its turn while the first still holds it.
		write := carmy.MountTool("job", carmy.ToolOverride{Effect: carmy.Write})
		c := taskMCP{t: t, url: serve(t, mountBuild(t, lateCalls(t, url, 300*time.Millisecond), write)).URL, tasks: true}
		before := u.ran.Load()
		start := func(n int, ids chan<- string) {
			r, _, _ := c.rpc("tools/call", "fs_job", fmt.Sprintf(`"name":"fs_job","arguments":{"n":%d},`, n))
			id, _ := r["taskId"].(string)
			ids <- id
		}
		firstID, secondID := make(chan string, 1), make(chan string, 1)
		go start(10, firstID)
		time.Sleep(100 * time.Millisecond) // the first call holds the turn, waiting for the upstream
		go start(11, secondID)
		first := <-firstID
		if first == "" {
			t.Fatal("the first call: no task")
		}
		time.Sleep(500 * time.Millisecond) // room for the second call to reach the upstream, if it were let
		if n := u.ran.Load() - before; n != 1 {
			t.Fatalf("the upstream ran %d jobs while the first call's task ran; want 1", n)
		}
		u.release <- struct{}{}
		c.await(first, "completed")
		id := <-secondID
		if id == "" {
			t.Fatal("the second call: no task")
		}
		u.release <- struct{}{}
		c.await(id, "completed")
		if n := u.ran.Load() - before; n != 2 {
			t.Errorf("the upstream ran %d jobs; want 2, one after the other", n)
		}
	})

	t.Run("a task that cannot start", func(t *testing.T) {
		tasks := &refusingTasks{IdempotencyStore: store.NewMemoryStore(0, 0), TaskStore: store.NewMemoryTasks()}
		tasks.refuse.Store(true)
		// A tool that writes, whose turn the call kept for the task.
		write := carmy.MountTool("job", carmy.ToolOverride{Effect: carmy.Write})
		c := taskMCP{t: t, url: serve(t, build(t, carmy.New().Store(tasks).Mount("fs", carmy.Endpoint(url), write))).URL, tasks: true}
		r, code, _ := c.rpc("tools/call", "fs_job", `"name":"fs_job","arguments":{"n":8},`)
		if code != 0 || r["isError"] != true || r["taskId"] != nil {
			t.Errorf("the call: %v (error %d); want an error result, no task", r, code)
		}
		select {
		case <-u.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream's task was not cancelled")
		}
		// The turn was given back: the next call runs, not waits for it.
		tasks.refuse.Store(false)
		id := c.start("fs_job", `{"n":12}`)
		u.release <- struct{}{}
		c.await(id, "completed")
	})
}

// sessionlessStdio serves reg over stdio to a client of the sessionless
// protocol that takes tasks, and returns how it sends one request (its
// params' members but _meta, each followed by a comma): the request's
// result, or its error's code.
func sessionlessStdio(t *testing.T, reg *carmy.Registry) func(t *testing.T, method, name, params string) (map[string]any, int) {
	in, out := stdioPipes(t, reg)
	var mu sync.Mutex
	n := 0
	return func(t *testing.T, method, _, params string) (map[string]any, int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		n++
		id := fmt.Sprint(n)
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
		if _, err := io.WriteString(in, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":{`+params+meta+"}}\n"); err != nil {
			t.Fatal(err)
		}
		for { // notifications (the upstream's logs) may come first
			line, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &msg) == nil && string(msg.ID) == id {
				return rawAnswer(t, line)
			}
		}
	}
}

// lateCalls serves what url serves, answering each tools/call after
// delay, as a slow upstream does.
func lateCalls(t *testing.T, url string, delay time.Duration) string {
	return relay(t, url, func(w http.ResponseWriter, body []byte, resp *http.Response) {
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			time.Sleep(delay)
		}
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

// refusingTasks is a store whose tasks cannot be created while refuse is
// set, as a store at its bound or out of reach.
type refusingTasks struct {
	store.IdempotencyStore
	store.TaskStore
	refuse atomic.Bool
}

func (s *refusingTasks) CreateTask(ctx context.Context, t store.Task, lease time.Duration) (store.Task, bool, error) {
	if s.refuse.Load() {
		return store.Task{}, false, errors.New("no room for tasks")
	}
	return s.TaskStore.CreateTask(ctx, t, lease)
}

// upstreamTasks runs the calls of TestMountCallsTaskOnlyToolsAsTasks
// through reg, which mounts u.
func upstreamTasks(t *testing.T, u *taskUpstream, reg *carmy.Registry) {
	ctx := context.Background()
	for _, m := range reg.ToolsFor(ctx, carmy.Identity{}) {
		if strings.HasPrefix(m.Name, "fs_") && m.Tasks != carmy.TaskRequired {
			t.Errorf("%s runs as %v; want only as a task, as upstream", m.Name, m.Tasks)
		}
	}
	wait := func(t *testing.T, task *carmy.Task) (carmy.Result, error) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return task.Wait(wctx)
	}

	t.Run("in Go, replayed by request id", func(t *testing.T) {
		if _, err := reg.Execute(ctx, carmy.Call{Tool: "fs_job", Input: json.RawMessage(`{"n":1}`)}); carmy.CodeOf(err) != carmy.CodeInvalidInput {
			t.Fatalf("a synchronous call: %v; want the task-only refusal", err)
		}
		before := u.ran.Load()
		call := carmy.Call{Tool: "fs_job", Input: json.RawMessage(`{"n":1}`), RequestID: "job-1"}
		task, err := reg.Start(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		u.release <- struct{}{}
		res, err := wait(t, task)
		if err != nil || string(res.Output) != `{"result":"job 1 done"}` || task.Status != carmy.TaskCompleted {
			t.Fatalf("task %s: %s, %v; want the upstream's result", task.Status, res.Output, err)
		}
		again, err := reg.Start(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		res, err = wait(t, again)
		if err != nil || string(res.Output) != `{"result":"job 1 done"}` {
			t.Fatalf("the replay: %s, %v; want the recorded result", res.Output, err)
		}
		if n := u.ran.Load() - before; n != 1 {
			t.Errorf("the upstream ran the job %d times; want once", n)
		}
	})

	t.Run("in Go, confirmed before the upstream is called", func(t *testing.T) {
		task, err := reg.Start(ctx, carmy.Call{Tool: "fs_stamp", Input: json.RawMessage(`{}`), Principal: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != carmy.TaskInputRequired || task.ApprovalID == "" || u.stamped.Load() != 0 {
			t.Fatalf("task %s (approval %q), upstream called %d times; want a task waiting for a person, the upstream not called",
				task.Status, task.ApprovalID, u.stamped.Load())
		}
		if err := reg.Decide(ctx, task.ApprovalID, true, "person:bob"); err != nil {
			t.Fatal(err)
		}
		if res, err := wait(t, task); err != nil || string(res.Output) != `{"result":"stamped"}` || u.stamped.Load() != 1 {
			t.Fatalf("approved: %s, %v, upstream called %d times; want its result, once", res.Output, err, u.stamped.Load())
		}
	})

	t.Run("in Go, a tool error and a failed task", func(t *testing.T) {
		task, err := reg.Start(ctx, carmy.Call{Tool: "fs_broken", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wait(t, task); carmy.CodeOf(err) != carmy.CodeToolError || !strings.Contains(err.Error(), "no such job") {
			t.Errorf("the tool error: %v; want tool_error with the upstream's message", err)
		}
		task, err = reg.Start(ctx, carmy.Call{Tool: "fs_crash", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = wait(t, task)
		var e *carmy.Error
		if task.Status != carmy.TaskFailed || !errors.As(err, &e) || e.Details["reason"] != "upstream_failed" {
			t.Errorf("the crashed task: %s, %v; want failed, reason upstream_failed", task.Status, err)
		}
	})

	// The upstream's question, asked in its task (pick) or, in the
	// sessionless protocol, in an input-required round before its task
	// starts (size): either way carmy's task asks it.
	for _, q := range []struct{ tool, message, field, answer, want string }{
		{"fs_pick", "Which color?", "color", "teal", "picked teal"},
		{"fs_size", "Which size?", "size", "large", "sized large"},
	} {
		t.Run("in Go, the upstream's question/"+q.tool, func(t *testing.T) {
			task, err := reg.Start(ctx, carmy.Call{Tool: q.tool, Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for len(task.Questions) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				if task, err = reg.Task(ctx, task.ID); err != nil {
					t.Fatal(err)
				}
			}
			if task.Status != carmy.TaskInputRequired || len(task.Questions) != 1 || task.Questions[0].Message != "Server fs asks: "+q.message {
				t.Fatalf("task %s asks %+v; want the upstream's question, labelled", task.Status, task.Questions)
			}
			if err := task.Answer(ctx, task.Questions[0].ID, carmy.TaskAnswer{Action: "accept", Content: map[string]any{q.field: q.answer}}); err != nil {
				t.Fatal(err)
			}
			if res, err := wait(t, task); err != nil || string(res.Output) != `{"result":"`+q.want+`"}` {
				t.Fatalf("result %s, %v; want the upstream's answer to the answer", res.Output, err)
			}
		})
	}

	t.Run("in Go, a cancel reaches the upstream's task", func(t *testing.T) {
		task, err := reg.Start(ctx, carmy.Call{Tool: "fs_job", Input: json.RawMessage(`{"n":2}`)})
		if err != nil {
			t.Fatal(err)
		}
		before := u.ran.Load()
		for deadline := time.Now().Add(10 * time.Second); u.ran.Load() == before && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if err := task.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-u.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream's task was not cancelled")
		}
		if _, err := wait(t, task); task.Status != carmy.TaskCancelled {
			t.Errorf("task %s, %v; want cancelled", task.Status, err)
		}
	})

	t.Run("over MCP", func(t *testing.T) {
		c := taskMCP{t: t, url: serve(t, reg).URL, tasks: true}
		id := c.start("fs_job", `{"n":3}`)
		u.release <- struct{}{}
		r := c.await(id, "completed")
		if text := jsonText(r["result"]); !strings.Contains(text, "job 3 done") {
			t.Errorf("result %s; want the upstream's", text)
		}
		r = c.await(c.start("fs_broken", `{}`), "completed")
		if res, _ := r["result"].(map[string]any); res == nil || res["isError"] != true {
			t.Errorf("the tool error: %v; want a completed task whose result is an error", r)
		}
		r = c.await(c.start("fs_crash", `{}`), "failed")
		if e, _ := r["error"].(map[string]any); e == nil || e["code"] == nil || r["result"] != nil {
			t.Errorf("the crash: %v; want a failed task with its error", r)
		}
		if _, code, _ := (taskMCP{t: t, url: c.url}).rpc("tools/call", "fs_job", `"name":"fs_job","arguments":{"n":4},`); code != -32021 {
			t.Errorf("a call without tasks: error %d; want -32021", code)
		}
	})
}

// roundsUpstream is an upstream whose tool and prompt ask through
// input-required results (SEP-2322), each question under its own key,
// asking only what the client declared; seen records what each call of
// the tool was told the client declares.
func roundsUpstream(seen *[]string, mu *sync.Mutex) *upstream {
	u := newUpstream()
	u.server.AddTool(&mcp.Tool{Name: "greet", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			caps, declared := req.ClientCapabilities(), []string{}
			questions := mcp.InputRequestMap{}
			if caps != nil && caps.Elicitation != nil {
				declared = append(declared, "elicitation")
				questions["user_name"] = &mcp.ElicitParams{Message: "Your name?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}}
			}
			if caps != nil && caps.Sampling != nil {
				declared = append(declared, "sampling")
				questions["capital"] = &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Capital of France?"}}}}
			}
			if caps != nil && caps.RootsV2 != nil {
				declared = append(declared, "roots")
			}
			mu.Lock()
			*seen = append(*seen, strings.Join(declared, "+"))
			mu.Unlock()
			answers := req.Params.InputResponses
			if len(answers) == 0 {
				return &mcp.CallToolResult{InputRequests: questions, RequestState: "upstream-state"}, nil
			}
			if req.Params.RequestState != "upstream-state" {
				return nil, errors.New("not my state")
			}
			var parts []string
			if a, ok := answers["user_name"].(*mcp.ElicitResult); ok {
				parts = append(parts, fmt.Sprint("name ", a.Content["name"]))
			}
			if a, ok := answers["capital"].(*mcp.CreateMessageWithToolsResult); ok {
				parts = append(parts, "capital "+a.Content[0].(*mcp.TextContent).Text)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(parts, ", ")}}}, nil
		})
	u.server.AddPrompt(&mcp.Prompt{Name: "brief", Arguments: []*mcp.PromptArgument{{Name: "topic"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a, ok := req.Params.InputResponses["audience"].(*mcp.ElicitResult)
			if !ok || req.Params.RequestState != "brief-"+req.Params.Arguments["topic"] {
				return &mcp.GetPromptResult{RequestState: "brief-" + req.Params.Arguments["topic"], InputRequests: mcp.InputRequestMap{
					"audience": &mcp.ElicitParams{Message: "For whom?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"who": map[string]any{"type": "string"}}}},
					"where":    &mcp.ListRootsParams{},
				}}, nil
			}
			roots, _ := req.Params.InputResponses["where"].(*mcp.ListRootsResult)
			where := []string{}
			for _, r := range roots.Roots {
				where = append(where, r.URI)
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{
				Text: fmt.Sprintf("Brief %s on %s in %s", a.Content["who"], req.Params.Arguments["topic"], strings.Join(where, " "))}}}}, nil
		})
	// steps asks twice: step_two once step_one is answered, its state
	// carrying the first answer.
	u.server.AddTool(&mcp.Tool{Name: "steps", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			form := map[string]any{"type": "object", "properties": map[string]any{"v": map[string]any{"type": "string"}}}
			got := func(key string) any {
				if a, ok := req.Params.InputResponses[key].(*mcp.ElicitResult); ok {
					return a.Content["v"]
				}
				return nil
			}
			switch {
			case req.Params.RequestState == "one" && got("step_one") != nil:
				return &mcp.CallToolResult{RequestState: fmt.Sprint("two:", got("step_one")), InputRequests: mcp.InputRequestMap{"step_two": &mcp.ElicitParams{Message: "Second?", RequestedSchema: form}}}, nil
			case strings.HasPrefix(req.Params.RequestState, "two:") && got("step_two") != nil:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(strings.TrimPrefix(req.Params.RequestState, "two:"), " then ", got("step_two"))}}}, nil
			}
			return &mcp.CallToolResult{RequestState: "one", InputRequests: mcp.InputRequestMap{"step_one": &mcp.ElicitParams{Message: "First?", RequestedSchema: form}}}, nil
		})
	u.server.AddResource(&mcp.Resource{URI: "docs://secret", Name: "secret"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			a, ok := req.Params.InputResponses["passphrase"].(*mcp.ElicitResult)
			if !ok || req.Params.RequestState != "secret-state" {
				return &mcp.ReadResourceResult{RequestState: "secret-state", InputRequests: mcp.InputRequestMap{
					"passphrase": &mcp.ElicitParams{Message: "Passphrase?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"word": map[string]any{"type": "string"}}}},
				}}, nil
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: fmt.Sprint("opened with ", a.Content["word"])}}}, nil
		})
	return u
}

// serveBoth serves the upstream over streamable HTTP in both protocol
// generations, as carmy's own server does: sessions, and the sessionless
// protocol on the SDK's stateless path.
func (u *upstream) serveBoth(t *testing.T) *httptest.Server {
	t.Helper()
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, &mcp.StreamableHTTPOptions{JSONResponse: true, Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if mcpwire.IsSessionlessRequest(r, body) {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range u.server.Sessions() {
			_ = ss.Close()
		}
	})
	t.Cleanup(srv.CloseClientConnections)
	t.Cleanup(srv.Close)
	return srv
}

// roundsCaller connects a caller of the sessionless protocol that answers
// rounds itself (the SDK's loop off) and declares caps.
func roundsCaller(t *testing.T, url string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	t.Helper()
	return mcpConnect(t, url, "2026-07-28", &mcp.ClientOptions{Capabilities: caps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
}

// TestMountPassesTheUpstreamsRounds: a caller of the sessionless protocol
// sees a mounted upstream's own questions under the upstream's keys
// (elicitation labelled with the mount, sampling as it is; roots never:
// the mount answers them from its own config), and completes the call and
// the prompt with its answers; the upstream is told only what the caller
// declared and the mount allows.
func TestMountPassesTheUpstreamsRounds(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	u := roundsUpstream(&seen, &mu)
	reg := mountBuild(t, u.serveBoth(t).URL, carmy.MountSampling(), carmy.MountRoots("file:///srv/docs"))
	url := serve(t, reg).URL
	ctx := context.Background()
	both := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}, Sampling: &mcp.SamplingCapabilities{}}

	t.Run("tool", func(t *testing.T) {
		cs := roundsCaller(t, url, both)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first round = %+v, %v; want the upstream's questions", res, err)
		}
		if keys := slices.Sorted(maps.Keys(res.InputRequests)); !slices.Equal(keys, []string{"capital", "user_name"}) {
			t.Fatalf("the caller was asked %v, want the upstream's keys", keys)
		}
		if q := res.InputRequests["user_name"].(*mcp.ElicitParams); q.Message != "Server fs asks: Your name?" {
			t.Errorf("the question reads %q, want it labelled with the mount", q.Message)
		}
		if !strings.HasPrefix(res.RequestState, "carmy/round:") {
			t.Errorf("the request state is %q, want carmy's own, never the upstream's", res.RequestState)
		}
		done, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}, RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{
				"user_name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}},
				"capital":   &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}},
			}})
		if err != nil || done.NeedsInput() || done.IsError || mcpText(done) != "name Ada, capital Paris" {
			t.Fatalf("the round with the answers = %+v (%q), %v; want the upstream's answer to them", done, mcpText(done), err)
		}
	})

	t.Run("two rounds upstream", func(t *testing.T) {
		cs := roundsCaller(t, url, both)
		call := func(state string, answers mcp.InputResponseMap) *mcp.CallToolResult {
			t.Helper()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_steps", Arguments: map[string]any{}, RequestState: state, InputResponses: answers})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		answer := func(v string) *mcp.ElicitResult {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"v": v}}
		}
		first := call("", nil)
		if keys := slices.Sorted(maps.Keys(first.InputRequests)); !slices.Equal(keys, []string{"step_one"}) {
			t.Fatalf("first round asks %v, want step_one", keys)
		}
		second := call(first.RequestState, mcp.InputResponseMap{"step_one": answer("a")})
		if keys := slices.Sorted(maps.Keys(second.InputRequests)); !slices.Equal(keys, []string{"step_two"}) {
			t.Fatalf("second round asks %v, want the upstream's second question", keys)
		}
		done := call(second.RequestState, mcp.InputResponseMap{"step_two": answer("b")})
		if done.NeedsInput() || mcpText(done) != "a then b" {
			t.Fatalf("third round = %+v (%q); want both answers, the first carried in carmy's state", done, mcpText(done))
		}
	})

	t.Run("narrowed", func(t *testing.T) {
		mu.Lock()
		seen = nil
		mu.Unlock()
		cs := roundsCaller(t, url, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first round = %+v, %v", res, err)
		}
		if keys := slices.Sorted(maps.Keys(res.InputRequests)); !slices.Equal(keys, []string{"capital"}) {
			t.Errorf("a caller that declared sampling only was asked %v, want sampling only", keys)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(seen, []string{"sampling+roots"}) {
			t.Errorf("the upstream was told the client declares %q, want the caller's sampling and the mount's roots", seen)
		}
	})

	t.Run("prompt", func(t *testing.T) {
		cs := roundsCaller(t, url, both)
		args := map[string]string{"topic": "mounts"}
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fs_brief", Arguments: args})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first round = %+v, %v; want the upstream's question", res, err)
		}
		if keys := slices.Sorted(maps.Keys(res.InputRequests)); !slices.Equal(keys, []string{"audience"}) {
			t.Fatalf("the caller was asked %v, want the upstream's audience and never roots", keys)
		}
		if strings.Contains(res.RequestState, "brief-") || !strings.HasPrefix(res.RequestState, "carmy/upstream:") {
			t.Errorf("the request state is %q, want the upstream's wrapped", res.RequestState)
		}
		answer := mcp.InputResponseMap{"audience": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"who": "operators"}}}
		done, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fs_brief", Arguments: args, RequestState: res.RequestState, InputResponses: answer})
		if err != nil || done.NeedsInput() || len(done.Messages) != 1 {
			t.Fatalf("the round with the answer = %+v, %v", done, err)
		}
		if text := done.Messages[0].Content.(*mcp.TextContent).Text; text != "Brief operators on mounts in file:///srv/docs" {
			t.Errorf("prompt = %q, want the caller's answer and the mount's roots", text)
		}
	})

	t.Run("resource", func(t *testing.T) {
		cs := roundsCaller(t, url, both)
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://secret"})
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first round = %+v, %v; want the upstream's question", res, err)
		}
		if keys := slices.Sorted(maps.Keys(res.InputRequests)); !slices.Equal(keys, []string{"passphrase"}) || !strings.HasPrefix(res.RequestState, "carmy/upstream:") {
			t.Fatalf("the caller was asked %v with state %q, want the upstream's key and its state wrapped", keys, res.RequestState)
		}
		done, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://secret", RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"passphrase": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"word": "swordfish"}}}})
		if err != nil || done.NeedsInput() || len(done.Contents) != 1 || done.Contents[0].Text != "opened with swordfish" {
			t.Fatalf("the round with the answer = %+v, %v", done, err)
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://other", RequestState: res.RequestState}); err == nil || !strings.Contains(err.Error(), "invalid request state") {
			t.Errorf("another resource's read with this state: %v; want the state refused", err)
		}
	})
}

// TestMountRoundsRefuseAForgedState: a request state changed, or made for
// another call (another prompt's arguments, another tool), is refused
// before anything reaches the upstream.
func TestMountRoundsRefuseAForgedState(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	u := roundsUpstream(&seen, &mu)
	reg := mountBuild(t, u.serveBoth(t).URL, carmy.MountSampling())
	cs := roundsCaller(t, serve(t, reg).URL, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}})
	ctx := context.Background()
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fs_brief", Arguments: map[string]string{"topic": "a"}})
	if err != nil || !prompt.NeedsInput() {
		t.Fatalf("prompt = %+v, %v", prompt, err)
	}
	tool, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}})
	if err != nil || !tool.NeedsInput() {
		t.Fatalf("tool = %+v, %v", tool, err)
	}
	answer := mcp.InputResponseMap{"audience": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"who": "x"}},
		"user_name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "x"}}}
	tampered := prompt.RequestState[:len(prompt.RequestState)-1] + "0"
	if tampered == prompt.RequestState {
		tampered = prompt.RequestState[:len(prompt.RequestState)-1] + "1"
	}
	for name, get := range map[string]*mcp.GetPromptParams{
		"tampered":       {Name: "fs_brief", Arguments: map[string]string{"topic": "a"}, RequestState: tampered},
		"other argument": {Name: "fs_brief", Arguments: map[string]string{"topic": "b"}, RequestState: prompt.RequestState},
		"a tool's state": {Name: "fs_brief", Arguments: map[string]string{"topic": "a"}, RequestState: tool.RequestState},
		"upstream's own": {Name: "fs_brief", Arguments: map[string]string{"topic": "a"}, RequestState: "brief-a"},
	} {
		get.InputResponses = answer
		if res, err := cs.GetPrompt(ctx, get); err == nil || !strings.Contains(err.Error(), "invalid request state") {
			t.Errorf("%s: prompts/get = %+v, %v; want the state refused", name, res, err)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}, RequestState: prompt.RequestState, InputResponses: answer}); err == nil {
		t.Errorf("a prompt's state in a tool call = %+v; want it refused", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Errorf("the upstream's tool ran %d times, want once (the first round; the refused one never reached it)", len(seen))
	}
}

// TestMountRoundsOfASessionCaller: a caller in a 2025-11-25 session is
// asked the upstream's questions in the middle of the call, as before.
func TestMountRoundsOfASessionCaller(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	u := roundsUpstream(&seen, &mu)
	reg := mountBuild(t, u.serveBoth(t).URL, carmy.MountSampling())
	var asked []string
	cs := mcpConnect(t, serve(t, reg).URL, "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_greet", Arguments: map[string]any{}})
	if err != nil || res.IsError || mcpText(res) != "name Ada, capital Paris" {
		t.Fatalf("call = %+v (%q), %v; want the answers given in the middle of the call", res, mcpText(res), err)
	}
	if !slices.Equal(asked, []string{"Server fs asks: Your name?"}) {
		t.Errorf("the caller was asked %q, want the upstream's question, labelled", asked)
	}
}

// TestMountSamplingInCarmysRounds: an upstream of sessions only that asks
// to sample in the middle of a call has a caller of the sessionless
// protocol asked in carmy's own round, and gets the answer when the
// caller's next round calls it again.
func TestMountSamplingInCarmysRounds(t *testing.T) {
	u := newUpstream()
	u.server.AddTool(&mcp.Tool{Name: "think", InputSchema: json.RawMessage(emptySchema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
		})
	reg := mountBuild(t, u.serveHTTP(t).URL, carmy.MountSampling())
	cs := roundsCaller(t, serve(t, reg).URL, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_think", Arguments: map[string]any{}})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round = %+v, %v; want the sampling asked", res, err)
	}
	if _, ok := res.InputRequests["question"].(*mcp.CreateMessageWithToolsParams); !ok || len(res.InputRequests) != 1 {
		t.Fatalf("the caller was asked %+v, want the sampling under carmy's name", res.InputRequests)
	}
	done, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_think", Arguments: map[string]any{}, RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"question": &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "hello"}}}})
	if err != nil || done.NeedsInput() || done.IsError || mcpText(done) != "hello" {
		t.Fatalf("the round with the answer = %+v (%q), %v; want the caller's sample", done, mcpText(done), err)
	}
}
