package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

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
