package carmy_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// of returns the records of one decision.
func (l *auditLog) of(d carmy.AuditDecision) []carmy.AuditRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []carmy.AuditRecord
	for _, r := range l.recs {
		if r.Decision == d {
			out = append(out, r)
		}
	}
	return out
}

// TestApprovalDecisionsAudited: a person's approve and deny are audit
// records naming the approval, the call's principal, tool and digest and
// who decided; an attempt to decide that is refused (the caller's own
// call, or a caller without the right) is a refused record naming the
// approval and who tried.
func TestApprovalDecisionsAudited(t *testing.T) {
	t.Parallel()
	var log auditLog
	srv, _, _ := approvalServer(t, carmy.New().Audit(&log).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent", Permissions: []string{"approve:*"}},
		carmy.Token{SHA256: carmy.HashToken("bob"), Principal: "bob"},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:delete_note"}},
	)))
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	c := http.DefaultClient
	ask := func(id string) (approval, digest string) {
		_, body := httpDo(t, c, "POST", srv.URL+"/tools/delete_note", `{"id":`+id+`}`, as("agent")...)
		return detail(body, "approval_id"), detail(body, "digest")
	}
	approved, approvedDigest := ask("1")
	denied, deniedDigest := ask("2")
	for tok, status := range map[string]int{"agent": 403, "bob": 404} {
		if got, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+approved+"/approve", "{}", as(tok)...); got != status {
			t.Fatalf("%s approving = %d; want %d", tok, got, status)
		}
	}
	if status, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+approved+"/approve", "{}", as("alice")...); status != 200 {
		t.Fatalf("alice approving = %d", status)
	}
	if status, _ := httpDo(t, c, "POST", srv.URL+"/approvals/"+denied+"/deny", "{}", as("alice")...); status != 200 {
		t.Fatalf("alice denying = %d", status)
	}
	want := func(recs []carmy.AuditRecord, id, digest, principal, approver string, code carmy.Code) {
		t.Helper()
		for _, r := range recs {
			if r.ApprovalID == id && r.Digest == digest && r.Principal == principal && r.Approver == approver && r.Code == code &&
				r.Tool == "delete_note" && r.Effect == carmy.Destructive && !r.Time.IsZero() {
				return
			}
		}
		t.Fatalf("no record of approval %s (digest %s) by %q, decided by %q, code %q in %+v", id, digest, principal, approver, code, recs)
	}
	want(log.of(carmy.AuditApproved), approved, approvedDigest, "agent", "alice", "")
	want(log.of(carmy.AuditDenied), denied, deniedDigest, "agent", "alice", "")
	refused := log.of(carmy.AuditRefused)
	want(refused, approved, approvedDigest, "agent", "", carmy.CodePermissionDenied) // its own call
	want(refused, approved, approvedDigest, "bob", "", carmy.CodePermissionDenied)   // no right, not even to see it
}

// TestApprovalExpiryAudited: an approval nobody used before it expired is
// an expired record.
func TestApprovalExpiryAudited(t *testing.T) {
	t.Parallel()
	var log auditLog
	srv, _, _ := approvalServer(t, carmy.New().Audit(&log).ApprovalTimeout(50*time.Millisecond))
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":3}`)
	id := detail(body, "approval_id")
	deadline := time.Now().Add(5 * time.Second)
	for len(log.of(carmy.AuditExpired)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := log.of(carmy.AuditExpired)
	if len(got) != 1 || got[0].ApprovalID != id || got[0].Tool != "delete_note" || got[0].Digest != detail(body, "digest") {
		t.Fatalf("expired records %+v; want one of approval %s", got, id)
	}
}

// TestElicitationDecisionsAudited: the person at an MCP client who
// confirms or declines a call decides its approval, audited as any other
// decision, naming them as the approver.
func TestElicitationDecisionsAudited(t *testing.T) {
	t.Parallel()
	var log auditLog
	s := sessionlessHost(t, carmy.New().Audit(&log), new(atomic.Int32))
	for _, c := range []struct {
		in, answer string
		decision   carmy.AuditDecision
	}{
		{`{"text":"yes"}`, accept, carmy.AuditApproved},
		{`{"text":"no"}`, `{"action":"decline"}`, carmy.AuditDenied},
	} {
		_, state, _ := question(s.call("ask_then_burn", c.in, ""))
		s.call("ask_then_burn", c.in, answer("carmy/confirm", state, c.answer))
		recs := log.of(c.decision)
		if len(recs) != 1 || recs[0].ApprovalID == "" || recs[0].Approver != "elicitation:" || recs[0].Digest == "" {
			t.Fatalf("%s records %+v; want one naming the approval and the person at the client", c.decision, recs)
		}
	}
}
