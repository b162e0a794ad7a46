package carmy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

type DeleteNote struct {
	ID uint64 `json:"id"`
}

// approvalServer serves delete_note, which needs confirmation, and counts
// its executions.
func approvalServer(t *testing.T, b *carmy.Builder) (*httptest.Server, *carmy.Registry, *atomic.Int32) {
	t.Helper()
	var runs atomic.Int32
	del := carmy.Tool(func(in DeleteNote) (uint64, error) { runs.Add(1); return in.ID, nil }, carmy.Destructive,
		carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	reg := build(t, b.Tool(del).Logger(quietLogger()))
	srv := serve(t, reg)
	return srv, reg, &runs
}

// errObj returns the error object of an answer.
func errObj(v any) map[string]any {
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	return e
}

func detail(v any, key string) string {
	d, _ := errObj(v)["details"].(map[string]any)
	s, _ := d[key].(string)
	return s
}

// consoleClient is the console's page of the person who opened the
// console URL: it sends the console secret in its header, as the page
// does. Opening the URL sets no cookie.
func consoleClient(t *testing.T, srv *httptest.Server, reg *carmy.Registry) *http.Client {
	t.Helper()
	link := reg.ConsoleURL(srv.URL)
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 0 || res.Header.Get("Set-Cookie") != "" {
		t.Fatalf("opening the console URL set cookies %v; the secret never rides in a cookie", res.Cookies())
	}
	_, secret, _ := strings.Cut(link, "?token=")
	return headerClient(carmy.ConsoleHeader, secret)
}

func TestApprovalsWithoutAuthenticator(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	agent := http.DefaultClient
	person := consoleClient(t, srv, reg)
	call := func(input string) (int, any) {
		return httpDo(t, agent, "POST", srv.URL+"/tools/delete_note", input)
	}

	status, body := call(`{"id":7}`)
	id, link := detail(body, "approval_id"), detail(body, "approval_url")
	if status != 403 || errObj(body)["code"] != "confirmation_required" || id == "" {
		t.Fatalf("first call = %d %v; want confirmation_required with an approval id", status, body)
	}
	if link != srv.URL+"/console?approval="+id || !strings.Contains(errObj(body)["message"].(string), link) {
		t.Fatalf("approval_url = %q, message %q; want the console's page of the approval, in the message too", link, errObj(body)["message"])
	}
	if _, again := call(`{ "id": 7.0 }`); detail(again, "approval_id") != id {
		t.Fatalf("the same call again got approval %q; want the pending %q", detail(again, "approval_id"), id)
	}

	// The read-only views need no secret; deciding does.
	if status, list := httpDo(t, agent, "GET", srv.URL+"/approvals", ""); status != 200 || len(list.([]any)) != 1 {
		t.Fatalf("GET /approvals = %d %v; want the one pending approval", status, list)
	}
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"no secret", nil},
		{"a guessed cookie", []string{"Cookie", "carmy_console=00"}},
		{"the secret as a bearer token", []string{"Authorization", "Bearer " + strings.TrimPrefix(reg.ConsoleURL(""), "/console?token=")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if status, body := httpDo(t, agent, "POST", srv.URL+"/approvals/"+id+"/approve", "", tt.header...); status != 403 || errObj(body)["code"] != "permission_denied" {
				t.Fatalf("the agent approving = %d %v; want 403 permission_denied", status, body)
			}
		})
	}
	if runs.Load() != 0 {
		t.Fatal("the tool ran before anyone approved")
	}

	status, decided := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", "")
	if m, _ := decided.(map[string]any); status != 200 || m["status"] != "approved" || m["approver"] != "console" || m["input"].(map[string]any)["id"] != 7.0 {
		t.Fatalf("approving = %d %v; want approved by console, with the canonical input", status, decided)
	}
	if status, _ := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/deny", ""); status != 409 {
		t.Fatalf("deciding again = %d; want 409", status)
	}
	if status, body := call(`{"id":8}`); status != 403 || detail(body, "approval_id") == id {
		t.Fatalf("another input = %d %v; want its own approval", status, body)
	}
	if status, body := call(`{"id":7}`); status != 200 || runs.Load() != 1 {
		t.Fatalf("the approved call = %d %v, runs %d; want it run once", status, body, runs.Load())
	}
	if _, list := httpDo(t, person, "GET", srv.URL+"/console/executions", ""); list.([]any)[0].(map[string]any)["approval_id"] != id {
		t.Fatalf("the newest execution = %v; want it to name the approval it ran by", list.([]any)[0])
	}
	status, body = call(`{"id":7}`)
	if status != 403 || detail(body, "approval_id") == id || runs.Load() != 1 {
		t.Fatalf("the call again = %d %v, runs %d; want a new approval: the first is used up", status, body, runs.Load())
	}
	if _, got := httpDo(t, agent, "GET", srv.URL+"/approvals/"+id, ""); got.(map[string]any)["status"] != "used" {
		t.Fatalf("the approval = %v; want used", got)
	}
}

