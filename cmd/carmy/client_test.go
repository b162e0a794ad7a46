package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

// The tools of the test server.
type (
	AddInput struct {
		A int `json:"a" validate:"min=0"`
		B int `json:"b" validate:"min=0"`
	}
	AddOutput struct {
		Sum int `json:"sum"`
	}
	DropInput struct {
		Table string `json:"table" validate:"required"`
	}
)

var drops atomic.Int64

func add(ctx context.Context, in AddInput) (AddOutput, error) {
	return AddOutput{Sum: in.A + in.B}, nil
}

func dropTable(ctx context.Context, in DropInput) error { drops.Add(1); return nil }

func fail(ctx context.Context) error {
	return &carmy.Error{Code: carmy.CodeNotFound, Message: "nothing here", Details: map[string]any{"id": 7}}
}

// testServer serves a registry through its Handler, with a bearer token
// when token is not "".
func testServer(t *testing.T, token string) string {
	t.Helper()
	b := carmy.New().Tool(
		carmy.Tool(add, carmy.None, carmy.Idempotent(), carmy.ParallelSafe(), carmy.Register(false),
			carmy.Description("Add two numbers.\nA second line that the table leaves out.")),
		carmy.Tool(dropTable, carmy.Destructive, carmy.RequireConfirmation(), carmy.Register(false)),
		carmy.Tool(fail, carmy.Read, carmy.Register(false)),
	)
	if token != "" {
		b.Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(token), Principal: "tester", Permissions: []string{"confirm:drop_table"}}))
	}
	return serve(t, b)
}

