package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

type Secret struct {
	Password string `json:"password" validate:"required"`
}

func TestMiddlewareSeesEveryOutcome(t *testing.T) {
	t.Parallel()
	var seen []string
	record := func(label string) carmy.Middleware {
		return func(next carmy.CallFunc) carmy.CallFunc {
			return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
				seen = append(seen, label+">")
				res, err := next(ctx, req)
				seen = append(seen, "<"+label+":"+string(carmy.CodeOf(err))+":"+req.Call.RequestID)
				if label == "outer" && err == nil && (req.ExecutionID != res.ExecutionID || req.Replayed != res.Replayed) {
					t.Errorf("request says %s replayed=%v, result says %s replayed=%v", req.ExecutionID, req.Replayed, res.ExecutionID, res.Replayed)
				}
				return res, err
			}
		}
	}
	c := &counter{}
	reg := counterRegistry(t, c, carmy.New().Use(record("outer"), record("inner")))
	_, _ = reg.Execute(context.Background(), carmy.Call{Tool: "nope"}) // not found: no middleware
	_, _ = place(reg, `{"sku":1}`, "bad", "")                          // refusal
	first, _ := place(reg, `{"sku":"A","quantity":1}`, "r1", "")       // execution
	again, _ := place(reg, `{"sku":"A","quantity":1}`, "r1", "")       // replay
	want := "outer> inner> <inner:invalid_input:bad <outer:invalid_input:bad outer> inner> <inner::r1 <outer::r1 outer> inner> <inner::r1 <outer::r1"
	if got := strings.Join(seen, " "); got != want {
		t.Fatalf("middleware saw\n%s\nwant\n%s", got, want)
	}
	if !again.Replayed || again.ExecutionID != first.ExecutionID {
		t.Fatalf("replay = %+v, first = %+v", again, first)
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	read := carmy.Tool(func() error { runs.Add(1); return nil }, carmy.Read, carmy.Name("read"), carmy.Register(false))
	write := carmy.Tool(func() error { runs.Add(1); return nil }, carmy.Write, carmy.Name("write"), carmy.Register(false))
	var gotPrincipal string
	policy := func(c carmy.Context, m carmy.ToolMetadata) error {
		gotPrincipal = c.Principal
		if c.Permissions.Has("suspended") {
			return carmy.Errorf(carmy.CodeUnauthenticated, "account suspended")
		}
		if !m.Effect.ReadOnly() && !c.Permissions.Has("write") {
			return errors.New("this session may only read")
		}
		return nil
	}
	reg, err := carmy.New().Tool(read, write).Authorize(policy).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tests := []struct {
		tool  string
		perms []string
		code  carmy.Code
	}{
		{"read", nil, ""},
		{"write", nil, carmy.CodePermissionDenied},
		{"write", []string{"write"}, ""},
		{"read", []string{"suspended"}, carmy.CodeUnauthenticated},
	}
	for _, tt := range tests {
		before := runs.Load()
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: tt.tool, Principal: "alice", Permissions: tt.perms})
		if carmy.CodeOf(err) != tt.code {
			t.Errorf("%s %v: err = %v; want %q", tt.tool, tt.perms, err, tt.code)
		}
		if ran := runs.Load() > before; ran != (tt.code == "") {
			t.Errorf("%s %v: ran = %v", tt.tool, tt.perms, ran)
		}
	}
	if gotPrincipal != "alice" {
		t.Fatalf("policy saw principal %q", gotPrincipal)
	}
}

func TestLogging(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	tool := carmy.Tool(func(in Secret) error { return nil }, carmy.Write, carmy.Name("login"), carmy.Register(false))
	reg, err := carmy.New().Tool(tool).Use(carmy.Logging(logger)).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res, err := reg.Execute(context.Background(), carmy.Call{Tool: "login", Input: []byte(`{"password":"hunter2"}`), RequestID: "r1", Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = reg.Execute(context.Background(), carmy.Call{Tool: "login", Input: []byte(`{"password":""}`), Principal: "alice"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log records; want one per call:\n%s", len(lines), buf.String())
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Fatal("the log contains an input value")
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"execution_id": res.ExecutionID, "request_id": "r1", "tool": "login", "effect": "write", "principal": "alice", "code": "ok", "replayed": false} {
		if rec[k] != v {
			t.Errorf("%s = %v; want %v", k, rec[k], v)
		}
	}
	if _, ok := rec["duration"]; !ok {
		t.Error("no duration")
	}
	if !strings.Contains(lines[1], `"code":"invalid_input"`) || !strings.Contains(lines[1], `"level":"WARN"`) {
		t.Errorf("refusal logged as %s", lines[1])
	}
}

// Middleware sees every outcome of a found tool, whatever refused it: a
// malformed request id is refused inside the chain, as an invalid input is.
func TestMiddlewareSeesEveryRefusal(t *testing.T) {
	t.Parallel()
	var seen []string
	note := func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			res, err := next(ctx, req)
			seen = append(seen, req.Tool.Name+" "+string(carmy.CodeOf(err)))
			return res, err
		}
	}
	reg, err := carmy.New().Use(note).
		Tool(carmy.Tool(func(in Target) (string, error) { return in.ID, nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, c := range []carmy.Call{
		{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`), RequestID: "bad id"},
		{Tool: "edit", Input: json.RawMessage(`{}`)},
		{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"},
		{Tool: "nope"},
	} {
		reg.Execute(context.Background(), c)
	}
	if got, want := strings.Join(seen, ", "), "edit invalid_input, edit invalid_input, edit "; got != want {
		t.Fatalf("middleware saw %q, want %q (an unknown tool has no chain)", got, want)
	}
}
