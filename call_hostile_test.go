package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/corpus"
	"github.com/carmy-dev/carmy/store"
)

// hrRule is how a refused request id names the rule it broke.
const hrRule = "1 to 255 printable ASCII characters (! to ~)"

// TestHostileRequestIDs: a request id is 1 to 255 bytes of printable
// ASCII, '!' to '~', whatever the transport; anything else is refused as
// invalid_input naming the rule, before anything runs, without echoing it.
func TestHostileRequestIDs(t *testing.T) {
	t.Parallel()
	printable := make([]byte, 0, 94)
	for c := byte('!'); c <= '~'; c++ {
		printable = append(printable, c)
	}
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"none", "", true},
		{"one byte", "a", true},
		{"a UUID", "0190d6e2-58f0-7b4e-9f3a-2c5d8e1f4a6b", true},
		{"every printable character", string(printable), true},
		{"255 bytes", strings.Repeat("k", 255), true},
		{"256 bytes", strings.Repeat("k", 256), false},
		{"60 KB", strings.Repeat("k", 60_000), false},
		{"4 MB", strings.Repeat("k", 4<<20), false},
		{"a space", "a b", false},
		{"only a space", " ", false},
		{"a tab", "a\tb", false},
		{"a NUL", "a\x00b", false},
		{"a line break (log injection)", "id\r\nlevel=ERROR msg=forged", false},
		{"DEL", "a\x7f", false},
		{"UTF-8", "café", false},
		{"invalid UTF-8", "a\xff", false},
	}
	var runs atomic.Int32
	var seen atomic.Int32 // calls that passed the middleware
	tool := carmy.Tool(func() error { runs.Add(1); return nil }, carmy.Write, carmy.Name("rid"), carmy.ParallelSafe(), carmy.Register(false))
	count := func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			seen.Add(1)
			return next(ctx, req)
		}
	}
	reg := rtRegistry(t, carmy.New().Tool(tool).Use(count))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runsBefore, seenBefore := runs.Load(), seen.Load()
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "rid", RequestID: tt.id})
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := rtError(t, err, carmy.CodeInvalidInput)
			if !strings.Contains(e.Message, hrRule) {
				t.Errorf("message %q does not name the rule", e.Message)
			}
			if len(e.Error()) > 512 || (len(tt.id) > 3 && strings.Contains(e.Error(), tt.id[:len(tt.id)-1])) {
				t.Errorf("the refusal echoes the request id: %.300q", e.Error())
			}
			if runs.Load() != runsBefore {
				t.Errorf("the call ran")
			}
			// A refusal of a found tool passes the middleware (and the
			// audit), as every other refusal does.
			if seen.Load() != seenBefore+1 {
				t.Errorf("middleware saw the refusal %d times, want once", seen.Load()-seenBefore)
			}
			if e.Retryable {
				t.Error("retryable: sending the same id again cannot succeed")
			}
			// Typed callers too.
			if _, err := carmy.Invoke[any](context.Background(), reg, "rid", nil, carmy.WithRequestID(tt.id)); carmy.CodeOf(err) != carmy.CodeInvalidInput {
				t.Errorf("Invoke: %v", err)
			}
		})
	}
}

// TestHostileRequestIDOverHTTP: the Idempotency-Key header keeps the same
// rule, answered with 400.
func TestHostileRequestIDOverHTTP(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	tool := carmy.Tool(func() error { runs.Add(1); return nil }, carmy.Write, carmy.Name("rid"), carmy.ParallelSafe(), carmy.Register(false))
	reg := rtRegistry(t, carmy.New().Tool(tool))
	srv := serve(t, reg)
	for _, id := range []string{strings.Repeat("k", 256), strings.Repeat("k", 60_000), "a b", "café"} {
		res, body := roundTrip(t, nil, http.MethodPost, srv.URL+"/tools/rid", `{}`, "Idempotency-Key", id)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), hrRule) || len(body) > 1024 {
			t.Errorf("id of %d bytes: status %d, body %.300s", len(id), res.StatusCode, body)
		}
	}
	if runs.Load() != 0 {
		t.Fatal("a call with an invalid request id ran")
	}
}

type hrDigestLine struct {
	Note *string `json:"note"`
	Qty  int     `json:"qty,omitempty"`
}