func TestApprovalDenied(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id := detail(body, "approval_id")
	// A decision is JSON, even without a body: a page may send any other
	// body to another origin without a preflight.
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if res, err := person.Post(srv.URL+"/approvals/"+id+"/deny", ct, nil); err != nil || res.StatusCode != 415 {
			t.Fatalf("deny with Content-Type %q = %v, %v; want 415", ct, res, err)
		} else {
			res.Body.Close()
		}
	}
	if res, err := person.Post(srv.URL+"/approvals/"+id+"/deny", "application/json", nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("deny = %v, %v", res, err)
	} else {
		res.Body.Close()
	}
	for range 2 {
		status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
		if status != 403 || errObj(body)["code"] != "permission_denied" || detail(body, "approval_id") != id || detail(body, "status") != "denied" {
			t.Fatalf("the denied call = %d %v; want permission_denied naming the denied approval", status, body)
		}
	}
	if status, body := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", ""); status != 409 || detail(body, "status") != "denied" {
		t.Fatalf("approving after the denial = %d %v; want 409, denied", status, body)
	}
	if runs.Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

func TestApprovalsWithTokens(t *testing.T) {
	t.Parallel()
	srv, _, runs := approvalServer(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent"},
		carmy.Token{SHA256: carmy.HashToken("other-agent"), Principal: "other-agent"},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:delete_note"}},
		carmy.Token{SHA256: carmy.HashToken("root"), Principal: "root", Permissions: []string{"approve:*"}},
		carmy.Token{SHA256: carmy.HashToken("carol"), Principal: "carol", Permissions: []string{"approve:other_tool", "confirm:other_tool"}},
	)))
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	c := http.DefaultClient
	_, body := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as("agent")...)
	id := detail(body, "approval_id")
	if id == "" {
		t.Fatalf("call = %v; want an approval", body)
	}

	if status, _ := httpDo(t, c, "GET", srv.URL+"/approvals", ""); status != 401 {
		t.Fatalf("GET /approvals without a token = %d; want 401", status)
	}
	seen := func(tok string) int {
		_, list := httpDo(t, c, "GET", srv.URL+"/approvals?status=pending", "", as(tok)...)
		return len(list.([]any))
	}
	for tok, want := range map[string]int{"agent": 1, "other-agent": 0, "alice": 1, "root": 1, "carol": 0} {
		if got := seen(tok); got != want {
			t.Errorf("%s sees %d approvals; want %d", tok, got, want)
		}
	}
	for tok, want := range map[string]int{"agent": 403, "other-agent": 404, "carol": 404} {
		if status, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "", as(tok)...); status != want {
			t.Errorf("%s approving = %d; want %d", tok, status, want)
		}
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if status, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "a=b", append(as("alice"), "Content-Type", ct)...); status != 415 {
			t.Fatalf("a decision sent as %s = %d; want 415", ct, status)
		}
	}
	if status, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "", append(as("alice"), "Origin", "https://evil.example")...); status != 403 {
		t.Fatalf("a decision from another origin = %d; want 403", status)
	}
	if status, body := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "{}", append(as("alice"), "Origin", srv.URL, "Sec-Fetch-Site", "same-origin")...); status != 200 || body.(map[string]any)["approver"] != "alice" {
		t.Fatalf("alice approving from the console's origin = %d %v", status, body)
	}
	// Another principal's identical call is not the approved one.
	if status, _ := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as("other-agent")...); status != 403 {
		t.Fatalf("another principal's call = %d; want 403", status)
	}
	if status, _ := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as("agent")...); status != 200 || runs.Load() != 1 {
		t.Fatalf("the approved call = %d, runs %d; want it run once", status, runs.Load())
	}
}

func TestApprovalRetryWithRequestID(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	call := func(key string) (int, any) {
		return httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, "Idempotency-Key", key)
	}
	_, body := call("k1")
	httpDo(t, person, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/approve", "")
	if status, _ := call("k1"); status != 200 {
		t.Fatalf("the approved call = %d", status)
	}
	status, again := call("k1")
	if m, _ := again.(map[string]any); status != 200 || m["replayed"] != true || runs.Load() != 1 {
		t.Fatalf("its retry with the same request id = %d %v, runs %d; want the replay", status, again, runs.Load())
	}
	if status, _ := call("k2"); status != 403 || runs.Load() != 1 {
		t.Fatalf("a new request id = %d, runs %d; want a new approval", status, runs.Load())
	}
}

