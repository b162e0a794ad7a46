package browsertest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/carmy-dev/carmy"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots into docs/")

// The tools the console shows: one with a rich input, one that needs
// approval.

// Meta is who wrote a note and how they rate it.
type Meta struct {
	Author string `json:"author" jsonschema:"description=Who wrote the note"`
	Rating uint8  `json:"rating" validate:"max=5" jsonschema:"description=0 to 5 stars"`
}

// AddNote is the input of add_note.
type AddNote struct {
	Text     string   `json:"text" validate:"required" jsonschema:"description=What the note says"`
	Tags     []string `json:"tags,omitempty"`
	Priority string   `json:"priority" validate:"oneof=low normal high"`
	Pinned   *bool    `json:"pinned"`
	Meta     Meta     `json:"meta"`
	// RemindIn is a duration, shown in words rather than as its pattern.
	RemindIn  time.Duration `json:"remind_in,omitempty" jsonschema:"description=When to remind the team"`
	RequestID string        `json:"request_id,omitempty" carmy:"request_id"`
	// Limit and Code are optional values with rules: blank, or keeping them.
	Limit int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
	Code  string `json:"code,omitempty" validate:"omitempty,min=3"`
}

// Note is a stored note.
type Note struct {
	ID       int      `json:"id"`
	Text     string   `json:"text"`
	Tags     []string `json:"tags"`
	Priority string   `json:"priority"`
	Pinned   *bool    `json:"pinned"`
	Limit    int      `json:"limit,omitempty"`
	Code     string   `json:"code,omitempty"`
}

// DeleteNote is the input of delete_note.
type DeleteNote struct {
	ID uint64 `json:"id" validate:"min=1"`
}

// notes is the state of a test's tools.
type notes struct {
	mu      sync.Mutex
	added   int
	deleted atomic.Int32
	ran     chan time.Time // when delete_note ran
}

func (n *notes) tools() []*carmy.ToolDef {
	add := carmy.Tool(func(in AddNote) (Note, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.added++
		return Note{ID: n.added, Text: in.Text, Tags: in.Tags, Priority: in.Priority, Pinned: in.Pinned, Limit: in.Limit, Code: in.Code}, nil
	}, carmy.Write, carmy.Name("add_note"), carmy.Description("Add a note to the team's notebook."), carmy.Timeout(90*time.Second), carmy.Register(false))
	del := carmy.Tool(func(in DeleteNote) error {
		n.deleted.Add(1)
		n.ran <- time.Now()
		return nil
	}, carmy.Destructive, carmy.Name("delete_note"), carmy.Description("Delete a note for good."), carmy.RequireConfirmation(), carmy.Register(false))
	list := carmy.Tool(func() ([]Note, error) { return []Note{}, nil }, carmy.Read, carmy.Name("list_notes"),
		carmy.Description("List the notes."), carmy.Idempotent(), carmy.ParallelSafe(), carmy.Register(false))
	return []*carmy.ToolDef{add, del, list}
}

// server serves the notes tools on a loopback port, as a local server
// without authentication (unless b says otherwise) would.
func server(t *testing.T, b *carmy.Builder) (*httptest.Server, *carmy.Registry, *notes) {
	t.Helper()
	n := &notes{ran: make(chan time.Time, 4)}
	reg, err := b.Tool(n.tools()...).Logger(slog.New(slog.DiscardHandler)).Build()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = reg.Close()
	})
	return srv, reg, n
}

// browser starts a fresh headless Chromium, or skips the test without one.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path != "" {
		if _, err := exec.LookPath(path); err != nil {
			t.Fatalf("CHROMIUM=%s: %v", path, err) // asked for, so not skipped
		}
	} else {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Skip("no Chromium to test the console in: install Debian's chromium (apt-get install -y chromium), or set CHROMIUM to a browser's path")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelBrowser()
		cancelAlloc()
	})
	return ctx
}