type hrDigestIn struct {
	Text  string             `json:"text"`
	Tag   *string            `json:"tag"`
	N     float64            `json:"n,omitempty"`
	Big   uint64             `json:"big,omitempty"`
	Raw   json.RawMessage    `json:"raw,omitempty"`
	Any   any                `json:"any,omitempty"`
	Lines []hrDigestLine     `json:"lines,omitempty"`
	Inner *hrDigestLine      `json:"inner,omitempty"`
	Notes map[string]*string `json:"notes,omitempty"`
}

// TestHostileDigest: the confirmation digest, which request ids compare
// too, is one per validated input: an optional member sent as null is the
// member left out, notation and order do not count, and every number is
// kept exact, never rounded to float64.
func TestHostileDigest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"null optional pointer is absent", `{"text":"x","tag":null}`, `{"text":"x"}`, true},
		{"null optional pointer deep in an array", `{"text":"x","lines":[{"note":null,"qty":2}]}`, `{"text":"x","lines":[{"qty":2}]}`, true},
		{"null optional pointer in a nested object", `{"text":"x","inner":{"note":null}}`, `{"text":"x","inner":{}}`, true},
		{"null optional struct pointer", `{"text":"x","inner":null}`, `{"text":"x"}`, true},
		{"null optional any", `{"text":"x","any":null}`, `{"text":"x"}`, true},
		{"a null map value is a value", `{"text":"x","notes":{"a":null}}`, `{"text":"x","notes":{}}`, false},
		{"empty string is not null", `{"text":"x","tag":""}`, `{"text":"x"}`, false},
		{"key order and white space", `{"tag":"t","text":"x"}`, " {\n \"text\" : \"x\" ,\t\"tag\":\"t\"}", true},
		{"string escapes", `{"text":"\u0078\u00e9"}`, `{"text":"xé"}`, true},
		{"1, 1.0, 1e0 in a float", `{"text":"x","n":1.0}`, `{"text":"x","n":1e0}`, true},
		{"10e-1 is 1", `{"text":"x","n":10e-1}`, `{"text":"x","n":1}`, true},
		{"exact float, not rounded", `{"text":"x","n":1000000}`, `{"text":"x","n":1000000.000000000001}`, false},
		{"exact raw, not rounded", `{"text":"x","raw":1000000}`, `{"text":"x","raw":1000000.000000000001}`, false},
		{"raw notation", `{"text":"x","raw":{"b":1.50,"a":[2e0]}}`, `{"text":"x","raw":{"a":[2],"b":1.5}}`, true},
		{"exact any, not rounded", `{"text":"x","any":0.1}`, `{"text":"x","any":0.1000000000000000000001}`, false},
		{"big integers beyond 2^53 in any", `{"text":"x","any":18446744073709551615}`, `{"text":"x","any":18446744073709551614}`, false},
		{"big integer notation", `{"text":"x","big":18446744073709551615}`, `{"text":"x","big":1.8446744073709551615e19}`, true},
		{"-0 is 0", `{"text":"x","n":-0.0}`, `{"text":"x","n":0}`, true},
	}
	var runs atomic.Int32
	tool := carmy.Tool(func(hrDigestIn) error { runs.Add(1); return nil }, carmy.Destructive,
		carmy.Name("confirm_me"), carmy.RequireConfirmation(), carmy.ParallelSafe(), carmy.Register(false))
	reg := rtRegistry(t, carmy.New().Tool(tool))
	digest := func(t *testing.T, input string) string {
		t.Helper()
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "confirm_me", Input: []byte(input)})
		e := rtError(t, err, carmy.CodeConfirmationRequired)
		d, _ := e.Details["digest"].(string)
		return d
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			da, db := digest(t, tt.a), digest(t, tt.b)
			if (da == db) != tt.same {
				t.Fatalf("digests equal = %v, want %v", da == db, tt.same)
			}
			// A grant for one runs the other exactly when they are the
			// same input.
			before := runs.Load()
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "confirm_me", Input: []byte(tt.b), Permissions: []string{"confirm:confirm_me:" + da}})
			if ran := runs.Load() > before; ran != tt.same || (err == nil) != tt.same {
				t.Fatalf("the grant for %s: ran %v, err %v", tt.a, ran, err)
			}
			// A request id reused with the other input is a replay or a
			// conflict by the same rule.
			id := "digest-" + strings.ReplaceAll(tt.name, " ", "-")
			grants := []string{"confirm:confirm_me"}
			if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "confirm_me", Input: []byte(tt.a), RequestID: id, Permissions: grants}); err != nil {
				t.Fatal(err)
			}
			res, err := reg.Execute(context.Background(), carmy.Call{Tool: "confirm_me", Input: []byte(tt.b), RequestID: id, Permissions: grants})
			if tt.same && (err != nil || !res.Replayed) {
				t.Fatalf("same input, same request id: %+v, %v; want a replay", res, err)
			}
			if !tt.same && carmy.CodeOf(err) != carmy.CodeConflict {
				t.Fatalf("another input, same request id: %v; want conflict", err)
			}
		})
	}
	// The digest is of the canonical form, which drops the null.
	if got := digest(t, `{"tag":null,"text":"x","n":1E0}`); got != sha(`{"n":1,"text":"x"}`) {
		t.Fatalf("digest %s is not that of the canonical form", got)
	}
}