func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New().ApprovalTimeout(50*time.Millisecond))
	person := consoleClient(t, srv, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id := detail(body, "approval_id")
	time.Sleep(80 * time.Millisecond)
	if status, body := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", ""); status != 409 || detail(body, "status") != "expired" {
		t.Fatalf("approving an expired approval = %d %v; want 409, expired", status, body)
	}
	if _, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`); detail(body, "approval_id") == id || runs.Load() != 0 {
		t.Fatalf("the call after the expiry got %v; want a new approval", body)
	}
}

// An agent that waits on GET /approvals/{id}?wait= learns of the decision
// at once, and its retry runs.
func TestApprovalWait(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id := detail(body, "approval_id")
	decided := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		decided <- time.Now()
		httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", "")
	}()
	_, got := httpDo(t, http.DefaultClient, "GET", srv.URL+"/approvals/"+id+"?wait=10s", "")
	if got.(map[string]any)["status"] != "approved" {
		t.Fatalf("waiting = %v; want approved", got)
	}
	if status, _ := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`); status != 200 || runs.Load() != 1 {
		t.Fatalf("the retry = %d", status)
	}
	t.Logf("from sending the approval to the retry's answer: %v", time.Since(<-decided))
}

// In-process callers get approvals too. Until a server listens there is
// no page to link to: the refusal has no link, never a relative one, and
// says what to do without one. The grants a host could give are in the
// details, not in the message the model reads.
func TestApprovalInProcess(t *testing.T) {
	t.Parallel()
	_, reg, _ := approvalServer(t, carmy.New())
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: "delete_note", Input: []byte(`{"id":7}`)})
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired || e.Details["approval_id"] == nil {
		t.Fatalf("err = %v; want confirmation_required with a pending approval", err)
	}
	if link, ok := e.Details["approval_url"]; ok {
		t.Errorf("approval_url = %v; want none where no console is served", link)
	}
	checkModelMessage(t, e)
}

// checkModelMessage checks the message of a confirmation_required refusal
// as a model reads it: short, no relative link, no grant strings, which
// are the host's business and live in the details.
func checkModelMessage(t *testing.T, e *carmy.Error) {
	t.Helper()
	if len(e.Message) > 300 {
		t.Errorf("message of %d characters; want at most 300: %q", len(e.Message), e.Message)
	}
	for _, host := range []string{"confirm:", "grant", " /console", "(/console"} {
		if strings.Contains(e.Message, host) {
			t.Errorf("message %q has %q", e.Message, host)
		}
	}
	if tool, _ := e.Details["tool"].(string); !strings.HasPrefix(fmt.Sprint(e.Details["permission"]), "confirm:"+tool+":") || e.Details["tool_permission"] != "confirm:"+tool {
		t.Errorf("details %v; want the grants a host may give", e.Details)
	}
}

// The retry of an approved call whose outcome is no longer recorded does
// not run again: the approval let one call run.
func TestApprovalRetryAfterRecordExpired(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New().IdempotencyTTL(20*time.Millisecond))
	person := consoleClient(t, srv, reg)
	call := func() (int, any) {
		return httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, "Idempotency-Key", "k1")
	}
	_, body := call()
	httpDo(t, person, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/approve", "")
	if status, _ := call(); status != 200 {
		t.Fatalf("the approved call = %d", status)
	}
	time.Sleep(50 * time.Millisecond)
	if status, body := call(); status != 403 || errObj(body)["code"] != "confirmation_required" || runs.Load() != 1 {
		t.Fatalf("the retry after its record expired = %d %v, runs %d; want a refusal, not a second run", status, body, runs.Load())
	}
}

// The retry, with its request id, of a call that runs by an approval,
// made while that call still runs, waits for it and gets its outcome: the
// approval it finds is used up, and the reservation stage replays. A retry
// after the outcome was recorded gets it at once; neither runs the tool.
func TestApprovalRetryWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	del := carmy.Tool(func(in DeleteNote) (uint64, error) {
		runs.Add(1)
		started <- struct{}{}
		<-gate
		return in.ID, nil
	}, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.ParallelSafe(), carmy.Register(false))
	reg := build(t, carmy.New().Tool(del).Logger(quietLogger()))
	ctx := context.Background()
	call := carmy.Call{Tool: "delete_note", Principal: "agent", RequestID: "r1", Input: []byte(`{"id":7}`)}
	_, err := reg.Execute(ctx, call)
	id, _ := wantCode(t, err, carmy.CodeConfirmationRequired).Details["approval_id"].(string)
	if err := reg.Decide(ctx, id, true, "person:alice"); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := reg.Execute(ctx, call); first <- err }()
	<-started
	retry := make(chan carmy.Result, 1)
	go func() {
		res, err := reg.Execute(ctx, call)
		if err != nil {
			t.Error(err)
		}
		retry <- res
	}()
	select {
	case res := <-retry:
		t.Fatalf("the retry answered %+v while the call ran; want it to wait for the outcome", res)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if res := <-retry; !res.Replayed || string(res.Output) != "7" {
		t.Fatalf("the retry = %+v; want the call's outcome, replayed", res)
	}
	if res, err := reg.Execute(ctx, call); err != nil || !res.Replayed || runs.Load() != 1 {
		t.Fatalf("a later retry = %+v, %v, runs %d; want the replay, one run", res, err, runs.Load())
	}
}

