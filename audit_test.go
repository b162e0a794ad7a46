package carmy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/carmy-dev/carmy"
)

// auditLog is an Auditor that keeps its records, and fails while failing
// is set.
type auditLog struct {
	mu      sync.Mutex
	recs    []carmy.AuditRecord
	failing bool
}

func (a *auditLog) Audit(_ context.Context, rec carmy.AuditRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failing {
		return errors.New("sink down")
	}
	a.recs = append(a.recs, rec)
	return nil
}

func (a *auditLog) take() []carmy.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.recs
	a.recs = nil
	return out
}

// decisions lists records as "decision tool code".
func decisions(recs []carmy.AuditRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Decision)+" "+r.Tool+" "+string(r.Code))
	}
	return strings.Join(s, ", ")
}

type Target struct {
	ID string `json:"id" validate:"required"`
}

// auditTools are a read, a write and a destructive tool that note what
// ran; the destructive one also notes whether its started record was in
// the sink when it ran.
func auditTools(sink *auditLog, ran *[]string, mu *sync.Mutex) []*carmy.ToolDef {
	note := func(name string) {
		mu.Lock()
		*ran = append(*ran, name)
		mu.Unlock()
	}
	return []*carmy.ToolDef{
		carmy.Tool(func(in Target) (string, error) { note("look"); return in.ID, nil }, carmy.Read, carmy.Name("look"), carmy.Register(false)),
		carmy.Tool(func(in Target) (string, error) { note("edit"); return in.ID, nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false)),
		carmy.Tool(func(c carmy.Context, in Target) error {
			sink.mu.Lock()
			started := len(sink.recs) > 0 && sink.recs[len(sink.recs)-1].Decision == carmy.AuditStarted &&
				sink.recs[len(sink.recs)-1].ExecutionID == c.ExecutionID
			sink.mu.Unlock()
			if !started {
				note("wipe without its started record")
				return nil
			}
			note("wipe")
			if in.ID == "fail" {
				return carmy.Errorf(carmy.CodeNotFound, "no %s", in.ID)
			}
			return nil
		}, carmy.Destructive, carmy.Name("wipe"), carmy.Register(false)),
	}
}

