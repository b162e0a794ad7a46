//lint:file-ignore SA1019 the test uses MCP's logging, deprecated from 2026-07-28 on and still served.

package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// The tools of the feature tests: one that reports progress and logs, one
// whose output is content blocks, and one that asks its user.
type featureTools struct {
	mu   sync.Mutex
	runs int // runs of greet
}

type Person struct {
	Name string `json:"name" validate:"required,startswith=A"` // a rule checked at run time only
	Age  int    `json:"age" validate:"min=0"`
}

var featureContent = carmy.Content{
	carmy.Text{Text: "a chart"},
	carmy.Image{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
	carmy.Audio{Data: []byte("RIFF"), MIMEType: "audio/wav"},
	carmy.ResourceLink{URI: "file:///chart.csv", Name: "chart.csv", MIMEType: "text/csv", Size: 12},
	carmy.Resource{URI: "test://note", MIMEType: "text/plain", Text: "a note"},
	carmy.Resource{URI: "test://blob", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}},
}

func (f *featureTools) defs() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(ctx carmy.Context) (string, error) {
			ctx.Progress(1, 2, "half way")
			ctx.Log(slog.LevelInfo, "working", "step", 1)
			ctx.Log(slog.LevelDebug, "detail")
			ctx.Progress(2, 2, "done")
			return "reported", nil
		}, carmy.Read, carmy.Name("report"), carmy.Register(false)),
		carmy.Tool(func() (carmy.Content, error) { return featureContent, nil }, carmy.Read, carmy.Name("picture"), carmy.Register(false)),
		carmy.Tool(func(ctx carmy.Context) (string, error) {
			f.mu.Lock()
			f.runs++
			f.mu.Unlock()
			var p Person
			ok, err := ctx.Elicit("Who are you?", &p)
			if err != nil {
				return "", err
			}
			if !ok {
				return "declined", nil
			}
			return "hello " + p.Name, nil
		}, carmy.Read, carmy.Name("greet"), carmy.Register(false)),
	}
}

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key)
		return true
	})
	l.msgs = append(l.msgs, b.String())
	return nil
}

