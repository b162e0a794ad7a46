package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// WireNote is the input of the tools of TestToolsWireForm.
type WireNote struct {
	Text string `json:"text" jsonschema:"description=the note <b>as typed</b> & kept"`
}

// TestToolsWireForm keeps GET /tools byte for byte as a golden file
// (testdata/tools.golden, rewritten with -update): the JSON form of
// [carmy.ToolMetadata], field order and escaping included, which clients
// and the command decode. Every tool's metadata reads back from it as the
// registry publishes it.
func TestToolsWireForm(t *testing.T) {
	t.Parallel()
	save := func(context.Context, WireNote) (string, error) { return "", nil }
	writer := carmy.Identity{Principal: "agent", Permissions: []string{"notes:write"}}
	reg, err := carmy.New().Authenticate(carmy.AuthenticatorFunc(func(*http.Request) (carmy.Identity, error) {
		return writer, nil
	})).Tool(
		carmy.Tool(save, carmy.Write, carmy.Name("save_note"), carmy.Description("Save a note <b>now</b> & then\u2028twice"),
			carmy.Timeout(90*time.Second), carmy.Requires("notes:write"), carmy.Register(false)),
		carmy.Tool(save, carmy.Destructive, carmy.Name("burn_note"), carmy.RequireConfirmation(), carmy.Idempotent(),
			carmy.Tasks(carmy.TaskRequired), carmy.Register(false)),
		carmy.Tool(save, carmy.Read, carmy.Name("read_note"), carmy.ParallelSafe(), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := serve(t, reg)
	res, err := http.Get(srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /tools = %d %s, %v", res.StatusCode, body, err)
	}
	const golden = "testdata/tools.golden"
	if *update {
		if err := os.WriteFile(golden, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("GET /tools =\n%s\nwant (%s)\n%s", body, golden, want)
	}

	var tools []carmy.ToolMetadata
	if err := json.Unmarshal(body, &tools); err != nil {
		t.Fatal(err)
	}
	published := reg.ToolsFor(context.Background(), writer)
	if len(tools) != len(published) {
		t.Fatalf("GET /tools lists %d tools; the registry publishes %d", len(tools), len(published))
	}
	for i, got := range tools {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(published[i])
		if !bytes.Equal(a, b) || got.Timeout != published[i].Timeout || got.Tasks != published[i].Tasks {
			t.Errorf("tool %d reads back as %s; the registry publishes %s", i, a, b)
		}
	}
}

// TestCallDocumentBytes pins the bytes of the answers of POST
// /tools/{name}, which the command reads: a result, a replayed one, and
// an error with its fields and details.
func TestCallDocumentBytes(t *testing.T) {
	t.Parallel()
	type In struct {
		Fail bool `json:"fail"`
	}
	fn := func(_ context.Context, in In) (map[string]string, error) {
		if in.Fail {
			return nil, &carmy.Error{Code: carmy.CodeInvalidInput, Message: "the note is <bad>",
				Fields: []carmy.FieldError{{Path: "note", Message: "must not be empty"}}, Details: map[string]any{"b": 2, "a": "x"}}
		}
		return map[string]string{"note": "kept <b>é</b>"}, nil
	}
	srv := serve(t, build(t, carmy.New().Tool(carmy.Tool(fn, carmy.Write, carmy.Name("note"), carmy.Idempotent(), carmy.Register(false)))))
	stamps := regexp.MustCompile(`"execution_id":"[^"]*"`)
	for _, tt := range []struct{ input, key, want string }{
		{`{"fail":false}`, "k1", `{"execution_id":"·","output":{"note":"kept <b>é</b>"},"replayed":false}`},
		{`{"fail":false}`, "k1", `{"execution_id":"·","output":{"note":"kept <b>é</b>"},"replayed":true}`},
		{`{"fail":true}`, "", `{"error":{"code":"invalid_input","message":"the note is <bad>","fields":[{"path":"note","message":"must not be empty"}],"details":{"a":"x","b":2},"retryable":false}}`},
	} {
		_, raw := roundTrip(t, http.DefaultClient, "POST", srv.URL+"/tools/note", tt.input, "Idempotency-Key", tt.key)
		if got := stamps.ReplaceAllString(string(raw), `"execution_id":"·"`); got != tt.want+"\n" {
			t.Errorf("POST /tools/note %s =\n%s\nwant\n%s", tt.input, got, tt.want)
		}
	}
}

// TestErrorDocumentOnEveryDoor: the error object is the same document on
// every door, though two types write it: the registry's [carmy.Error] on
// MCP, and the HTTP door's own, which the registry converts it to in one
// place (the door cannot import the registry, which serves it).
func TestErrorDocumentOnEveryDoor(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, struct{}) (string, error) {
		return "", &carmy.Error{Code: carmy.CodeConflict, Message: "the note <changed>",
			Fields:  []carmy.FieldError{{Path: "note", Message: "was changed"}, {Path: "", Message: "and more"}},
			Details: map[string]any{"b": 2.5, "a": []any{"x", true}, "execution_id": "e1"}, Retryable: true}
	}
	reg := build(t, carmy.New().Logger(quietLogger()).Tool(carmy.Tool(fn, carmy.Write, carmy.Name("note"), carmy.Description("Notes."), carmy.Register(false))))
	_, raw := roundTrip(t, http.DefaultClient, "POST", serve(t, reg).URL+"/tools/note", `{}`)
	var overHTTP struct{ Error any }
	if err := json.Unmarshal(raw, &overHTTP); err != nil || overHTTP.Error == nil {
		t.Fatalf("POST /tools/note = %s; want an error", raw)
	}
	res, err := singleClient(t, reg, "memory", "", nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "note", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("tools/call = %v, %v; want an error", res, err)
	}
	var overMCP any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &overMCP); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(overHTTP.Error, overMCP) {
		t.Errorf("the error over HTTP\n%v\nover MCP\n%v", overHTTP.Error, overMCP)
	}
}
