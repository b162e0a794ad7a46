package carmy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

type HostNote struct {
	Text string `json:"text" validate:"required,max=20"`
}

type Saved struct {
	ID int32 `json:"id"`
}

// hostTools are the tools the serving tests use.
type hostTools struct {
	saves atomic.Int32
}

func (h *hostTools) defs() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(in HostNote) (Saved, error) { return Saved{ID: h.saves.Add(1)}, nil }, carmy.Write,
			carmy.Name("save_note"), carmy.Description("Save a note"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func(in HostNote) error { return nil }, carmy.Destructive,
			carmy.Name("burn_note"), carmy.RequireConfirmation(), carmy.Register(false)),
		carmy.Tool(func(ctx carmy.Context) (*string, error) {
			if ctx.Principal == "" {
				return nil, nil
			}
			return &ctx.Principal, nil
		}, carmy.Read, carmy.Name("whoami"), carmy.ParallelSafe(), carmy.Register(false)),
		carmy.Tool(func() error { return io.ErrUnexpectedEOF }, carmy.None, carmy.Name("broken"), carmy.Register(false)),
		carmy.Tool(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, carmy.Read,
			carmy.Name("slow"), carmy.Timeout(20*time.Millisecond), carmy.Register(false)),
		carmy.Tool(func() ([]string, error) { return nil, nil }, carmy.ExternalWrite, carmy.Name("send"), carmy.Idempotent(), carmy.Register(false)),
	}
}

func hostServer(t *testing.T, b *carmy.Builder) (*httptest.Server, *hostTools) {
	t.Helper()
	h := &hostTools{}
	if b == nil {
		b = carmy.New()
	}
	reg := build(t, b.Tool(h.defs()...))
	srv := serve(t, reg)
	return srv, h
}

func errCode(r response) string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestHTTPToolsList(t *testing.T) {
	t.Parallel()
	srv, _ := hostServer(t, nil)
	res, err := http.Get(srv.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tools []map[string]any
	if err := json.NewDecoder(res.Body).Decode(&tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool["name"].(string))
	}
	if got := strings.Join(names, ","); got != "broken,burn_note,save_note,send,slow,whoami" {
		t.Fatalf("tools %s; want them sorted by name", got)
	}
	save := tools[2]
	schema, _ := save["input_schema"].(map[string]any)
	if save["effect"] != "write" || save["description"] != "Save a note" || schema["type"] != "object" || save["parallel_safe"] != true || save["timeout_ms"] != float64(60000) {
		t.Fatalf("save_note = %v", save)
	}
	if tools[1]["confirmation"] != "required" {
		t.Fatalf("burn_note confirmation = %v", tools[1]["confirmation"])
	}
}