// carmyRun runs carmy in process and returns the exit status and output.
func carmyRun(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestTools(t *testing.T) {
	url := testServer(t, "")
	code, stdout, stderr := carmyRun("tools", url)
	if code != 0 {
		t.Fatalf("carmy tools: exit %d\n%s", code, stderr)
	}
	want := []string{
		"NAME        EFFECT       FLAGS                DESCRIPTION",
		"add         none         idempotent,parallel  Add two numbers.",
		"drop_table  destructive  confirm              ",
		"fail        read         idempotent           ",
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("carmy tools:\n%s", stdout)
	}
	for i := range want {
		if strings.TrimRight(lines[i], " ") != strings.TrimRight(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}

	// --json gives the server's answer, schemas included; flags may follow
	// the URL; a URL ending in /tools is taken as meant.
	code, stdout, _ = carmyRun("tools", url+"/tools/", "--json")
	var tools []map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &tools) != nil || len(tools) != 3 || tools[0]["input_schema"] == nil {
		t.Errorf("carmy tools --json: exit %d\n%s", code, stdout)
	}
}

func TestCall(t *testing.T) {
	url := testServer(t, "")

	code, stdout, stderr := carmyRun("call", url, "add", `{"a":2,"b":3}`)
	if code != 0 || stdout != "{\n  \"sum\": 5\n}\n" {
		t.Errorf("carmy call add: exit %d\nstdout: %q\nstderr: %s", code, stdout, stderr)
	}

	// Without JSON the input is {}.
	code, stdout, stderr = carmyRun("call", url, "add")
	if code != 1 || !strings.Contains(stderr, "error: invalid_input:") {
		t.Errorf("carmy call add without input: exit %d\n%s%s", code, stdout, stderr)
	}

	// An invalid input: the code, the message, each field's path and message.
	code, stdout, stderr = carmyRun("call", url, "add", `{"a":-1,"c":1}`)
	if code != 1 || stdout != "" {
		t.Errorf("carmy call with invalid input: exit %d, stdout %q", code, stdout)
	}
	for _, w := range []string{"error: invalid_input: ", "\n  a: ", "\n  b: ", "\n  c: "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("carmy call with invalid input: no %q in:\n%s", w, stderr)
		}
	}

	// A tool's error, with its details.
	code, _, stderr = carmyRun("call", url, "fail")
	if code != 1 || !strings.Contains(stderr, "error: not_found: nothing here\n") || !strings.Contains(stderr, "details.id: 7") {
		t.Errorf("carmy call fail: exit %d\n%s", code, stderr)
	}

	// An unknown tool.
	code, _, stderr = carmyRun("call", url, "ad", "{}")
	if code != 1 || !strings.Contains(stderr, "error: unknown_tool:") {
		t.Errorf("carmy call ad: exit %d\n%s", code, stderr)
	}

	// --json prints the answer as it came, errors included.
	code, stdout, _ = carmyRun("call", "--json", url, "add", `{"a":1,"b":1}`)
	var res struct {
		ExecutionID string          `json:"execution_id"`
		Output      json.RawMessage `json:"output"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.ExecutionID == "" || string(res.Output) != `{"sum":2}` {
		t.Errorf("carmy call --json: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = carmyRun("call", url, "fail", "--json")
	if code != 1 || !strings.Contains(stdout, `"code":"not_found"`) {
		t.Errorf("carmy call --json with an error: exit %d\n%s", code, stdout)
	}

	// Bad arguments are usage errors.
	for _, args := range [][]string{
		{"call", url},
		{"call", url, "add", "{", "x"},
		{"call", url, "add", "{not json"},
		{"call", "ftp://example.com", "add"},
		{"call", "--nope", url, "add"},
	} {
		if code, _, stderr := carmyRun(args...); code != 2 {
			t.Errorf("carmy %s: exit %d, want 2\n%s", strings.Join(args, " "), code, stderr)
		}
	}
}

func TestCallTokenAndIdempotencyKey(t *testing.T) {
	url := testServer(t, "s3cret")

	t.Setenv("CARMY_TOKEN", "")
	// A 401 says how this command sends a token, and whether it sent one.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tools", url}, "pass --token <token>, or set CARMY_TOKEN"},
		{[]string{"call", url, "add", `{"a":1,"b":2}`}, "pass --token <token>, or set CARMY_TOKEN"},
		{[]string{"tools", "--token", "wrong", url}, "refused the bearer token sent (from --token or CARMY_TOKEN)"},
	} {
		code, _, stderr := carmyRun(tt.args...)
		if code != 1 || !strings.Contains(stderr, "error: unauthenticated:") || !strings.Contains(stderr, tt.want) {
			t.Errorf("carmy %s: exit %d, want 1 and %q\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
		}
	}
	if code, _, stderr := carmyRun("tools", "--token", "s3cret", url); code != 0 {
		t.Errorf("carmy tools --token: exit %d\n%s", code, stderr)
	}
	t.Setenv("CARMY_TOKEN", "s3cret")
	if code, _, stderr := carmyRun("tools", url); code != 0 {
		t.Errorf("carmy tools with CARMY_TOKEN: exit %d\n%s", code, stderr)
	}

	// The same key and input replay the first outcome: one execution.
	before := drops.Load()
	for i := range 2 {
		code, stdout, stderr := carmyRun("call", url, "drop_table", `{"table":"t"}`, "--idempotency-key", "k-1")
		if code != 0 || stdout != "null\n" {
			t.Errorf("call %d: exit %d\n%s%s", i, code, stdout, stderr)
		}
		if replayed := strings.Contains(stderr, "replayed"); replayed != (i == 1) {
			t.Errorf("call %d: replayed %v\n%s", i, replayed, stderr)
		}
	}
	if n := drops.Load() - before; n != 1 {
		t.Errorf("drop_table ran %d times, want 1", n)
	}
}

// TestCallOtherServer checks the answer of something that is not a carmy
// server.
func TestCallOtherServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot here", http.StatusTeapot)
	}))
	defer srv.Close()
	code, _, stderr := carmyRun("call", srv.URL, "add", "{}")
	if code != 1 || !strings.Contains(stderr, "418 I'm a teapot: teapot here") {
		t.Errorf("carmy call on another server: exit %d\n%s", code, stderr)
	}
	code, _, stderr = carmyRun("tools", srv.URL)
	if code != 1 || !strings.Contains(stderr, "418") {
		t.Errorf("carmy tools on another server: exit %d\n%s", code, stderr)
	}
	srv.Close()
	if code, _, _ := carmyRun("tools", srv.URL); code != 1 {
		t.Errorf("carmy tools on a closed server: exit %d", code)
	}
}

func TestEndpointURL(t *testing.T) {
	for _, c := range []struct{ base, want string }{
		{"http://h:1", "http://h:1/tools/a%2Fb"},
		{"http://h:1/", "http://h:1/tools/a%2Fb"},
		{"http://h:1/tools", "http://h:1/tools/a%2Fb"},
		{"https://h/agent/", "https://h/agent/tools/a%2Fb"},
		{"http://h/x?y=1", "http://h/x/tools/a%2Fb?y=1"},
	} {
		got, err := endpointURL(c.base, "tools", "a/b")
		if err != nil || got != c.want {
			t.Errorf("endpointURL(%q) = %q, %v; want %q", c.base, got, err, c.want)
		}
	}
}

// TestToolsForCaller: carmy tools lists what the token's holder may call,
// with the permissions each needs.
func TestToolsForCaller(t *testing.T) {
	run := func(context.Context, AddInput) (AddOutput, error) { return AddOutput{}, nil }
	url := serve(t, carmy.New().Tool(
		carmy.Tool(run, carmy.Read, carmy.Name("look"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(run, carmy.Write, carmy.Name("edit"), carmy.Register(false)),
		carmy.Tool(run, carmy.None, carmy.Name("wipe"), carmy.Requires("admin"), carmy.Register(false)),
	).EffectPermissions(map[carmy.Effect]string{carmy.Read: "tools:read", carmy.Write: "tools:write"}).
		Authenticate(carmy.BearerTokens(
			carmy.Token{SHA256: carmy.HashToken("reader"), Principal: "r", Permissions: []string{"tools:read"}},
			carmy.Token{SHA256: carmy.HashToken("nobody"), Principal: "n"},
		)))

	code, stdout, stderr := carmyRun("tools", "--token", "reader", url)
	want := "NAME  EFFECT  FLAGS                REQUIRES    DESCRIPTION\nlook  read    idempotent,parallel  tools:read\n"
	if code != 0 || strings.ReplaceAll(stdout, "  \n", "\n") != want {
		t.Errorf("carmy tools as a reader: exit %d\n%q\nwant\n%q\n%s", code, stdout, want, stderr)
	}
	code, stdout, _ = carmyRun("tools", "--token", "nobody", url)
	if code != 0 || stdout != "The server has no tools that this caller may call.\n" {
		t.Errorf("carmy tools as nobody: exit %d\n%s", code, stdout)
	}
}