// An approved call that never starts (its tool was busy) leaves the
// approval for its next try.
func TestApprovalKeptWhenTheCallCannotStart(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var runs atomic.Int32
	slow := carmy.Tool(func(ctx context.Context, in DeleteNote) error {
		if in.ID == 0 {
			<-release // holds the tool's turn
		}
		runs.Add(1)
		return nil
	}, carmy.Destructive, carmy.Name("purge"), carmy.RequireConfirmation(), carmy.Timeout(50*time.Millisecond), carmy.Register(false))
	reg := build(t, carmy.New().Tool(slow).Logger(quietLogger()))
	srv := serve(t, reg)
	person := consoleClient(t, srv, reg)
	ctx := context.Background()
	call := carmy.Call{Tool: "purge", Input: []byte(`{"id":7}`), Principal: "agent"}
	_, err := reg.Execute(ctx, call)
	var e *carmy.Error
	if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
		t.Fatalf("err = %v", err)
	}
	if status, _ := httpDo(t, person, "POST", srv.URL+"/approvals/"+e.Details["approval_id"].(string)+"/approve", ""); status != 200 {
		t.Fatalf("approve = %d", status)
	}
	go func() {
		_, _ = reg.Execute(ctx, carmy.Call{Tool: "purge", Input: []byte(`{"id":0}`), Permissions: []string{"confirm:purge"}})
	}()
	time.Sleep(10 * time.Millisecond) // the blocker holds the turn
	if _, err := reg.Execute(ctx, call); carmy.CodeOf(err) != carmy.CodeUnavailable {
		t.Fatalf("the approved call while the tool is busy = %v; want unavailable", err)
	}
	close(release)
	if _, err := reg.Execute(ctx, call); err != nil {
		t.Fatalf("the approved call once the tool is free = %v; want it to run by the approval it did not use", err)
	}
	if _, err := reg.Execute(ctx, call); carmy.CodeOf(err) != carmy.CodeConfirmationRequired || runs.Load() != 2 {
		t.Fatalf("a third call = %v, runs %d; want a new approval", err, runs.Load())
	}
}

// TestApprovalAudited: the audit records of a call that ran by an approval
// name the approval and who gave it, and the refusal that asked for it is
// audited too.
func TestApprovalAudited(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		recs []carmy.AuditRecord
	)
	sink := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, rec)
		return nil
	})
	srv, reg, runs := approvalServer(t, carmy.New().Audit(sink))
	person := consoleClient(t, srv, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id := detail(body, "approval_id")
	if status, _ := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", ""); status != 200 {
		t.Fatalf("approving = %d", status)
	}
	if status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`); status != 200 || runs.Load() != 1 {
		t.Fatalf("the approved call = %d %v", status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	var decisions []string
	for _, r := range recs {
		decisions = append(decisions, string(r.Decision))
		if r.Decision == carmy.AuditRefused {
			if r.Code != carmy.CodeConfirmationRequired {
				t.Errorf("refusal record %+v; want confirmation_required", r)
			}
			continue
		}
		if r.ApprovalID != id || r.Approver != "console" {
			t.Errorf("%s record names approval %q by %q; want %q by console", r.Decision, r.ApprovalID, r.Approver, id)
		}
	}
	if want := []string{"refused", "approved", "started", "executed"}; !slices.Equal(decisions, want) {
		t.Fatalf("decisions %v; want %v", decisions, want)
	}
}

// TestApprovalDecisionLogged: a decision is logged with who decided what,
// on which input (its digest) and when, for the audit of people.
func TestApprovalDecisionLogged(t *testing.T) {
	t.Parallel()
	logs := &logSink{}
	del := carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Destructive,
		carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	reg := build(t, carmy.New().Tool(del).Logger(logs.logger()))
	srv := serve(t, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id, digest := detail(body, "approval_id"), detail(body, "digest")
	if status, _ := httpDo(t, consoleClient(t, srv, reg), "POST", srv.URL+"/approvals/"+id+"/deny", ""); status != 200 {
		t.Fatalf("denying = %d", status)
	}
	text := logs.String()
	for _, want := range []string{`msg="carmy: approval decided"`, "decision=deny", "approval_id=" + id, "tool=delete_note", "approver=console", "digest=" + digest, "decided="} {
		if !strings.Contains(text, want) {
			t.Errorf("the decision's log lacks %q:\n%s", want, text)
		}
	}
}