func TestHTTPCall(t *testing.T) {
	t.Parallel()
	srv, h := hostServer(t, carmy.New().BodyLimit(256))
	url := srv.URL + "/tools/"
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		header []string
		status int
		code   string
	}{
		{"success", "POST", "save_note", `{"text":"hi"}`, nil, 200, ""},
		{"invalid input", "POST", "save_note", `{"text":""}`, nil, 400, "invalid_input"},
		{"unknown tool", "POST", "save_nte", `{}`, nil, 404, "unknown_tool"},
		{"wrong content type", "POST", "save_note", `text=hi`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "invalid_input"},
		{"body without content type", "POST", "save_note", `{"text":"hi"}`, []string{"Content-Type", ""}, 415, "invalid_input"},
		{"empty body without content type", "POST", "whoami", ``, []string{"Content-Type", ""}, 415, "invalid_input"},
		{"body too large", "POST", "save_note", `{"text":"` + strings.Repeat("a", 300) + `"}`, nil, 413, "invalid_input"},
		{"confirmation", "POST", "burn_note", `{"text":"x"}`, nil, 403, "confirmation_required"},
		{"internal", "POST", "broken", ``, nil, 500, "internal"},
		{"timeout", "POST", "slow", ``, nil, 504, "timeout"},
		{"wrong method", "GET", "save_note", ``, nil, 405, "invalid_input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, tt.method, url+tt.path, tt.body, tt.header...)
			if res.status != tt.status || errCode(res) != tt.code {
				t.Fatalf("status %d code %q (%v); want %d %q", res.status, errCode(res), res.body, tt.status, tt.code)
			}
			if tt.status == 200 && (res.header.Get("X-Carmy-Execution-Id") == "" || res.header.Get("X-Carmy-Execution-Id") != res.body["execution_id"]) {
				t.Fatalf("execution id header %q, body %v", res.header.Get("X-Carmy-Execution-Id"), res.body)
			}
		})
	}
	t.Run("invalid input has field paths", func(t *testing.T) {
		res := do(t, "POST", url+"save_note", `{"text":"`+strings.Repeat("a", 21)+`","x":1}`)
		fields := res.body["error"].(map[string]any)["fields"].([]any)
		if len(fields) != 2 || fields[0].(map[string]any)["path"] != "x" || fields[1].(map[string]any)["path"] != "text" {
			t.Fatalf("fields %v", fields)
		}
	})
	t.Run("internal errors hide their cause", func(t *testing.T) {
		res := do(t, "POST", url+"broken", ``)
		if msg := res.body["error"].(map[string]any)["message"].(string); strings.Contains(msg, "unexpected EOF") {
			t.Fatalf("message leaks the cause: %s", msg)
		}
	})
	t.Run("confirmation details carry the digest", func(t *testing.T) {
		res := do(t, "POST", url+"burn_note", `{"text":"x"}`)
		d := res.body["error"].(map[string]any)["details"].(map[string]any)
		if d["digest"] != sha(`{"text":"x"}`) {
			t.Fatalf("details %v", d)
		}
	})
	t.Run("idempotency key", func(t *testing.T) {
		before := h.saves.Load()
		first := do(t, "POST", url+"save_note", `{"text":"once"}`, "Idempotency-Key", "k1")
		again := do(t, "POST", url+"save_note", `{ "text" : "once" }`, "Idempotency-Key", "k1")
		other := do(t, "POST", url+"save_note", `{"text":"twice"}`, "Idempotency-Key", "k1")
		if first.body["replayed"] != false || again.body["replayed"] != true || again.body["execution_id"] != first.body["execution_id"] {
			t.Fatalf("first %v, again %v", first.body, again.body)
		}
		if other.status != 409 || errCode(other) != "conflict" {
			t.Fatalf("reuse with another input: %d %v", other.status, other.body)
		}
		if n := h.saves.Load() - before; n != 1 {
			t.Fatalf("%d executions; want 1", n)
		}
	})
	t.Run("output null and empty list", func(t *testing.T) {
		if res := do(t, "POST", url+"whoami", ``); res.status != 200 || res.body["output"] != nil {
			t.Fatalf("whoami %v", res.body)
		}
		if res := do(t, "POST", url+"send", ``); res.status != 200 || res.body["output"] == nil {
			t.Fatalf("send %v; a nil slice must be []", res.body)
		}
	})
	t.Run("healthz and unknown paths", func(t *testing.T) {
		if res := do(t, "GET", srv.URL+"/healthz", ``); res.status != 200 || res.body["status"] != "ok" {
			t.Fatalf("healthz %v", res)
		}
		if res := do(t, "GET", srv.URL+"/nope", ``); res.status != 404 {
			t.Fatalf("unknown path %d", res.status)
		}
	})
}

func TestHTTPAuthentication(t *testing.T) {
	t.Parallel()
	tokens := carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("alice-secret"), Principal: "alice", Permissions: []string{"confirm:burn_note"}},
		carmy.Token{SHA256: carmy.HashToken("bob-secret"), Principal: "bob"},
	)
	srv, _ := hostServer(t, carmy.New().Authenticate(tokens))
	url := srv.URL + "/tools/"
	tests := []struct {
		name   string
		path   string
		header []string
		status int
		output any
	}{
		{"no token", "whoami", nil, 401, nil},
		{"wrong token", "whoami", []string{"Authorization", "Bearer nope"}, 401, nil},
		{"not bearer", "whoami", []string{"Authorization", "Basic YWxpY2U6c2VjcmV0"}, 401, nil},
		{"alice", "whoami", []string{"Authorization", "Bearer alice-secret"}, 200, "alice"},
		{"bob", "whoami", []string{"Authorization", "bearer bob-secret"}, 200, "bob"},
		{"forged identity headers are ignored", "whoami", []string{"Authorization", "Bearer bob-secret", "X-Carmy-Identity-Ref", "alice", "X-Carmy-Principal", "alice"}, 200, "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, "POST", url+tt.path, ``, tt.header...)
			if res.status != tt.status {
				t.Fatalf("status %d (%v); want %d", res.status, res.body, tt.status)
			}
			if tt.status == 401 && (errCode(res) != "unauthenticated" || res.header.Get("WWW-Authenticate") == "") {
				t.Fatalf("401 without code or challenge: %v %v", res.body, res.header)
			}
			if tt.status == 200 && res.body["output"] != tt.output {
				t.Fatalf("output %v; want %v", res.body["output"], tt.output)
			}
		})
	}
	t.Run("permissions come from the token only", func(t *testing.T) {
		if res := do(t, "POST", url+"burn_note", `{"text":"x"}`, "Authorization", "Bearer bob-secret", "X-Carmy-Permissions", "confirm:burn_note"); res.status != 403 {
			t.Fatalf("bob burned a note: %d %v", res.status, res.body)
		}
		if res := do(t, "POST", url+"burn_note", `{"text":"x"}`, "Authorization", "Bearer alice-secret"); res.status != 200 {
			t.Fatalf("alice was refused: %d %v", res.status, res.body)
		}
	})
	t.Run("tool list needs a token too", func(t *testing.T) {
		if res := do(t, "GET", srv.URL+"/tools", ``); res.status != 401 {
			t.Fatalf("status %d", res.status)
		}
	})
}
