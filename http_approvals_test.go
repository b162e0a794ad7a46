package carmy_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestSeparationOfDuties: the principal that made a call never decides its
// approval, whatever it holds: an agent whose token carries approve:* (as
// OAuth tokens that carry all of a user's permissions do) cannot approve
// or deny its own call; another approver can.
func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	srv, _, runs := approvalServer(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent", Permissions: []string{"approve:*"}},
		carmy.Token{SHA256: carmy.HashToken("agent2"), Principal: "agent2", Permissions: []string{"approve:delete_note"}},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:*"}},
	)))
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	c := http.DefaultClient
	for _, tok := range []string{"agent", "agent2"} {
		t.Run(tok, func(t *testing.T) {
			_, body := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as(tok)...)
			id := detail(body, "approval_id")
			if id == "" {
				t.Fatalf("call = %v; want an approval", body)
			}
			for _, decision := range []string{"approve", "deny"} {
				status, body := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/"+decision, "{}", as(tok)...)
				if status != 403 || errObj(body)["code"] != "permission_denied" || detail(body, "reason") != "own_call" {
					t.Fatalf("%s deciding (%s) its own call = %d %v; want 403 own_call", tok, decision, status, body)
				}
			}
			_, got := httpDo(t, c, "GET", srv.URL+"/approvals/"+id, "", as(tok)...)
			if m := got.(map[string]any); m["status"] != "pending" || m["may_decide"] != false {
				t.Fatalf("the approval as its caller sees it = %v; want pending, may_decide false", m)
			}
			_, got = httpDo(t, c, "GET", srv.URL+"/approvals/"+id, "", as("alice")...)
			if m := got.(map[string]any); m["may_decide"] != true {
				t.Fatalf("the approval as alice sees it = %v; want may_decide true", m)
			}
			before := runs.Load()
			if status, _ := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as(tok)...); status != 403 || runs.Load() != before {
				t.Fatalf("the call after its caller tried to approve it = %d; want still refused", status)
			}
			if status, body := httpDo(t, c, "POST", srv.URL+"/approvals/"+id+"/approve", "{}", as("alice")...); status != 200 || body.(map[string]any)["approver"] != "alice" {
				t.Fatalf("alice approving = %d %v", status, body)
			}
			if status, _ := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, as(tok)...); status != 200 || runs.Load() != before+1 {
				t.Fatalf("the approved call = %d; want it run", status)
			}
		})
	}
}

// TestDecisionsOnlyFromTheConsoleOrigin: a page of an allowed origin may
// call tools, but never decide: the preflight of a decision is not
// answered, and a decision it sends anyway is refused, token or secret.
func TestDecisionsOnlyFromTheConsoleOrigin(t *testing.T) {
	t.Parallel()
	const page = "http://localhost:5173"
	srv, _, runs := approvalServer(t, carmy.New().AllowOrigins(page).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent"},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:*"}},
	)))
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, "Authorization", "Bearer agent")
	id := detail(body, "approval_id")
	preflight := func(path string) string {
		res, _ := roundTrip(t, nil, http.MethodOptions, srv.URL+path, "", "Origin", page,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
		return res.Header.Get("Access-Control-Allow-Origin")
	}
	if preflight("/tools/delete_note") != page {
		t.Fatal("the allowed origin's preflight of a call is not answered")
	}
	for _, d := range []string{"approve", "deny"} {
		if got := preflight("/approvals/" + id + "/" + d); got != "" {
			t.Fatalf("the preflight of a decision (%s) allows %q; want no CORS", d, got)
		}
		for _, h := range [][]string{
			{"Origin", page, "Sec-Fetch-Site", "same-site"},
			{"Origin", page},
			{"Origin", page, "Sec-Fetch-Site", "same-site", "Content-Type", "text/plain"},
		} {
			status, _ := httpDo(t, http.DefaultClient, "POST", srv.URL+"/approvals/"+id+"/"+d, "{}", append(h, "Authorization", "Bearer alice")...)
			if status != 403 && status != 415 {
				t.Fatalf("a decision (%s) from the allowed origin %v = %d; want it refused", d, h, status)
			}
		}
	}
	if _, got := httpDo(t, http.DefaultClient, "GET", srv.URL+"/approvals/"+id, "", "Authorization", "Bearer alice"); got.(map[string]any)["status"] != "pending" || runs.Load() != 0 {
		t.Fatalf("after the allowed origin's decisions: %v; want pending", got)
	}
}