// do runs actions in the page, failing the test on an error.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// get runs an action that reads something from the page.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// css shortens the selector of the first element a CSS selector matches.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// screenshot saves the page as docs/console-<name>.png when the flag asks.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	png := get(t, ctx, chromedp.FullScreenshot(100)) // 100: PNG
	path := filepath.Join("..", "..", "docs", "console-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

const ready = `body[data-ready="true"]`

// open loads a console page and waits until it has loaded its data.
func open(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(ready)))
	clean(t, ctx)
}

// shown is everything the page shows a person: its text, every field's
// placeholder, value and title, and the document's title.
const shown = `[document.title, document.body.innerText,
  ...[...document.querySelectorAll('input, textarea, select, option, button')].flatMap(e => [e.placeholder, e.value, e.title]),
  ...[...document.querySelectorAll('[title], [aria-label]')].flatMap(e => [e.title, e.getAttribute('aria-label')])]
  .filter(s => s).join('\n')`

// clean fails the test when the page shows a value JavaScript made up
// from a missing or mistyped one.
func clean(t *testing.T, ctx context.Context) {
	t.Helper()
	text := get(t, ctx, chromedp.Evaluate[string](shown))
	for _, bad := range []string{"undefined", "NaN", "[object Object]"} {
		if i := strings.Index(text, bad); i >= 0 {
			t.Errorf("the page shows %q: …%s…", bad, text[max(0, i-80):min(len(text), i+len(bad)+80)])
		}
	}
}

// field selects the control of an input's field by carmy's path of it.
func field(tool, path, control string) chromedp.CSS {
	return css(fmt.Sprintf(`#tool-%s .field[data-path=%q] > %s`, tool, path, control))
}

