package carmy_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// ownInput has what a JSON library may write differently from the schema:
// an inline member, a byte array and durations.
type ownInput struct {
	Page    ownPage       `json:",inline"`
	IP      [4]byte       `json:"ip"`
	Wait    time.Duration `json:"wait"`
	Backoff []time.Duration
}

type ownPage struct {
	Offset int `json:"offset"`
}

func echoOwn(_ context.Context, in ownInput) (ownInput, error) { return in, nil }

func TestInvokeOwnTypes(t *testing.T) {
	reg, err := carmy.New().Tool(carmy.Tool(echoOwn, carmy.Read, carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	in := ownInput{Page: ownPage{Offset: 3}, IP: [4]byte{10, 0, 0, 1}, Wait: 1500 * time.Millisecond, Backoff: []time.Duration{time.Second, time.Hour}}
	for _, input := range []any{in, &in} {
		out, err := carmy.Invoke[ownInput](context.Background(), reg, "echo_own", input)
		if err != nil {
			t.Fatalf("Invoke with %T: %v", input, err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Errorf("Invoke with %T = %+v, want %+v", input, out, in)
		}
	}
	res, err := reg.Execute(context.Background(), carmy.Call{Tool: "echo_own", Input: json.RawMessage(`{"offset":1,"ip":[1,2,3,4],"wait":"1h30m","Backoff":["250ms"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"offset":1,"ip":[1,2,3,4],"wait":"1h30m0s","Backoff":["250ms"]}`; string(res.Output) != want {
		t.Errorf("output %s, want %s", res.Output, want)
	}
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "echo_own", Input: json.RawMessage(`{"offset":1,"ip":[1,2,3,4],"wait":5,"Backoff":["1d"]}`)})
	e, _ := err.(*carmy.Error)
	if e == nil || len(e.Fields) != 2 || e.Fields[0].Path != "wait" || e.Fields[1].Path != "Backoff[0]" || !strings.Contains(e.Fields[1].Message, `"1h30m"`) {
		t.Errorf("bad durations: %v", err)
	}
}

func TestToolMetadataJSON(t *testing.T) {
	m := carmy.ToolMetadata{Name: "x", Effect: carmy.Read, Timeout: 90 * time.Second, InputSchema: json.RawMessage(`{"type":"object"}`)}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if fields["timeout_ms"] != float64(90000) || fields["timeout"] != nil || fields["Timeout"] != nil {
		t.Errorf("json.Marshal(ToolMetadata) = %s; want timeout_ms 90000 and no other timeout", b)
	}
	var back carmy.ToolMetadata
	if err := json.Unmarshal(b, &back); err != nil || back.Timeout != m.Timeout || back.Name != "x" || back.Effect != carmy.Read {
		t.Errorf("json.Unmarshal(%s) = %+v, %v", b, back, err)
	}
}

func greet(_ context.Context, in struct {
	Name string `json:"name"`
}) (string, error) {
	return "Hello, \"" + in.Name + "\"\n", nil
}

// A string output over MCP is the text block itself; its structured
// content keeps the JSON.
func TestMCPStringOutput(t *testing.T) {
	reg, err := carmy.New().Tool(carmy.Tool(greet, carmy.Read, carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() { srv.Close(); _ = reg.Close() }) // after the session's own cleanup
	s, err := mcpSession(t, srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ann"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := r.Content[0].(*mcp.TextContent).Text; text != "Hello, \"Ann\"\n" {
		t.Errorf("text block %q, want the string itself", text)
	}
	if m := structured(t, r); m["result"] != "Hello, \"Ann\"\n" {
		t.Errorf("structured content %v", r.StructuredContent)
	}
}