// TestApprovalTextIsWhatRuns: the text a person is shown is made by the
// server from the canonical form: exact digits (beyond 2^53 too), and
// every character that could disguise text escaped. The same text is the
// MCP prompt's.
func TestApprovalTextIsWhatRuns(t *testing.T) {
	t.Parallel()
	type In struct {
		ID   uint64 `json:"id"`
		Path string `json:"path"`
	}
	var got atomic.Value
	tool := carmy.Tool(func(in In) error { got.Store(in); return nil }, carmy.Destructive, carmy.Name("restore"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, srv, person := consoleServer(t, tool)
	input := `{"id":9007199254740993,"path":"/srv/backups/\u202egnp.exe\u200b\u2028"}`
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/restore", input)
	id := detail(body, "approval_id")
	_, a := httpDo(t, person, "GET", srv.URL+"/approvals/"+id, "")
	text := a.(map[string]any)["text"].(string)
	want := "{\n  \"id\": 9007199254740993,\n  \"path\": \"/srv/backups/\\u202egnp.exe\\u200b\\u2028\"\n}"
	if text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if prompt := carmy.PromptInput(t, reg, "restore", input); prompt != text {
		t.Fatalf("the MCP prompt shows %q; the console %q", prompt, text)
	}
	if status, _ := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", "{}"); status != 200 {
		t.Fatal("approving failed")
	}
	if status, _ := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/restore", input); status != 200 {
		t.Fatal("the approved call failed")
	}
	if in := got.Load().(In); in.ID != 9007199254740993 || in.Path != "/srv/backups/\u202egnp.exe\u200b\u2028" {
		t.Fatalf("the tool got %+v", in)
	}
}

// TestNegativeZeroIsZero: the canonical form a person approves writes -0
// as 0, so an approval of 0 covers -0: then the tool gets 0, never the
// float -0, whether it reads a float, a free-form value, or raw JSON.
func TestNegativeZeroIsZero(t *testing.T) {
	t.Parallel()
	type In struct {
		Amount float64         `json:"amount"`
		Small  float32         `json:"small"`
		Any    any             `json:"any,omitempty"`
		Raw    json.RawMessage `json:"raw,omitempty"`
	}
	var got atomic.Value
	tool := carmy.Tool(func(in In) error { got.Store(in); return nil }, carmy.Destructive, carmy.Name("pay"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, srv, person := consoleServer(t, tool)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/pay", `{"amount":0,"small":0,"any":0,"raw":{"x":0}}`)
	id := detail(body, "approval_id")
	if status, _ := httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/approve", "{}"); status != 200 {
		t.Fatal("approving failed")
	}
	if status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/pay", `{"amount":-0,"small":-0.0,"any":-0e3,"raw":{"x":-0.0}}`); status != 200 {
		t.Fatalf("the call with -0 = %d %v; want it to run by the approval of 0", status, body)
	}
	in := got.Load().(In)
	if math.Signbit(in.Amount) || math.Signbit(float64(in.Small)) || math.Signbit(in.Any.(float64)) || string(in.Raw) != `{"x":0}` {
		t.Fatalf("the tool got %+v (signbits %v %v %v); want every zero 0", in, math.Signbit(in.Amount), math.Signbit(float64(in.Small)), math.Signbit(in.Any.(float64)))
	}
	// The Go door decodes the same way.
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "pay", Input: []byte(`{"amount":-0,"small":0}`), Permissions: []string{"confirm:pay"}}); err != nil {
		t.Fatal(err)
	}
	if in := got.Load().(In); math.Signbit(in.Amount) {
		t.Fatal("Execute handed the tool -0")
	}
}