// The console lists every tool with its effect, hints and description.
func TestConsoleLoads(t *testing.T) {
	srv, reg, _ := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	who := get(t, ctx, chromedp.Text(css(`#who`)))
	effects := get(t, ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.tool .badge')].map(b => b.textContent).join(',')`))
	hints := get(t, ctx, chromedp.Text(css(`#tool-delete_note h3`)))
	desc := get(t, ctx, chromedp.Text(css(`#tool-add_note .desc`)))
	location := get(t, ctx, chromedp.Location())
	tokenShown := get(t, ctx, chromedp.Evaluate[bool](`document.getElementById('token-form').offsetParent !== null`))
	if tokenShown {
		t.Error("a server without authentication has the page ask for a token")
	}
	if !strings.Contains(who, "may decide approvals") || strings.Contains(who, "may not") {
		t.Errorf("who = %q; the console secret makes an approver", who)
	}
	if effects != "write,destructive,read" {
		t.Errorf("effect badges = %q; want write,destructive,read (sorted by tool name)", effects)
	}
	if !strings.Contains(hints, "needs approval") {
		t.Errorf("delete_note's hints = %q; want needs approval", hints)
	}
	if desc != "Add a note to the team's notebook." {
		t.Errorf("description = %q", desc)
	}
	if strings.Contains(location, "token=") {
		t.Errorf("the secret stayed in the address bar: %s", location)
	}
	// Timeouts and a duration's format, in words: add_note's own 90s, the
	// default 60s for delete_note.
	addHints := get(t, ctx, chromedp.Text(css(`#tool-add_note h3`)))
	if !strings.Contains(addHints, "timeout 1m30s") || !strings.Contains(hints, "timeout 1m") {
		t.Errorf("hints = %q / %q; want timeout 1m30s and timeout 1m", addHints, hints)
	}
	remind := get(t, ctx, chromedp.Evaluate[string](`document.querySelector('#tool-add_note .field[data-path="remind_in"] > input').placeholder`))
	if !strings.HasPrefix(remind, "a duration, e.g. 1h30m") {
		t.Errorf("remind_in's placeholder = %q; want the format in words", remind)
	}
	screenshot(t, ctx, "tools")
}

// A value that breaks a rule comes back from carmy as a field error, shown
// at its field, nested ones included.
func TestConsoleFieldError(t *testing.T) {
	srv, reg, _ := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	do(t, ctx,
		chromedp.SendKeys(field("add_note", "meta.author", "input"), "ann"),
		chromedp.SendKeys(field("add_note", "meta.rating", "input"), "9"),
		chromedp.Click(css(`#tool-add_note button[type=submit]`)),
		chromedp.WaitVisible(css(`#tool-add_note .field[data-path="meta.rating"] .field-error`)),
	)
	msg := get(t, ctx, chromedp.Text(css(`#tool-add_note .field[data-path="meta.rating"] .field-error`)))
	top := get(t, ctx, chromedp.Text(css(`#tool-add_note .field[data-path="text"] .field-error`)))
	if !strings.Contains(msg, "5") {
		t.Errorf("meta.rating's error = %q; want the rule's bound", msg)
	}
	if top == "" {
		t.Error("the missing text has no error at its field")
	}
	clean(t, ctx)
	screenshot(t, ctx, "field-error")
}

// A call from the form runs the tool and shows its output, and the
// execution appears in the list.
func TestConsoleCall(t *testing.T) {
	srv, reg, _ := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	do(t, ctx,
		chromedp.SendKeys(field("add_note", "text", "input"), "buy milk"),
		chromedp.Click(css(`#tool-add_note .field[data-path="tags"] button.add`)),
		chromedp.SendKeys(field("add_note", "tags[0]", "input"), "home"),
		chromedp.SetValue(field("add_note", "priority", "select"), `"high"`),
		chromedp.SetValue(field("add_note", "pinned", "select"), "true"),
		chromedp.SendKeys(field("add_note", "meta.author", "input"), "ann"),
		chromedp.SendKeys(field("add_note", "meta.rating", "input"), "4"),
		chromedp.Click(css(`#tool-add_note button[type=submit]`)),
		chromedp.WaitVisible(css(`#tool-add_note .result .output`)),
		chromedp.WaitVisible(css(`#executions tr.ok`)),
	)
	out := get(t, ctx, chromedp.Text(css(`#tool-add_note .result .output`)))
	row := get(t, ctx, chromedp.TextContent(css(`#executions tbody tr:first-child`)))
	var note Note
	if err := json.Unmarshal([]byte(out), &note); err != nil || note.Text != "buy milk" || note.Priority != "high" || len(note.Tags) != 1 || note.Tags[0] != "home" || note.Pinned == nil || !*note.Pinned {
		t.Fatalf("output = %s (%v); want the note as entered", out, err)
	}
	if !strings.Contains(row, "add_note") || !strings.Contains(row, "ok") {
		t.Fatalf("newest execution = %q; want add_note, ok", row)
	}
	clean(t, ctx)
	screenshot(t, ctx, "call")
}

// An optional value with rules (omitempty, then min and max) is a field of
// its kind, not JSON to write: a number field that says its range, a text
// field; left blank, the value is absent.
func TestConsoleOptionalFields(t *testing.T) {
	srv, reg, _ := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	mode := get(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#tool-add_note .field[data-path="limit"] > input') || {}).inputMode || 'none'`))
	hint := get(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#tool-add_note .field[data-path="limit"] > input') || {}).placeholder || ''`))
	code := get(t, ctx, chromedp.Evaluate[string](`(document.querySelector('#tool-add_note .field[data-path="code"] > input') || {}).type || 'none'`))
	areas := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#tool-add_note textarea').length`))
	if mode != "numeric" || hint != "integer ≥ 1, ≤ 100, or blank" {
		t.Errorf("limit's input: inputmode %q, placeholder %q; want a number field saying 1 to 100, or blank", mode, hint)
	}
	if code != "text" || areas != 0 {
		t.Errorf("code's input is %q and add_note has %d JSON areas; want a text field and none", code, areas)
	}
	call := func(limit, code string) Note {
		t.Helper()
		do(t, ctx, chromedp.Navigate(reg.ConsoleURL(srv.URL)), chromedp.WaitVisible(css(ready)),
			chromedp.SendKeys(field("add_note", "text", "input"), "note"),
			chromedp.SendKeys(field("add_note", "meta.author", "input"), "ann"),
			chromedp.SendKeys(field("add_note", "meta.rating", "input"), "1"),
			chromedp.SetValue(field("add_note", "priority", "select"), `"low"`))
		if limit != "" {
			do(t, ctx, chromedp.SendKeys(field("add_note", "limit", "input"), limit))
		}
		if code != "" {
			do(t, ctx, chromedp.SendKeys(field("add_note", "code", "input"), code))
		}
		do(t, ctx, chromedp.Click(css(`#tool-add_note button[type=submit]`)), chromedp.WaitVisible(css(`#tool-add_note .result .output`)))
		var note Note
		out := get(t, ctx, chromedp.Text(css(`#tool-add_note .result .output`)))
		if err := json.Unmarshal([]byte(out), &note); err != nil {
			t.Fatalf("output = %q: %v", out, err)
		}
		return note
	}
	if note := call("42", "abcd"); note.Limit != 42 || note.Code != "abcd" {
		t.Errorf("limit 42 and code abcd reached the tool as %+v", note)
	}
	if note := call("", ""); note.Limit != 0 || note.Code != "" {
		t.Errorf("blank limit and code reached the tool as %+v; want them absent", note)
	}
	clean(t, ctx)
}

// agent is a program calling the tools over HTTP, as a remote agent does.
type agent struct {
	t   *testing.T
	url string
}

func (a agent) call(input string) (int, map[string]any) {
	a.t.Helper()
	return a.send("POST", "/tools/delete_note", input)
}

func (a agent) send(method, path, body string) (int, map[string]any) {
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Error(err)
		return 0, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return res.StatusCode, m
}

// waitDecision polls the approval, as a simple agent does, every 100 ms.
func (a agent) waitDecision(id string) string {
	for range 300 {
		_, m := a.send("GET", "/approvals/"+id, "")
		if s, _ := m["status"].(string); s != "pending" {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "pending"
}

func details(m map[string]any) map[string]any {
	e, _ := m["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

// An agent's call waits for approval; a person approves it in the page;
// the agent's retry runs, once.
func TestConsoleApprove(t *testing.T) {
	srv, reg, n := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL)) // the person opens the printed URL once
	ag := agent{t, srv.URL}
	status, body := ag.call(`{"id":7}`)
	id, _ := details(body)["approval_id"].(string)
	link, _ := details(body)["approval_url"].(string)
	if status != 403 || id == "" || link == "" {
		t.Fatalf("the agent's call = %d %v; want confirmation_required with an approval", status, body)
	}
	retried := make(chan int, 1)
	go func() {
		if s := ag.waitDecision(id); s != "approved" {
			t.Errorf("the approval ended %s; want approved", s)
		}
		status, _ := ag.call(`{"id":7}`)
		retried <- status
	}()
	card := "#approval-" + id
	open(t, ctx, link)
	do(t, ctx, chromedp.WaitVisible(css(card+" button.approve")))
	input := get(t, ctx, chromedp.TextContent(css(card+" pre.input")))
	requester := get(t, ctx, chromedp.Text(css(card+" .requester")))
	if strings.Join(strings.Fields(input), "") != `{"id":7}` || requester != "anonymous" {
		t.Fatalf("the approval shows %q by %q; want the canonical input and the requester", input, requester)
	}
	clean(t, ctx)
	screenshot(t, ctx, "approval")
	if n.deleted.Load() != 0 {
		t.Fatal("the tool ran before the approval")
	}
	clicked := time.Now()
	do(t, ctx, chromedp.Click(css(card+" button.approve")))
	ran := <-n.ran
	if s := <-retried; s != 200 {
		t.Fatalf("the agent's retry = %d; want 200", s)
	}
	t.Logf("from the click on Approve to the agent's retry running (agent polling every 100 ms): %v", ran.Sub(clicked))
	if status, _ := ag.call(`{"id":7}`); status != 403 || n.deleted.Load() != 1 {
		t.Fatalf("another call = %d, runs %d; want a new approval: the first is used up", status, n.deleted.Load())
	}
	do(t, ctx, chromedp.WaitVisible(css(card+`.status-used`)))
	shown := get(t, ctx, chromedp.TextContent(css(card+" .status")))
	if shown != "used" {
		t.Fatalf("the page shows the approval %q; want used", shown)
	}
}

// A person denies an agent's call in the page; the agent gets the denial.
func TestConsoleDeny(t *testing.T) {
	srv, reg, n := server(t, carmy.New())
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	ag := agent{t, srv.URL}
	_, body := ag.call(`{"id":8}`)
	id, _ := details(body)["approval_id"].(string)
	link, _ := details(body)["approval_url"].(string)
	open(t, ctx, link)
	do(t, ctx, chromedp.Click(css("#approval-"+id+" button.deny")), chromedp.WaitVisible(css("#approval-"+id+".status-denied")))
	clean(t, ctx)
	if s := ag.waitDecision(id); s != "denied" {
		t.Fatalf("the approval is %s; want denied", s)
	}
	status, body := ag.call(`{"id":8}`)
	e, _ := body["error"].(map[string]any)
	if status != 403 || e["code"] != "permission_denied" || details(body)["status"] != "denied" || details(body)["approval_id"] != id {
		t.Fatalf("the agent's retry = %d %v; want permission_denied naming the denied approval", status, body)
	}
	if n.deleted.Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

// A browser without the console secret, like the agent, sees the approval
// but cannot decide it.
func TestConsoleWithoutSecretIsReadOnly(t *testing.T) {
	srv, _, _ := server(t, carmy.New())
	ctx := browser(t)
	_, body := agent{t, srv.URL}.call(`{"id":9}`)
	link, _ := details(body)["approval_url"].(string)
	open(t, ctx, link)
	notice := get(t, ctx, chromedp.Text(css(`#notice`)))
	buttons := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('button.approve, button.deny').length`))
	clean(t, ctx)
	if buttons != 0 || !strings.Contains(notice, "Read-only") {
		t.Fatalf("without the secret: %d decision buttons, notice %q; want none, and read-only", buttons, notice)
	}
	status := get(t, ctx, chromedp.Evaluate[int](`fetch('/approvals/`+details(body)["approval_id"].(string)+`/approve', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != 403 {
		t.Fatalf("the page's own approve request = %d; want 403", status)
	}
}

// With bearer tokens, the page asks for one and keeps it in the tab.
func TestConsoleWithToken(t *testing.T) {
	srv, _, _ := server(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("s3cret"), Principal: "alice", Permissions: []string{"approve:*"}})))
	ctx := browser(t)
	// Before a token, the page says what to do, in words meant for a
	// person, and no section stays on "Loading…".
	do(t, ctx,
		chromedp.Navigate(srv.URL+"/console"),
		chromedp.WaitVisible(css(`body[data-ready="locked"]`)),
		chromedp.WaitVisible(css(`#token-form`)),
	)
	clean(t, ctx)
	notice := get(t, ctx, chromedp.Text(css(`#notice`)))
	if notice != "This server needs a bearer token: enter one above. It is kept in this tab only." {
		t.Errorf("notice = %q; want the request for a token, once", notice)
	}
	if body := get(t, ctx, chromedp.Text(css(`main`))); strings.Contains(body, "Loading") || strings.Contains(body, "Authorization") {
		t.Errorf("before a token the page shows:\n%s", body)
	}
	// A wrong token is said to be refused.
	do(t, ctx,
		chromedp.SendKeys(css(`#token`), "wrong"),
		chromedp.Click(css(`#token-form button[type=submit]`)),
		chromedp.WaitVisible(css(`body[data-ready="locked"]`)),
	)
	if notice := get(t, ctx, chromedp.Text(css(`#notice`))); !strings.Contains(notice, "refused this token") {
		t.Errorf("after a wrong token, notice = %q", notice)
	}
	do(t, ctx,
		chromedp.SendKeys(css(`#token`), "s3cret"),
		chromedp.Click(css(`#token-form button[type=submit]`)),
		chromedp.WaitVisible(css(ready)),
		chromedp.WaitVisible(css(`#tool-add_note`)),
	)
	who := get(t, ctx, chromedp.Text(css(`#who`)))
	stored := get(t, ctx, chromedp.Evaluate[string](`sessionStorage.getItem('carmy.token')`))
	if !strings.Contains(who, "alice") || stored != "s3cret" {
		t.Fatalf("who = %q, stored %q; want alice, the token in session storage", who, stored)
	}
	clean(t, ctx)
	if notice := get(t, ctx, chromedp.Text(css(`#notice`))); notice != "" {
		t.Errorf("with a good token, notice = %q; want none", notice)
	}
}

// The console lists only the tools its caller may call, each with the
// permissions it requires.
func TestConsoleListsWhatTheCallerMayCall(t *testing.T) {
	srv, _, _ := server(t, carmy.New().
		EffectPermissions(map[carmy.Effect]string{carmy.Read: "tools:read", carmy.Write: "tools:write", carmy.Destructive: "tools:write"}).
		Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("reader"), Principal: "ann", Permissions: []string{"tools:read"}})))
	ctx := browser(t)
	do(t, ctx,
		chromedp.Navigate(srv.URL+"/console"),
		chromedp.WaitVisible(css(`#token-form`)),
		chromedp.SendKeys(css(`#token`), "reader"),
		chromedp.Click(css(`#token-form button[type=submit]`)),
		chromedp.WaitVisible(css(ready)),
		chromedp.WaitVisible(css(`#tool-list_notes`)),
	)
	tools := get(t, ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.tool')].map(t => t.id).join(',')`))
	hints := get(t, ctx, chromedp.Text(css(`#tool-list_notes h3`)))
	if tools != "tool-list_notes" {
		t.Errorf("tools shown = %q; want list_notes alone, the one a reader may call", tools)
	}
	if !strings.Contains(hints, "requires tools:read") {
		t.Errorf("list_notes' hints = %q; want requires tools:read", hints)
	}
}

// A call refused by a policy shows the policy's reason and names the
// policy that decided it.
func TestConsoleShowsThePolicy(t *testing.T) {
	srv, reg, _ := server(t, carmy.New().Policies(`
permit(principal, action, resource);

@id("no-notes-today")
@reason("notes are closed today")
forbid(principal, action == Action::"call", resource == Tool::"add_note");
`))
	ctx := browser(t)
	open(t, ctx, reg.ConsoleURL(srv.URL))
	do(t, ctx,
		chromedp.SendKeys(field("add_note", "text", "input"), "buy milk"),
		chromedp.SendKeys(field("add_note", "meta.author", "input"), "ann"),
		chromedp.SendKeys(field("add_note", "meta.rating", "input"), "4"),
		chromedp.SetValue(field("add_note", "priority", "select"), `"high"`),
		chromedp.Click(css(`#tool-add_note button[type=submit]`)),
		chromedp.WaitVisible(css(`#tool-add_note .result .fail .policy`)),
	)
	refusal := get(t, ctx, chromedp.Text(css(`#tool-add_note .result .fail`)))
	if !strings.Contains(refusal, "permission_denied") || !strings.Contains(refusal, "notes are closed today") || !strings.Contains(refusal, "no-notes-today") {
		t.Errorf("refusal shown = %q; want permission_denied with the policy's reason and its id", refusal)
	}
}
