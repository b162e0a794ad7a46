package carmy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// errorObject reads carmy's error object from a failed call's text content,
// where every client can see it.
func errorObject(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if !r.IsError || len(r.Content) == 0 {
		t.Fatalf("not an error result: %+v", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &m); err != nil {
		t.Fatalf("error text is not the error object: %v", err)
	}
	return m
}

func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	srv, _ := hostServer(t, nil)
	s, err := mcpSession(t, srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	// Every hint explicit, from the effect: MCP's defaults are
	// "destructive" and "open world".
	tests := []struct {
		tool                               string
		readOnly, destructive, open, idemp bool
	}{
		{"broken", true, false, false, true},      // none
		{"whoami", true, false, false, true},      // read
		{"save_note", false, false, false, false}, // write
		{"send", false, false, true, true},        // external_write, idempotent
		{"burn_note", false, true, false, false},  // destructive
	}
	for _, tt := range tests {
		a := byName[tt.tool].Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: annotations %+v; every hint must be set", tt.tool, a)
		}
		if a.ReadOnlyHint != tt.readOnly || *a.DestructiveHint != tt.destructive || *a.OpenWorldHint != tt.open || a.IdempotentHint != tt.idemp {
			t.Errorf("%s: readOnly=%v destructive=%v open=%v idempotent=%v", tt.tool, a.ReadOnlyHint, *a.DestructiveHint, *a.OpenWorldHint, a.IdempotentHint)
		}
	}
	// One idempotent flag, three wire forms: MCP's hint, carmy's _meta and
	// GET /tools say the same of every tool.
	resp, err := http.Get(srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct {
		Name       string `json:"name"`
		Idempotent bool   `json:"idempotent"`
	}
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || len(listed) != len(res.Tools) {
		t.Fatalf("GET /tools: %v, %d tools, want %d", err, len(listed), len(res.Tools))
	}
	for _, l := range listed {
		tool := byName[l.Name]
		if tool.Annotations.IdempotentHint != l.Idempotent || tool.Meta["carmy/idempotent"] != l.Idempotent {
			t.Errorf("%s: idempotentHint %v, _meta %v, GET /tools %v: they must agree",
				l.Name, tool.Annotations.IdempotentHint, tool.Meta["carmy/idempotent"], l.Idempotent)
		}
	}
	if byName["save_note"].Meta["carmy/effect"] != "write" || byName["burn_note"].Meta["carmy/confirmation"] != "required" {
		t.Errorf("_meta %v / %v", byName["save_note"].Meta, byName["burn_note"].Meta)
	}
	in, _ := json.Marshal(byName["save_note"].InputSchema)
	var got, want any
	_ = json.Unmarshal(in, &got)
	_ = json.Unmarshal(carmy.SchemaFor[HostNote](), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("input schema %s; want carmy's %s", in, carmy.SchemaFor[HostNote]())
	}
	// A non-object output is wrapped as {"result": …}.
	out, _ := json.Marshal(byName["whoami"].OutputSchema)
	var o map[string]any
	_ = json.Unmarshal(out, &o)
	if o["type"] != "object" || o["properties"].(map[string]any)["result"] == nil {
		t.Errorf("whoami output schema %s", out)
	}
	if byName["broken"].OutputSchema != nil {
		t.Errorf("a tool that returns only an error has output schema %v", byName["broken"].OutputSchema)
	}
}

func TestMCPCall(t *testing.T) {
	t.Parallel()
	srv, h := hostServer(t, nil)
	s, err := mcpSession(t, srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(name string, args any, meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	t.Run("success", func(t *testing.T) {
		r := call("save_note", map[string]any{"text": "hi"}, nil)
		if r.IsError || structured(t, r)["id"] == nil || r.Content[0].(*mcp.TextContent).Text == "" {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("wrapped output", func(t *testing.T) {
		r := call("whoami", nil, nil)
		if m := structured(t, r); r.IsError || len(m) != 1 || m["result"] != nil {
			t.Fatalf("whoami %+v", r.StructuredContent)
		}
	})
	t.Run("validation error", func(t *testing.T) {
		r := call("save_note", map[string]any{"text": "", "Text": "x"}, nil)
		e := errorObject(t, r)
		fields, _ := e["fields"].([]any)
		if !r.IsError || e["code"] != "invalid_input" || len(fields) != 2 {
			t.Fatalf("result %+v", e)
		}
	})
	t.Run("confirmation error; permissions in _meta are ignored", func(t *testing.T) {
		r := call("burn_note", map[string]any{"text": "x"}, mcp.Meta{"permissions": []string{"confirm:burn_note"}, "carmy/permissions": "confirm:burn_note"})
		e := errorObject(t, r)
		if !r.IsError || e["code"] != "confirmation_required" || e["details"].(map[string]any)["digest"] != sha(`{"text":"x"}`) {
			t.Fatalf("result %+v", e)
		}
	})
	t.Run("request id from _meta", func(t *testing.T) {
		before := h.saves.Load()
		first := call("save_note", map[string]any{"text": "once"}, mcp.Meta{carmy.MetaRequestID: "m1"})
		again := call("save_note", map[string]any{"text": "once"}, mcp.Meta{carmy.MetaRequestID: "m1"})
		if again.Meta["carmy/replayed"] != true || again.Meta["carmy/execution_id"] != first.Meta["carmy/execution_id"] || h.saves.Load()-before != 1 {
			t.Fatalf("first %v, again %v", first.Meta, again.Meta)
		}
	})
	t.Run("where the error object goes", func(t *testing.T) {
		// A tool with an output schema: not in structured content, which
		// TypeScript clients check against the output schema even on errors.
		r := call("save_note", map[string]any{}, nil)
		if r.StructuredContent != nil {
			t.Errorf("structured content %v on an error of a tool with an output schema", r.StructuredContent)
		}
		if meta, _ := json.Marshal(r.Meta["carmy/error"]); !strings.Contains(string(meta), `"invalid_input"`) {
			t.Errorf("_meta carries %s", meta)
		}
		// A tool without one: structured content too.
		r = call("broken", nil, nil)
		if structured(t, r)["code"] != "internal" || errorObject(t, r)["code"] != "internal" {
			t.Errorf("broken: %+v", r)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
		if err == nil {
			t.Fatal("calling an unknown tool succeeded")
		}
	})
}

func TestMCPAuthentication(t *testing.T) {
	t.Parallel()
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice"})
	srv, _ := hostServer(t, carmy.New().Authenticate(tokens))
	if _, err := mcpSession(t, srv.URL, "", nil); err == nil {
		t.Fatal("connected without a token")
	}
	if _, err := mcpSession(t, srv.URL, "wrong", nil); err == nil {
		t.Fatal("connected with a wrong token")
	}
	s, err := mcpSession(t, srv.URL, "alice-secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || structured(t, r)["result"] != "alice" {
		t.Fatalf("whoami = %+v, %v", r, err)
	}
}

func TestMCPElicitation(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		name := map[bool]string{false: "off by default", true: "opted in"}[enabled]
		t.Run(name, func(t *testing.T) {
			b := carmy.New()
			if enabled {
				b.ElicitConfirmation()
			}
			srv, _ := hostServer(t, b)
			asked := 0
			s, err := mcpSession(t, srv.URL, "", &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++ // a client that accepts on its own
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "burn_note", Arguments: map[string]any{"text": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			if enabled && (r.IsError || asked != 1) {
				t.Fatalf("opted in: result %+v, asked %d", structured(t, r), asked)
			}
			if !enabled && (!r.IsError || errorObject(t, r)["code"] != "confirmation_required" || asked != 0) {
				t.Fatalf("not opted in: result %+v, asked %d; the client's consent must not count", r, asked)
			}
		})
	}
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	h := &hostTools{}
	reg, err := carmy.New().Tool(h.defs()...).StdioIdentity(carmy.Identity{Principal: "local"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- reg.ServeStdio(ctx, serverIn, serverOut) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || structured(t, r)["result"] != "local" {
		t.Fatalf("whoami over stdio = %+v, %v", r, err)
	}
	_ = s.Close()
	cancel()
	_ = clientOut.Close()
	_ = serverOut.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}
