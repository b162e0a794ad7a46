package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/carmy-dev/carmy"
)

// neighbour is another local server the person's browser visits, such as
// a dev server a coding agent started: it records what the browser sends
// it, and serves a page that tries to approve a call on the carmy server.
type neighbour struct {
	*httptest.Server
	mu      sync.Mutex
	cookies []string
}

func newNeighbour(t *testing.T, page string) *neighbour {
	n := &neighbour{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.cookies = append(n.cookies, r.Header.Values("Cookie")...)
		n.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(n.Close)
	return n
}

// TestConsoleSecretStaysInItsOrigin: the console secret is never in a
// cookie, which browsers send to every port of a host: a neighbouring
// server on another port of 127.0.0.1 gets nothing, and its page, even
// from an allowed origin, cannot approve the agent's call, by a simple
// request or by JSON.
func TestConsoleSecretStaysInItsOrigin(t *testing.T) {
	nb := newNeighbour(t, "<!doctype html><title>dev server</title>")
	srv, reg, n := server(t, carmy.New().AllowOrigins(nb.URL))
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	cookie := get(t, ctx, chromedp.Evaluate[string](`document.cookie`))
	stored := get(t, ctx, chromedp.Evaluate[bool](`localStorage.getItem('carmy.console') !== null`))
	if cookie != "" || !stored {
		t.Fatalf("document.cookie = %q, secret in the origin's storage %v; want no cookie, the secret stored", cookie, stored)
	}
	_, body := agent{t, srv.URL}.call(`{"id":7}`)
	id, _ := details(body)["approval_id"].(string)

	open(t, ctx, reg.ConsoleURL(srv.URL)) // opened twice: still no cookie
	do(t, ctx, chromedp.Navigate(nb.URL+"/"))
	nb.mu.Lock()
	got := strings.Join(nb.cookies, ";")
	nb.mu.Unlock()
	if got != "" {
		t.Fatalf("the neighbouring server got cookies %q", got)
	}
	secret := strings.TrimPrefix(reg.ConsoleURL(""), "/console?token=")
	for _, attempt := range []string{
		// A simple request: no preflight.
		`fetch(%q, {method: 'POST', mode: 'no-cors', credentials: 'include'}).then(() => 0, () => 0)`,
		`fetch(%q, {method: 'POST', mode: 'no-cors', credentials: 'include', headers: {'Content-Type': 'text/plain'}, body: '{}'}).then(() => 0, () => 0)`,
		// JSON, and the secret itself in its header: preflights.
		`fetch(%q, {method: 'POST', credentials: 'include', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status, () => 0)`,
		`fetch(%q, {method: 'POST', credentials: 'include', headers: {'Content-Type': 'application/json', 'X-Carmy-Console': '` + secret + `'}, body: '{}'}).then(r => r.status, () => 0)`,
	} {
		url := srv.URL + "/approvals/" + id + "/approve"
		status := get(t, ctx, chromedp.Evaluate[int](strings.ReplaceAll(attempt, "%q", `'`+url+`'`), chromedp.EvalAwaitPromise))
		if status == 200 {
			t.Fatalf("the neighbour's page approved with %s", attempt)
		}
	}
	if s := (agent{t, srv.URL}).status(id); s != "pending" || n.deleted.Load() != 0 {
		t.Fatalf("after the neighbour's page: the approval is %s; want pending", s)
	}
}

func (a agent) status(id string) string {
	_, m := a.send("GET", "/approvals/"+id, "")
	s, _ := m["status"].(string)
	return s
}

// Restore is the input of restore, whose path a person must read exactly.
type Restore struct {
	Path string `json:"path"`
	Size uint64 `json:"size"`
}

// TestConsoleShowsTheServersText: the page shows the text the server made
// from the canonical form, as it is: exact digits beyond 2^53 (a
// JavaScript number would show ...992), and a right-to-left override and
// zero-width characters escaped, so that "\u202egnp.exe" does not read as
// a .png.
func TestConsoleShowsTheServersText(t *testing.T) {
	restore := carmy.Tool(func(Restore) error { return nil }, carmy.Destructive, carmy.Name("restore"), carmy.RequireConfirmation(), carmy.Register(false))
	srv, reg, _ := server(t, carmy.New().Tool(restore))
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	_, body := agent{t, srv.URL}.send("POST", "/tools/restore", `{"path":"/srv/backups/\u202egnp.exe\u200b","size":9007199254740993}`)
	id, _ := details(body)["approval_id"].(string)
	link, _ := details(body)["approval_url"].(string)
	open(t, ctx, link)
	card := "#approval-" + id
	do(t, ctx, chromedp.WaitVisible(css(card+" button.approve")))
	shown := get(t, ctx, chromedp.TextContent(css(card+" pre.input")))
	want := "{\n  \"path\": \"/srv/backups/\\u202egnp.exe\\u200b\",\n  \"size\": 9007199254740993\n}"
	if shown != want {
		t.Fatalf("the page shows %q\nwant               %q", shown, want)
	}
}

// TestConsoleInlineApproval: a call from the console that needs approval
// shows the approval under the call, with approve and deny, to the
// approver; approving there runs the call.
func TestConsoleInlineApproval(t *testing.T) {
	srv, reg, n := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	do(t, ctx,
		chromedp.SendKeys(field("delete_note", "id", "input"), "9007199254740993"),
		chromedp.Click(css(`#tool-delete_note button[type=submit]`)),
		chromedp.WaitVisible(css(`#tool-delete_note .result .approval button.approve`)),
	)
	shown := get(t, ctx, chromedp.TextContent(css(`#tool-delete_note .result .approval pre.input`)))
	if shown != "{\n  \"id\": 9007199254740993\n}" || n.deleted.Load() != 0 {
		t.Fatalf("the inline approval shows %q, runs %d", shown, n.deleted.Load())
	}
	do(t, ctx,
		chromedp.Click(css(`#tool-delete_note .result .approval button.approve`)),
		chromedp.WaitVisible(css(`#tool-delete_note .result p.ok`)),
	)
	if n.deleted.Load() != 1 {
		t.Fatalf("runs %d after the inline approval; want 1", n.deleted.Load())
	}
}

// TestConsoleCallerNeverDecidesItsOwnCall: with tokens, a principal whose
// token carries approve:* sees its own call's approval without approve
// and deny; another approver sees them.
func TestConsoleCallerNeverDecidesItsOwnCall(t *testing.T) {
	srv, _, _ := server(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent", Permissions: []string{"approve:*"}},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:*"}})))
	req, _ := http.NewRequest("POST", srv.URL+"/tools/delete_note", strings.NewReader(`{"id":7}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer agent")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, tt := range []struct {
		token   string
		buttons int
	}{{"agent", 0}, {"alice", 2}} {
		t.Run(tt.token, func(t *testing.T) {
			ctx := browser(t)
			do(t, ctx,
				chromedp.Navigate(srv.URL+"/console"),
				chromedp.WaitVisible(css(`#token-form`)),
				chromedp.SendKeys(css(`#token`), tt.token),
				chromedp.Click(css(`#token-form button[type=submit]`)),
				chromedp.WaitVisible(css(ready)),
				chromedp.WaitVisible(css(`#approvals .approval`)),
			)
			if got := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#approvals button.approve, #approvals button.deny').length`)); got != tt.buttons {
				t.Fatalf("%s sees %d decision buttons; want %d", tt.token, got, tt.buttons)
			}
		})
	}
}