// One record per decision: every call of a write or destructive tool,
// every refusal, and a started record before a destructive tool runs.
func TestAuditRecordsEveryDecision(t *testing.T) {
	t.Parallel()
	sink := &auditLog{}
	var (
		ran []string
		mu  sync.Mutex
	)
	reg, err := carmy.New().Tool(auditTools(sink, &ran, &mu)...).Audit(sink).
		Authorize(func(c carmy.Context, m carmy.ToolMetadata) error {
			if c.Principal == "mallory" {
				return errors.New("not allowed")
			}
			return nil
		}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	call := func(tool, input, principal, rid string) (carmy.Result, error) {
		return reg.Execute(ctx, carmy.Call{Tool: tool, Input: json.RawMessage(input), Principal: principal, RequestID: rid, Session: "s1"})
	}

	tests := []struct {
		name, tool, input, principal, rid string
		want                              string // decisions
		ran                               string
	}{
		{"a read is not recorded", "look", `{"id":"a"}`, "alice", "", "", "look"},
		{"a refused read is", "look", `{"id":"a"}`, "mallory", "", "refused look permission_denied", ""},
		{"an invalid read is a refusal", "look", `{}`, "alice", "", "refused look invalid_input", ""},
		{"a write", "edit", `{"id":"a"}`, "alice", "w1", "executed edit ok", "edit"},
		{"a replayed write", "edit", `{"id":"a"}`, "alice", "w1", "replayed edit ok", ""},
		{"a conflicting write", "edit", `{"id":"b"}`, "alice", "w1", "refused edit conflict", ""},
		{"a destructive call", "wipe", `{"id":"a"}`, "alice", "", "started wipe , executed wipe ok", "wipe"},
		{"a destructive call that fails", "wipe", `{"id":"fail"}`, "alice", "", "started wipe , executed wipe not_found", "wipe"},
		{"a refused destructive call", "wipe", `{"id":"a"}`, "mallory", "", "refused wipe permission_denied", ""},
		{"a destructive call refused for its request id", "wipe", `{"id":"a"}`, "alice", "not a request id", "refused wipe invalid_input", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			ran = nil
			mu.Unlock()
			before := time.Now()
			res, err := call(tt.tool, tt.input, tt.principal, tt.rid)
			recs := sink.take()
			if got := decisions(recs); got != tt.want {
				t.Fatalf("records %q, want %q (call: %+v, %v)", got, tt.want, res, err)
			}
			mu.Lock()
			if got := strings.Join(ran, ","); got != tt.ran {
				t.Errorf("ran %q, want %q", got, tt.ran)
			}
			mu.Unlock()
			for _, r := range recs {
				if r.Principal != tt.principal || r.RequestID != tt.rid || r.Session != "s1" || r.Time.Before(before) || r.ApprovalID != "" || r.Approver != "" {
					t.Errorf("record %+v", r)
				}
				if m, _ := reg.Lookup(tt.tool); r.Effect != m.Effect {
					t.Errorf("record effect %v, want %v", r.Effect, m.Effect)
				}
				switch {
				case r.Code == carmy.CodeInvalidInput:
					if r.Digest != "" {
						t.Errorf("invalid input with digest %q", r.Digest)
					}
				case len(r.Digest) != 64:
					t.Errorf("digest %q", r.Digest)
				}
				switch r.Decision {
				case carmy.AuditRefused:
					if r.ExecutionID != "" {
						t.Errorf("refusal with execution id %q", r.ExecutionID)
					}
				default:
					if err == nil && r.ExecutionID != res.ExecutionID {
						t.Errorf("record execution id %q, call's %q", r.ExecutionID, res.ExecutionID)
					}
					if r.ExecutionID == "" {
						t.Errorf("record %+v without an execution id", r)
					}
				}
			}
		})
	}
}

// The digest of a confirmation refusal is the one the grant must name.
func TestAuditDigestIsTheConfirmationDigest(t *testing.T) {
	t.Parallel()
	sink := &auditLog{}
	drop := carmy.Tool(func(in Target) error { return nil }, carmy.Destructive, carmy.Name("drop"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, err := carmy.New().Tool(drop).Audit(sink).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "drop", Input: json.RawMessage(`{"id": "x"}`)})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
		t.Fatalf("err = %v", err)
	}
	recs := sink.take()
	if len(recs) != 1 || recs[0].Decision != carmy.AuditRefused || recs[0].Digest != e.Details["digest"] {
		t.Fatalf("records %+v, digest %v", recs, e.Details["digest"])
	}
}

// full is a disk with no room left: every write fails.
type full struct{}

func (full) Write(p []byte) (int, error) { return 0, syscall.ENOSPC }