// hrHeld is a serialized tool whose first call holds the turn, ignoring
// its context, until released.
type hrHeld struct {
	started chan struct{}
	release chan struct{}
	runs    atomic.Int32
}

func (h *hrHeld) run(ctx context.Context) error {
	if h.runs.Add(1) == 1 {
		close(h.started)
		<-h.release
	}
	return nil
}

// TestHostileBusy: a call waits for a serialized tool's turn at most the
// tool's timeout, then is answered unavailable, retryable, busy; a waiter
// whose caller gives up first is cancelled.
func TestHostileBusy(t *testing.T) {
	t.Parallel()
	// Long enough that a cancel 20ms in is told apart from the timeout on
	// a loaded machine under the race detector.
	const timeout = time.Second
	h := &hrHeld{started: make(chan struct{}), release: make(chan struct{})}
	logs := &hrCapture{}
	tool := carmy.Tool(h.run, carmy.Write, carmy.Name("held"), carmy.Timeout(timeout), carmy.Register(false))
	reg, err := carmy.New().Tool(tool).Logger(slog.New(logs)).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	defer close(h.release)
	first := make(chan error, 1)
	go func() {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "held"})
		first <- err
	}()
	rtWait(t, h.started, "the first execution")

	busy := t.Run("waiter past the timeout is busy", func(t *testing.T) {
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "held", Principal: "alice", RequestID: "busy-1"})
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter is still waiting long after the tool's timeout")
		}
		e := rtError(t, err, carmy.CodeUnavailable)
		if !e.Retryable || !strings.Contains(e.Message, "busy") {
			t.Fatalf("%+v; want retryable and busy", e)
		}
		if took := time.Since(start); took < timeout-10*time.Millisecond || took > timeout+time.Second {
			t.Fatalf("answered after %v; want about %v", took, timeout)
		}
		if r := logs.find("code", "unavailable"); r == nil || r.Level != slog.LevelWarn || r.attrs["principal"] != "alice" || r.attrs["tool"] != "held" {
			t.Fatalf("busy refusal logged as %+v", r)
		}
		if carmy.StatusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("status %d", carmy.StatusOf(err))
		}
	})
	if !busy {
		return // the waits below would not end either
	}
	t.Run("busy is not recorded for the request id", func(t *testing.T) {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "held", Principal: "alice", RequestID: "busy-1"})
		rtError(t, err, carmy.CodeUnavailable) // waited again, not replayed
	})
	t.Run("waiter whose caller cancels is cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := reg.Execute(ctx, carmy.Call{Tool: "held"})
		rtError(t, err, carmy.CodeCancelled)
		if took := time.Since(start); took >= timeout {
			t.Fatalf("cancelled after %v, not when the caller gave up", took)
		}
	})
	if err := <-first; carmy.CodeOf(err) != carmy.CodeTimeout {
		t.Fatalf("first call: %v; want timeout", err)
	}
	if n := h.runs.Load(); n != 1 {
		t.Fatalf("%d executions; waiters must not have run", n)
	}
}

// hrLeaseStore records the leases of the reservations it is asked for.
type hrLeaseStore struct {
	store.IdempotencyStore
	mu     sync.Mutex
	leases []time.Duration
}