// TestApprovedRetryReplaysDespiteANewApproval: a call that ran under an
// approval, retried with its request id after the same input got a new
// pending approval, gets its recorded outcome, not a new refusal.
func TestApprovedRetryReplaysDespiteANewApproval(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	call := func(key string) (int, any) {
		h := []string{}
		if key != "" {
			h = []string{"Idempotency-Key", key}
		}
		return httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, h...)
	}
	_, body := call("k1")
	httpDo(t, person, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/approve", "{}")
	if status, _ := call("k1"); status != 200 || runs.Load() != 1 {
		t.Fatalf("the approved call = %d", status)
	}
	// The same input again, without a request id: a new pending approval.
	if status, body := call(""); status != 403 || detail(body, "status") != "pending" {
		t.Fatalf("the same input again = %d %v; want a new pending approval", status, body)
	}
	status, again := call("k1")
	if m, _ := again.(map[string]any); status != 200 || m["replayed"] != true || runs.Load() != 1 {
		t.Fatalf("the retry with the approved call's request id = %d %v, runs %d; want its recorded outcome", status, again, runs.Load())
	}
	// Denied now: the retry still gets its outcome.
	_, body = call("")
	httpDo(t, person, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/deny", "{}")
	if status, again := call("k1"); status != 200 || again.(map[string]any)["replayed"] != true {
		t.Fatalf("the retry after a denial of the new approval = %d %v; want its recorded outcome", status, again)
	}
	if status, _ := call("k2"); status != 403 || runs.Load() != 1 {
		t.Fatalf("a new request id = %d, runs %d; want the denial", status, runs.Load())
	}
}

// TestDenialSurvivesAFlood: a requester that floods the approvals with
// calls of its own does not erase a person's denial.
func TestDenialSurvivesAFlood(t *testing.T) {
	t.Parallel()
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	id := detail(body, "approval_id")
	httpDo(t, person, "POST", srv.URL+"/approvals/"+id+"/deny", "{}")
	for i := range 1010 {
		if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "delete_note", Input: []byte(`{"id":` + strconv.Itoa(i+100) + `}`)}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Fatalf("flood call %d: %v", i, err)
		}
	}
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	if status != 403 || errObj(body)["code"] != "permission_denied" || detail(body, "approval_id") != id || runs.Load() != 0 {
		t.Fatalf("the denied call after the flood = %d %v; want the denial", status, body)
	}
}

// consoleSecret is the console secret of reg, as its console URL carries
// it.
func consoleSecret(reg *carmy.Registry) string {
	_, secret, _ := strings.Cut(reg.ConsoleURL(""), "?token=")
	return secret
}

// consoleServer serves tool on a server without authentication, and
// returns the client of the person holding its console secret.
func consoleServer(t *testing.T, tool *carmy.ToolDef) (*carmy.Registry, *httptest.Server, *http.Client) {
	t.Helper()
	reg := build(t, carmy.New().Tool(tool).Logger(quietLogger()))
	return reg, serve(t, reg), headerClient(carmy.ConsoleHeader, consoleSecret(reg))
}

// TestApprovalDocumentBytes pins the bytes of the approval documents,
// which the command reads: a summary in the list of GET /approvals, and
// one approval, with its input and its text, from GET /approvals/{id}.
func TestApprovalDocumentBytes(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New())
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":3}`)
	id, _ := errObj(body)["details"].(map[string]any)["approval_id"].(string)
	if status != 403 || id == "" {
		t.Fatalf("a destructive call = %d %v; want 403 and its approval", status, body)
	}
	stamps := regexp.MustCompile(`"(id|digest|created|expires|url)":"[^"]*"`)
	summary := `"id":"·","tool":"delete_note","principal":"","digest":"·","status":"pending","created":"·","expires":"·","url":"·","may_decide":false,"task_waits":false`
	for path, want := range map[string]string{
		"/approvals":       `[{` + summary + `}]`,
		"/approvals/" + id: `{` + summary + `,"input":{"id":3},"text":"{\n  \"id\": 3\n}"}`,
	} {
		_, raw := roundTrip(t, http.DefaultClient, "GET", srv.URL+path, "")
		if got := stamps.ReplaceAllString(strings.TrimSpace(string(raw)), `"$1":"·"`); got != want {
			t.Errorf("GET %s =\n%s\nwant\n%s", path, got, want)
		}
	}
}