// When the sink fails, a destructive tool does not run: unavailable,
// retryable; a write tool runs, and the failure is logged and counted.
func TestAuditSinkFailure(t *testing.T) {
	t.Parallel()
	var (
		ran []string
		mu  sync.Mutex
	)
	sink := &auditLog{}
	logs := &logSink{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	reg, err := carmy.New().Tool(auditTools(sink, &ran, &mu)...).Audit(carmy.NewJSONLinesAuditor(full{})).Logger(logger).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()

	_, err = reg.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable {
		t.Fatalf("destructive call under a full disk: %v", err)
	}
	if n := reg.AuditFailures(); n != 2 { // the started record, then the refusal
		t.Errorf("AuditFailures = %d, want 2", n)
	}
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`)}); err != nil {
		t.Fatalf("write call under a full disk: %v", err)
	}
	if n := reg.AuditFailures(); n != 3 {
		t.Errorf("AuditFailures = %d, want 3", n)
	}
	mu.Lock()
	if got := strings.Join(ran, ","); got != "edit" {
		t.Errorf("ran %q, want only edit", got)
	}
	mu.Unlock()
	if n := strings.Count(logs.String(), "level=ERROR msg=\"carmy: audit record not written\""); n != 3 || !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("%d audit failures logged:\n%s", n, logs.String())
	}

	// The refusal released the request id: the retry runs once the sink
	// is back.
	good := &auditLog{}
	reg2, err := carmy.New().Tool(auditTools(good, &ran, &mu)...).Audit(good).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg2.Close()
	good.failing = true
	if _, err := reg2.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"}); carmy.CodeOf(err) != carmy.CodeUnavailable {
		t.Fatalf("err = %v", err)
	}
	good.failing = false
	if _, err := reg2.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(`{"id":"a"}`), RequestID: "r1"}); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

// syncFile counts syncs, and fails them while failSync is set.
type syncFile struct {
	bytes.Buffer
	syncs    int
	failSync bool
}

func (f *syncFile) Sync() error {
	f.syncs++
	if f.failSync {
		return syscall.EIO
	}
	return nil
}

// The JSON-lines sink syncs a destructive tool's records, and only those;
// a failed sync refuses the destructive tool.
func TestJSONLinesAuditorSyncsDestructiveRecords(t *testing.T) {
	t.Parallel()
	f := &syncFile{}
	var (
		ran []string
		mu  sync.Mutex
	)
	reg, err := carmy.New().Tool(auditTools(&auditLog{}, &ran, &mu)...).Audit(carmy.NewJSONLinesAuditor(f)).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`)}); err != nil || f.syncs != 0 {
		t.Fatalf("write: %v, %d syncs", err, f.syncs)
	}
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(`{"id":"a"}`)}); err != nil || f.syncs != 2 {
		t.Fatalf("destructive: %v, %d syncs, want 2", err, f.syncs)
	}
	f.failSync = true
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(`{"id":"b"}`)}); carmy.CodeOf(err) != carmy.CodeUnavailable {
		t.Fatalf("destructive with a failing sync: %v", err)
	}
}