func (s *hrLeaseStore) Begin(ctx context.Context, key store.Key, digest string, lease time.Duration) (store.Reservation, error) {
	s.mu.Lock()
	s.leases = append(s.leases, lease)
	s.mu.Unlock()
	return s.IdempotencyStore.Begin(ctx, key, digest, lease)
}

// TestHostileReservationLease: a reservation outlasts the longest healthy
// call it covers, the wait for the turn (at most the timeout) and the
// execution (at most the timeout), so that no healthy call's request id
// is taken by another execution.
func TestHostileReservationLease(t *testing.T) {
	t.Parallel()
	const timeout = time.Minute
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel-safe=%v", parallel), func(t *testing.T) {
			mem := store.NewMemoryStore(0, 0)
			t.Cleanup(func() { _ = mem.(io.Closer).Close() })
			leasing := &hrLeaseStore{IdempotencyStore: mem}
			opts := []carmy.Option{carmy.Name("leased"), carmy.Timeout(timeout), carmy.Register(false)}
			if parallel {
				opts = append(opts, carmy.ParallelSafe())
			}
			reg := rtRegistry(t, carmy.New().Store(leasing).Tool(carmy.Tool(func() error { return nil }, carmy.Write, opts...)))
			if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "leased", RequestID: "r1"}); err != nil {
				t.Fatal(err)
			}
			need := timeout
			if !parallel {
				need += timeout // the wait for the turn
			}
			if len(leasing.leases) != 1 || leasing.leases[0] <= need {
				t.Fatalf("leases %v; want one longer than %v", leasing.leases, need)
			}
		})
	}
}

// hrOut is an output with a slice, so that a caller could change it.
type hrOut struct {
	Items []string `json:"items"`
}

// TestHostileReplays: every caller gets its own copy of a recorded
// outcome, and a replayed error says it is a replay of which execution.
func TestHostileReplays(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	var lastID atomic.Value
	ok := carmy.Tool(func(ctx carmy.Context) (hrOut, error) {
		runs.Add(1)
		lastID.Store(ctx.ExecutionID)
		return hrOut{Items: []string{"original"}}, nil
	}, carmy.Write, carmy.Name("ok"), carmy.ParallelSafe(), carmy.Register(false))
	fails := carmy.Tool(func(ctx carmy.Context) error {
		runs.Add(1)
		lastID.Store(ctx.ExecutionID)
		return &carmy.Error{
			Code:    carmy.CodeNotFound,
			Message: "no such order",
			Fields:  []carmy.FieldError{{Path: "order_id", Message: "unknown"}},
			Details: map[string]any{"order_id": "7", "nested": map[string]any{"k": "v"}, "list": []any{"a"}},
		}
	}, carmy.Write, carmy.Name("fails"), carmy.ParallelSafe(), carmy.Register(false))
	reg := rtRegistry(t, carmy.New().Tool(ok, fails))
	call := func(tool, id string) (carmy.Result, error) {
		return reg.Execute(context.Background(), carmy.Call{Tool: tool, RequestID: id})
	}

	t.Run("outputs are copies", func(t *testing.T) {
		first, err := call("ok", "out-1")
		if err != nil {
			t.Fatal(err)
		}
		want := string(first.Output)
		copy(first.Output, strings.Repeat("X", len(first.Output))) // the first caller scribbles
		for i := range 3 {
			res, err := call("ok", "out-1")
			if err != nil || !res.Replayed {
				t.Fatalf("replay %d: %+v, %v", i, res, err)
			}
			if string(res.Output) != want {
				t.Fatalf("replay %d got %s; want %s", i, res.Output, want)
			}
			copy(res.Output, strings.Repeat("Y", len(res.Output)))
		}
	})
	t.Run("first error has no replay marks", func(t *testing.T) {
		_, err := call("fails", "err-1")
		e := rtError(t, err, carmy.CodeNotFound)
		if _, ok := e.Details["replayed"]; ok {
			t.Fatalf("the first outcome says it is a replay: %v", e.Details)
		}
	})
	original := lastID.Load().(string)
	t.Run("replayed errors say so and are copies", func(t *testing.T) {
		for i := range 3 {
			_, err := call("fails", "err-1")
			e := rtError(t, err, carmy.CodeNotFound)
			if e.Details["replayed"] != true || e.Details["execution_id"] != original {
				t.Fatalf("replay %d details %v; want replayed and execution_id %s", i, e.Details, original)
			}
			if e.Details["nested"].(map[string]any)["k"] != "v" || e.Details["list"].([]any)[0] != "a" || e.Fields[0].Message != "unknown" || e.Details["order_id"] != "7" {
				t.Fatalf("replay %d sees another caller's changes: %+v", i, e)
			}
			// This caller changes everything it can reach.
			e.Details["nested"].(map[string]any)["k"] = "changed"
			e.Details["list"].([]any)[0] = "changed"
			e.Details["order_id"] = "changed"
			e.Fields[0].Message = "changed"
		}
	})
	t.Run("over HTTP", func(t *testing.T) {
		srv := serve(t, reg)
		res, raw := roundTrip(t, nil, http.MethodPost, srv.URL+"/tools/fails", `{}`, "Idempotency-Key", "err-1")
		var body struct{ Error carmy.Error }
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		if got := res.Header.Get("X-Carmy-Execution-Id"); got != original || body.Error.Details["replayed"] != true || body.Error.Details["execution_id"] != original {
			t.Fatalf("header %q, details %v; want the original execution %s, replayed", got, body.Error.Details, original)
		}
	})
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d executions; want one per request id", n)
	}
}