// TestToolFeaturesInProcess: in Go, progress does nothing, Log reaches the
// registry's logger with the execution id, Content comes back as values,
// and Elicit says nobody can be asked.
func TestToolFeaturesInProcess(t *testing.T) {
	t.Parallel()
	logs := &logRecorder{}
	f := &featureTools{}
	reg, err := carmy.New().Logger(slog.New(logs)).Tool(f.defs()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	if out, err := carmy.Invoke[string](ctx, reg, "report", nil); err != nil || out != "reported" {
		t.Fatalf("report = %q, %v", out, err)
	}
	logs.mu.Lock()
	got := strings.Join(logs.msgs, "|")
	logs.mu.Unlock()
	if !strings.Contains(got, "working step execution_id") || !strings.Contains(got, "detail execution_id") {
		t.Errorf("logged %q; want the tool's messages with their attributes and the execution id", got)
	}
	content, err := carmy.Invoke[carmy.Content](ctx, reg, "picture", nil)
	if err != nil || !reflect.DeepEqual(content, featureContent) {
		t.Errorf("picture = %#v, %v; want the blocks the tool returned", content, err)
	}
	_, err = carmy.Invoke[string](ctx, reg, "greet", nil)
	if carmy.CodeOf(err) != carmy.CodeUnavailable {
		t.Errorf("greet in process: %v; want unavailable, nobody can be asked", err)
	}
	meta, _ := reg.Lookup("picture")
	if !json.Valid(meta.OutputSchema) || !bytes.Contains(meta.OutputSchema, []byte(`"array"`)) {
		t.Errorf("picture's output schema %s", meta.OutputSchema)
	}
}

// TestContentOverHTTP: over HTTP the output is the blocks as MCP writes
// them.
func TestContentOverHTTP(t *testing.T) {
	t.Parallel()
	f := &featureTools{}
	reg := build(t, carmy.New().Tool(f.defs()...))
	srv := serve(t, reg)
	resp, err := http.Post(srv.URL+"/tools/picture", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var got struct {
		Output []map[string]any `json:"output"`
	}
	if err := json.Unmarshal(body, &got); err != nil || len(got.Output) != len(featureContent) {
		t.Fatalf("answer %s: %v", body, err)
	}
	want := []map[string]any{
		{"type": "text", "text": "a chart"},
		{"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
		{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
		{"type": "resource_link", "uri": "file:///chart.csv", "name": "chart.csv", "mimeType": "text/csv", "size": 12.0},
		{"type": "resource", "resource": map[string]any{"uri": "test://note", "mimeType": "text/plain", "text": "a note"}},
		{"type": "resource", "resource": map[string]any{"uri": "test://blob", "mimeType": "application/octet-stream", "blob": "AQID"}},
	}
	if !reflect.DeepEqual(got.Output, want) {
		t.Errorf("output %s", body)
	}
}

// TestToolFeaturesOverMCP: over MCP, in both generations, progress and
// log messages reach a client that asked for them, content blocks are the
// result's content, and Elicit asks the user.
func TestToolFeaturesOverMCP(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			f := &featureTools{}
			reg := build(t, carmy.New().Tool(f.defs()...))
			srv := serve(t, reg)
			var mu sync.Mutex
			var progress []string
			var logged []any
			answer := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "age": 36}}
			var asked *mcp.ElicitParams
			opts := &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					progress = append(progress, r.Params.Message)
				},
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					defer mu.Unlock()
					logged = append(logged, r.Params.Data)
				},
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = r.Params
					return answer, nil
				},
			}
			ctx := context.Background()
			s := mcpConnect(t, srv.URL, version, opts)
			if got := s.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("connected with %s", got)
			}
			if version < "2026-07-28" {
				if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
			}
			params := &mcp.CallToolParams{Name: "report", Meta: mcp.Meta{"progressToken": "p1", mcp.MetaKeyLogLevel: "info"}}
			if r, err := s.CallTool(ctx, params); err != nil || r.IsError {
				t.Fatalf("report: %+v, %v", r, err)
			}
			// The client hands notifications to its handlers on their own
			// goroutines: they may come after the call's result.
			wantProgress, wantLogged := []string{"half way", "done"}, []any{map[string]any{"message": "working", "step": 1.0}}
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				ok := reflect.DeepEqual(progress, wantProgress) && reflect.DeepEqual(logged, wantLogged)
				if ok || time.Now().After(deadline) {
					if !ok {
						t.Errorf("progress %q, logged %#v; want %q and %#v (the info message with its attribute, not the debug one)", progress, logged, wantProgress, wantLogged)
					}
					mu.Unlock()
					break
				}
				mu.Unlock()
			}

			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "picture"})
			if err != nil || r.IsError || len(r.Content) != len(featureContent) || r.StructuredContent != nil {
				t.Fatalf("picture: %+v, %v", r, err)
			}
			if img, ok := r.Content[1].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || !bytes.Equal(img.Data, []byte{0x89, 'P', 'N', 'G'}) {
				t.Errorf("image block %#v", r.Content[1])
			}
			if res, ok := r.Content[5].(*mcp.EmbeddedResource); !ok || !bytes.Equal(res.Resource.Blob, []byte{1, 2, 3}) {
				t.Errorf("resource block %#v", r.Content[5])
			}
			list, err := s.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range list.Tools {
				if tool.Name == "picture" && tool.OutputSchema != nil {
					t.Errorf("picture has an output schema over MCP: %v", tool.OutputSchema)
				}
			}

			r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
			if err != nil || r.IsError || structured(t, r)["result"] != "hello Ada" {
				t.Fatalf("greet: %+v, %v", r, err)
			}
			mu.Lock()
			schema, _ := json.Marshal(asked.RequestedSchema)
			mu.Unlock()
			if !strings.Contains(string(schema), `"name"`) || !strings.Contains(string(schema), `"required":["name","age"]`) {
				t.Errorf("the form's schema %s; want Person's fields", schema)
			}
			answer = &mcp.ElicitResult{Action: "decline"}
			r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
			if err != nil || structured(t, r)["result"] != "declined" {
				t.Fatalf("greet declined: %+v, %v", r, err)
			}
			answer = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bob", "age": 3}}
			r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "greet"})
			if err != nil || !r.IsError || errorObject(t, r)["code"] != "invalid_input" {
				t.Fatalf("greet with an answer that breaks a rule: %+v, %v", r, err)
			}
		})
	}
}

// TestElicitWithoutCapability: a client that cannot elicit is not asked:
// in a session it gets the tool's unavailable error; in the sessionless
// protocol the protocol's missing capability error (-32021), naming
// elicitation.
func TestElicitWithoutCapability(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			f := &featureTools{}
			reg := build(t, carmy.New().Tool(f.defs()...))
			srv := serve(t, reg)
			s := mcpConnect(t, srv.URL, version, nil)
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet"})
			if version >= "2026-07-28" {
				if err == nil || !strings.Contains(err.Error(), "missing required client capability: elicitation") {
					t.Fatalf("greet: %+v, %v; want the missing capability error", r, err)
				}
				return
			}
			if err != nil || !r.IsError || errorObject(t, r)["code"] != "unavailable" {
				t.Fatalf("greet: %+v, %v", r, err)
			}
		})
	}
}