// gate is a writer whose first write waits until it is opened, so that
// records arriving meanwhile queue behind it.
type gate struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	first  chan struct{} // closed when the first write starts
	open   chan struct{}
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	n := g.writes
	g.mu.Unlock()
	if n == 1 {
		close(g.first)
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

// Records that arrive while a write is under way share the next write
// (group commit), and each Audit returns only once its own record is
// written.
func TestJSONLinesAuditorGroupCommit(t *testing.T) {
	t.Parallel()
	g := &gate{first: make(chan struct{}), open: make(chan struct{})}
	a := carmy.NewJSONLinesAuditor(g)
	ctx := context.Background()
	firstDone := make(chan error, 1)
	go func() { firstDone <- a.Audit(ctx, carmy.AuditRecord{Tool: "first", Effect: carmy.Write}) }()
	<-g.first
	const queued = 8
	var wg sync.WaitGroup
	for i := range queued {
		wg.Go(func() {
			if err := a.Audit(ctx, carmy.AuditRecord{Tool: "queued", Effect: carmy.Write, RequestID: strconv.Itoa(i)}); err != nil {
				t.Error(err)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if !strings.Contains(g.buf.String(), `"request_id":"`+strconv.Itoa(i)+`"`) {
				t.Errorf("Audit of record %d returned before it was written", i)
			}
		})
	}
	// Let the queued records join the open batch before the first write
	// finishes: a record that cannot join waits for the write under way.
	time.Sleep(50 * time.Millisecond)
	close(g.open)
	wg.Wait()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(g.buf.String(), "\n"), "\n")
	if len(lines) != queued+1 {
		t.Fatalf("%d lines, want %d: %q", len(lines), queued+1, g.buf.String())
	}
	for _, l := range lines {
		var rec carmy.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	if g.writes >= queued+1 {
		t.Errorf("%d writes for %d records: no record shared a write", g.writes, queued+1)
	}
}

// A write that fails part way leaves a torn line; the next record starts
// on a line of its own, so every complete line stays readable.
type tearing struct {
	bytes.Buffer
	tear bool
}

func (w *tearing) Write(p []byte) (int, error) {
	if w.tear {
		w.tear = false
		w.Buffer.Write(p[:5])
		return 5, syscall.ENOSPC
	}
	return w.Buffer.Write(p)
}

func TestJSONLinesAuditorAfterATornWrite(t *testing.T) {
	t.Parallel()
	w := &tearing{tear: true}
	a := carmy.NewJSONLinesAuditor(w)
	ctx := context.Background()
	if err := a.Audit(ctx, carmy.AuditRecord{Tool: "first", Effect: carmy.Write}); err == nil {
		t.Fatal("no error from a torn write")
	}
	if err := a.Audit(ctx, carmy.AuditRecord{Tool: "second", Effect: carmy.Write}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	var rec carmy.AuditRecord
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &rec) != nil || rec.Tool != "second" {
		t.Fatalf("file %q", w.String())
	}
}

// AuditFile appends JSON lines to a file of mode 0600 that Close closes;
// the lines decode back into the records.
func TestAuditFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"tool":"earlier"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	edit := carmy.Tool(func(in Target) error { return nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false))
	reg, err := carmy.New().Tool(edit).AuditFile(path).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := reg.Execute(context.Background(), carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi, _ := f.Stat(); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	var rec carmy.AuditRecord
	if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Decision != carmy.AuditExecuted || rec.ExecutionID != res.ExecutionID || rec.Principal != "alice" || rec.Effect != carmy.Write || rec.Code != "ok" {
		t.Errorf("record %+v", rec)
	}
	for _, key := range []string{`"time":`, `"decision":"executed"`, `"effect":"write"`, `"approval_id":""`, `"approver":""`} {
		if !strings.Contains(lines[1], key) {
			t.Errorf("line %s lacks %s", lines[1], key)
		}
	}

	// A file that cannot be opened is a Build error.
	_, err = carmy.New().Tool(edit).AuditFile(filepath.Join(t.TempDir(), "no", "dir", "audit.jsonl")).Build()
	if err == nil || !strings.Contains(err.Error(), "audit:") {
		t.Fatalf("Build = %v", err)
	}
}

// closingSink is an Auditor that is also an io.Closer.
type closingSink struct {
	auditLog
	closed bool
}

func (c *closingSink) Close() error { c.closed = true; return nil }

var _ io.Closer = (*closingSink)(nil)

// AuditURL opens the sink registered for the URL's scheme, which Close
// closes; an unknown scheme is a Build error that never shows the URL.
func TestAuditURL(t *testing.T) {
	t.Parallel()
	var opened []string
	sink := &closingSink{}
	carmy.RegisterAuditor("testaudit", func(url string) (carmy.Auditor, error) {
		opened = append(opened, url)
		return sink, nil
	})
	edit := carmy.Tool(func(in Target) error { return nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false))
	reg, err := carmy.New().Tool(edit).AuditURL("testaudit://u:pw@host/x").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	_ = reg.Close()
	if len(opened) != 1 || len(sink.take()) != 1 || !sink.closed {
		t.Errorf("opened %q, closed %v", opened, sink.closed)
	}
	for _, url := range []string{"nosuch://u:secret@host/x", "u:secret@host"} {
		_, err = carmy.New().Tool(edit).AuditURL(url).Build()
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("AuditURL(%q): Build = %v", url, err)
		}
	}
	if _, err := carmy.New().Audit(nil).Build(); err == nil {
		t.Error("Audit(nil) is not a Build error")
	}
}

// App adds the sink of CARMY_AUDIT_FILE.
func TestAppAuditFile(t *testing.T) {
	// Serial: t.Chdir and t.Setenv change the whole process.
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	t.Chdir(t.TempDir())
	t.Setenv("CARMY_AUDIT_FILE", path)
	edit := carmy.Tool(func(in Target) error { return nil }, carmy.Write, carmy.Name("edit_app"), carmy.Register(false))
	reg, err := carmy.App().Tool(edit).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "edit_app", Input: json.RawMessage(`{"id":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	_ = reg.Close()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `"tool":"edit_app"`) {
		t.Fatalf("audit file %q, %v", b, err)
	}
}

// TestJSONLinesAuditorEncodesAsTheJSONLibrary: the file sink writes each
// record exactly as the JSON library encodes an AuditRecord (the form
// readers of the file and pgaudit's columns rely on), escapes, optional
// fields and times included, and refuses what the library refuses.
func TestJSONLinesAuditorEncodesAsTheJSONLibrary(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 13, 4, 5, 120_000_000, time.FixedZone("", 3600))
	full := carmy.AuditRecord{Time: at, Decision: carmy.AuditExecuted, ExecutionID: "e-1", RequestID: "r\"1\u2028", Session: "s<1>&",
		Principal: "ünïcode \x01", Tool: "t", Effect: carmy.Destructive, Digest: "abc", Code: "ok", ApprovalID: "a", Approver: "p",
		PolicySet: "set", Policies: []string{"p1", "p\n2"}, Detail: "why"}
	for _, tc := range []struct {
		name string
		rec  carmy.AuditRecord
	}{
		{"every field", full},
		{"the usual write call", carmy.AuditRecord{Time: time.Now(), Decision: carmy.AuditExecuted, ExecutionID: "e", Principal: "bench", Tool: "edit", Effect: carmy.Write, Digest: "d", Code: "ok"}},
		{"UTC, whole seconds", carmy.AuditRecord{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Decision: carmy.AuditRefused, Tool: "t", Effect: carmy.Read, Code: carmy.CodePermissionDenied}},
		{"policies but no set", carmy.AuditRecord{Time: at, Tool: "t", Effect: carmy.None, Policies: []string{}}},
		{"a year past 9999", carmy.AuditRecord{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Tool: "t", Effect: carmy.Read}},
		{"not UTF-8", carmy.AuditRecord{Time: at, Tool: "t\xff", Effect: carmy.Read}},
		{"no effect", carmy.AuditRecord{Time: at, Tool: "t"}},
	} {
		t.Run(tc.name, func(t *testing.T) { encodesAsTheJSONLibrary(t, tc.rec) })
	}
}

// FuzzJSONLinesAuditor: whatever a record's strings hold, the file sink
// writes the bytes the JSON library writes, or refuses what it refuses.
func FuzzJSONLinesAuditor(f *testing.F) {
	f.Add("r\"1\u2028", "ünïcode \x01", "t\xff", "p\n2", "why", int64(1796480846), uint8(2))
	f.Add("", "", "edit", "", "", int64(-62135596800), uint8(0))
	f.Fuzz(func(t *testing.T, requestID, principal, tool, policy, detail string, unix int64, effect uint8) {
		rec := carmy.AuditRecord{Time: time.Unix(unix, 0).UTC(), Decision: carmy.AuditExecuted, RequestID: requestID, Principal: principal,
			Tool: tool, Effect: carmy.Effect(effect % 6), Policies: []string{policy}, Detail: detail}
		encodesAsTheJSONLibrary(t, rec)
	})
}

func encodesAsTheJSONLibrary(t *testing.T, rec carmy.AuditRecord) {
	t.Helper()
	want, wantErr := jsonv2.Marshal(rec, jsonv2.Deterministic(true))
	var out bytes.Buffer
	err := carmy.NewJSONLinesAuditor(&out).Audit(context.Background(), rec)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("Audit error %v, the JSON library's %v", err, wantErr)
	}
	if err != nil {
		if out.Len() != 0 {
			t.Fatalf("a refused record was written: %q", out.String())
		}
		return
	}
	if got := strings.TrimSuffix(out.String(), "\n"); got != string(want) {
		t.Fatalf("wrote  %s\nlibrary %s", got, want)
	}
}