// hrCapture is a slog handler that keeps the records it handles.
type hrCapture struct {
	mu      sync.Mutex
	records []hrRecord
}

type hrRecord struct {
	Level slog.Level
	Msg   string
	attrs map[string]string
}

func (h *hrCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *hrCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *hrCapture) WithGroup(string) slog.Handler            { return h }

func (h *hrCapture) Handle(_ context.Context, r slog.Record) error {
	rec := hrRecord{Level: r.Level, Msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}

// find returns the last record with that attribute value, or nil.
func (h *hrCapture) find(key, value string) *hrRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.records) - 1; i >= 0; i-- {
		if h.records[i].attrs[key] == value {
			r := h.records[i]
			return &r
		}
	}
	return nil
}

// all returns every record as text, for checking what never appears.
func (h *hrCapture) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.records {
		fmt.Fprintf(&b, "%s %s %v\n", r.Level, r.Msg, r.attrs)
	}
	return b.String()
}

type hrSecretIn struct {
	Secret string `json:"secret"`
}

// TestHostileRefusalsAreLogged: the runtime's refusals (permission,
// confirmation, conflict; busy above) are logged at warn with principal,
// tool and code, never the input or a token.
func TestHostileRefusalsAreLogged(t *testing.T) {
	t.Parallel()
	const secret, token = "SECRET-INPUT-VALUE", "sk-live-TOKEN"
	tests := []struct {
		name string
		tool string
		code carmy.Code
		prep func(reg *carmy.Registry) // calls made before the refused one
		id   string
	}{
		{name: "permission", tool: "guarded", code: carmy.CodePermissionDenied},
		{name: "confirmation", tool: "confirmed", code: carmy.CodeConfirmationRequired},
		{name: "conflict", tool: "plain", code: carmy.CodeConflict, id: "conflict-1", prep: func(reg *carmy.Registry) {
			_, _ = reg.Execute(context.Background(), carmy.Call{Tool: "plain", Input: []byte(`{"secret":"other"}`), RequestID: "conflict-1", Principal: "mallory"})
		}},
	}
	logs := &hrCapture{}
	run := func(hrSecretIn) error { return nil }
	reg, err := carmy.New().Logger(slog.New(logs)).
		Authorize(func(c carmy.Context, m carmy.ToolMetadata) error {
			if m.Name == "guarded" {
				return carmy.Errorf(carmy.CodePermissionDenied, "not for you")
			}
			return nil
		}).
		Tool(carmy.Tool(run, carmy.Write, carmy.Name("guarded"), carmy.Register(false)),
			carmy.Tool(run, carmy.Write, carmy.Name("confirmed"), carmy.RequireConfirmation(), carmy.Register(false)),
			carmy.Tool(run, carmy.Write, carmy.Name("plain"), carmy.Register(false))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prep != nil {
				tt.prep(reg)
			}
			_, err := reg.Execute(context.Background(), carmy.Call{
				Tool: tt.tool, Input: []byte(`{"secret":"` + secret + `"}`), RequestID: tt.id,
				Principal: "mallory", Permissions: []string{"token:" + token},
				Metadata: map[string]string{"authorization": "Bearer " + token},
			})
			rtError(t, err, tt.code)
			r := logs.find("code", string(tt.code))
			if r == nil || r.Level != slog.LevelWarn || r.attrs["principal"] != "mallory" || r.attrs["tool"] != tt.tool {
				t.Fatalf("refusal logged as %+v; all:\n%s", r, logs.all())
			}
		})
	}
	t.Run("over HTTP, with the remote address", func(t *testing.T) {
		srv := serve(t, reg)
		resp, err := http.Post(srv.URL+"/tools/confirmed", "application/json", strings.NewReader(`{"secret":"`+secret+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		r := logs.find("code", string(carmy.CodeConfirmationRequired))
		if r == nil || !strings.HasPrefix(r.attrs["remote"], "127.0.0.1:") {
			t.Fatalf("refusal logged as %+v; want the caller's address", r)
		}
	})
	t.Run("over MCP, with the remote address", func(t *testing.T) {
		srv := serve(t, reg)
		s, err := mcpSession(t, srv.URL, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if all := logs.all(); strings.Contains(all, secret) || strings.Contains(all, token) {
			t.Fatalf("the log holds an input or a token:\n%s", all)
		}
		logs.mu.Lock()
		logs.records = nil // the refusals over HTTP are checked above
		logs.mu.Unlock()
		if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirmed", Arguments: map[string]any{"secret": secret}}); err != nil {
			t.Fatal(err)
		}
		r := logs.find("code", string(carmy.CodeConfirmationRequired))
		if r == nil || !strings.HasPrefix(r.attrs["remote"], "127.0.0.1:") {
			t.Fatalf("refusal logged as %+v; want the MCP client's address", r)
		}
	})
	if all := logs.all(); strings.Contains(all, secret) || strings.Contains(all, token) {
		t.Fatalf("the log holds an input or a token:\n%s", all)
	}
}

// hrBomb is an input type whose decoding panics.
type hrBomb struct{ v string }

func (b *hrBomb) UnmarshalText(p []byte) error {
	if string(p) == "boom" {
		panic("decoder exploded at /home/dev/secret.go:42")
	}
	b.v = string(p)
	return nil
}

func (b hrBomb) MarshalText() ([]byte, error) { return []byte(b.v), nil }

// hrColor is an input type that refuses values in its own words.
type hrColor string

func (c *hrColor) UnmarshalText(p []byte) error {
	if s := string(p); s == "red" || s == "blue" {
		*c = hrColor(s)
		return nil
	}
	return errors.New("use red or blue")
}

func (c hrColor) MarshalText() ([]byte, error) { return []byte(c), nil }

type hrTextIn struct {
	Bomb  hrBomb  `json:"bomb,omitzero"`
	Color hrColor `json:"color,omitempty"`
}

// hrLeaks are what an answer must never hold: Go type names, files,
// stacks, panics.
var hrLeaks = []string{"goroutine", ".go:", "reflect.", "runtime.", "carmy_test.", "hrColor", "hrBomb", "main.", "jsontext", "*carmy", "interface {}", "map[string]", "panic", "/home/"}

func hrAssertNoLeak(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	e, ok := err.(*carmy.Error)
	if !ok {
		t.Fatalf("%T is not a *carmy.Error", err)
	}
	b, _ := json.Marshal(e)
	for _, leak := range hrLeaks {
		if strings.Contains(string(b), leak) {
			t.Fatalf("the answer leaks %q: %.400s", leak, b)
		}
	}
}

// TestHostileNoLeaks: a panic in an input type's code never takes the
// host down, and no answer to a hostile input, for any type of the corpus,
// holds a Go type name, a file path or a stack.
func TestHostileNoLeaks(t *testing.T) {
	t.Parallel()
	logs := &hrCapture{}
	var runs atomic.Int32
	text := carmy.Tool(func(hrTextIn) error { runs.Add(1); return nil }, carmy.Write, carmy.Name("text"), carmy.ParallelSafe(), carmy.Register(false))
	reg, err := carmy.New().Logger(slog.New(logs)).Tool(text).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	t.Run("a panic while decoding", func(t *testing.T) {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "text", Input: []byte(`{"bomb":"boom"}`)})
		rtError(t, err, carmy.CodeInternal)
		hrAssertNoLeak(t, err)
		if !strings.Contains(logs.all(), "secret.go:42") {
			t.Fatal("the panic is not in the log")
		}
		if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "text", Input: []byte(`{"bomb":"fine"}`)}); err != nil || runs.Load() != 1 {
			t.Fatalf("the host did not go on: %v", err)
		}
	})
	t.Run("a type's own refusal", func(t *testing.T) {
		_, err := reg.Execute(context.Background(), carmy.Call{Tool: "text", Input: []byte(`{"color":"green"}`)})
		e := rtError(t, err, carmy.CodeInvalidInput)
		hrAssertNoLeak(t, err)
		if len(e.Fields) != 1 || !strings.Contains(e.Fields[0].Message, "use red or blue") {
			t.Fatalf("fields %+v; want the type's own words", e.Fields)
		}
	})
	t.Run("the corpus under hostile values", func(t *testing.T) {
		values := []string{`null`, `"s"`, `1.5`, `-1`, `1e400`, `18446744073709551616`, `[]`, `{}`, `[null]`, `{"x":1}`, `true`, `"\u0000"`, `"` + strings.Repeat("a", 5000) + `"`}
		docs := []string{``, `null`, `[]`, `"x"`, `{`, `{"a":1,"a":2}`, "{\"\xff\":1}", `{"x":1}{}`, nested(10000)}
		for _, c := range corpus.Types {
			if c.Tool == nil {
				continue
			}
			reg := rtRegistry(t, carmy.New().Tool(c.Tool("corpus")))
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(c.Schema(), &schema); err != nil {
				t.Fatal(err)
			}
			inputs := docs
			for name := range schema.Properties {
				for _, v := range values {
					inputs = append(inputs, fmt.Sprintf(`{%q:%s}`, name, v))
				}
			}
			for _, in := range inputs {
				_, err := reg.Execute(context.Background(), carmy.Call{Tool: "corpus", Input: []byte(in)})
				if code := carmy.CodeOf(err); code != "" && code != carmy.CodeInvalidInput {
					t.Fatalf("%s, %.100s: %v", c.Name, in, err)
				}
				hrAssertNoLeak(t, err)
			}
		}
	})
}

// TestHostileIdempotencyUnderLoad: 1,000 concurrent calls over a few
// request ids, of a serialized tool with a short timeout, execute each id
// exactly once; every caller of an id that got an answer got the same
// execution.
func TestHostileIdempotencyUnderLoad(t *testing.T) {
	t.Parallel()
	const calls, ids = 1000, 8
	var mu sync.Mutex
	executions := map[string]int{}
	tool := carmy.Tool(func(ctx carmy.Context, in PlaceOrder) (Placed, error) {
		mu.Lock()
		executions[ctx.RequestID]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return Placed{Number: 1}, nil
	}, carmy.Write, carmy.Name("serial"), carmy.Timeout(500*time.Millisecond), carmy.Register(false))
	reg := rtRegistry(t, carmy.New().Tool(tool))
	var wg sync.WaitGroup
	var answers sync.Map // request id → execution id
	var busy atomic.Int32
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			id := fmt.Sprintf("load-%d", i%ids)
			res, err := reg.Execute(context.Background(), carmy.Call{Tool: "serial", Input: []byte(`{"sku":"a","quantity":1}`), RequestID: id})
			if err != nil {
				switch carmy.CodeOf(err) {
				case carmy.CodeUnavailable:
					busy.Add(1) // allowed: the wait is bounded, and a busy call ran nothing
					return
				case carmy.CodeTimeout:
					// Allowed: on a loaded machine the short deadline may pass
					// before the worker gets the CPU; the id still ran once,
					// which the count below checks.
					return
				}
				errs <- err
				return
			}
			if prev, loaded := answers.LoadOrStore(id, res.ExecutionID); loaded && prev != res.ExecutionID {
				errs <- fmt.Errorf("%s answered by executions %s and %s", id, prev, res.ExecutionID)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range executions {
		if n != 1 {
			t.Errorf("%s executed %d times", id, n)
		}
	}
	if len(executions) != ids {
		t.Errorf("%d ids executed; want %d (busy answers: %d)", len(executions), ids, busy.Load())
	}
}
