package carmy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// exchange trades the one-time code of a console link for the console's
// secret, as the page does on its first load, and returns the answer's
// status and the secret.
func exchange(t *testing.T, link string) (int, string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	status, body := httpDo(t, http.DefaultClient, "POST", u.Scheme+"://"+u.Host+"/console/exchange", `{"code":"`+u.Query().Get("code")+`"}`)
	m, _ := body.(map[string]any)
	secret, _ := m["secret"].(string)
	return status, secret
}

// exchangeClient is the page of the person who opened a console link
// with a one-time code: it exchanged the code for the secret, and sends
// the secret in its header.
func exchangeClient(t *testing.T, link string) *http.Client {
	t.Helper()
	status, secret := exchange(t, link)
	if status != http.StatusOK || secret == "" {
		t.Fatalf("exchanging the code of %s: %d", link, status)
	}
	return headerClient(carmy.ConsoleHeader, secret)
}

var consolePage = regexp.MustCompile(`http://127\.0\.0\.1:\d+/console`)

// checkPersonRefusal checks the refusal a model reads over a single-client
// transport when the call waits for a person: short, naming `carmy
// approvals` and a console that is served, and never saying that the
// connection cannot ask the person when they were asked.
func checkPersonRefusal(t *testing.T, e map[string]any, asked bool) {
	t.Helper()
	msg, _ := e["message"].(string)
	if len(msg) > 300 || !strings.Contains(msg, "`carmy approvals`") {
		t.Errorf("message %q: want a short one that names `carmy approvals`", msg)
	}
	if asked && strings.Contains(msg, "cannot ask") {
		t.Errorf("message %q: the person was asked", msg)
	}
	page := consolePage.FindString(msg)
	if page == "" {
		t.Fatalf("message %q: want the console's address", msg)
	}
	status, body := httpDo(t, http.DefaultClient, "GET", page+"/session", "")
	if m, _ := body.(map[string]any); status != http.StatusOK || m["approvals_only"] != true || m["approver"] != false {
		t.Fatalf("the console the refusal names: %d %v; want it served, granting nothing without its secret", status, body)
	}
}

// urlOnlyClient connects to reg over stdio as a client that declares URL
// elicitation only, answering accept, and hands each page it is sent to
// sent.
func urlOnlyClient(t *testing.T, reg *carmy.Registry) (*mcp.ClientSession, chan *mcp.ElicitParams) {
	sent := make(chan *mcp.ElicitParams, 4)
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sent <- req.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	}
	return singleClient(t, reg, "stdio", "2025-11-25", opts), sent
}

// TestLoopbackConsoleServesOnlyThePerson: the console carmy opens on a
// loopback port for a stdio client serves the person's approvals, behind
// its own secret, and nothing else. A local program of any user that
// finds the port cannot call a tool as the stdio principal (over /tools or
// /mcp, by form confirmation included), read the pending approvals and
// their inputs, run the approved call before the agent, or decline the
// agent's call; the registry's other console secret opens nothing there.
func TestLoopbackConsoleServesOnlyThePerson(t *testing.T) {
	t.Parallel()
	for _, form := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "ElicitConfirmation"}[form], func(t *testing.T) {
			b := carmy.New()
			if form {
				b = b.ElicitConfirmation()
			}
			_, reg, runs := approvalServer(t, b)
			s, sent := urlOnlyClient(t, reg)
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
				done <- res
			}()
			var params *mcp.ElicitParams
			select {
			case params = <-sent:
			case <-time.After(10 * time.Second):
				t.Fatal("no URL elicitation")
			}
			u, _ := url.Parse(params.URL)
			base, id := u.Scheme+"://"+u.Host, params.ElicitationID
			initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"intruder","version":"1"}}}`
			attacks := []struct {
				name, method, path, body string
				header                   []string
			}{
				{"call a tool over /tools", "POST", "/tools/delete_note", `{"id":7}`, nil},
				{"list the tools", "GET", "/tools", "", nil},
				{"open an MCP session", "POST", "/mcp", initialize, []string{"Accept", "application/json, text/event-stream"}},
				{"call a tool over /mcp", "POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_note","arguments":{"id":7}}}`,
					[]string{"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2026-07-28"}},
				{"decline the agent's call over /mcp", "POST", "/mcp", `{"jsonrpc":"2.0","id":"carmy/approval/` + id + `","result":{"action":"decline"}}`,
					[]string{"Accept", "application/json, text/event-stream"}},
				{"list the pending approvals", "GET", "/approvals", "", nil},
				{"read the approval and its input", "GET", "/approvals/" + id, "", nil},
				{"approve", "POST", "/approvals/" + id + "/approve", "", nil},
				{"deny", "POST", "/approvals/" + id + "/deny", "", nil},
				{"approve with the registry's own console secret", "POST", "/approvals/" + id + "/approve", "",
					[]string{carmy.ConsoleHeader, strings.TrimPrefix(reg.ConsoleURL(""), "/console?token=")}},
				{"the recent calls", "GET", "/console/executions", "", nil},
			}
			for _, a := range attacks {
				status, body := httpDo(t, http.DefaultClient, a.method, base+a.path, a.body, a.header...)
				if status != http.StatusNotFound && status != http.StatusForbidden {
					t.Errorf("%s: %d %v; want it refused", a.name, status, body)
				}
				if raw, _ := json.Marshal(body); strings.Contains(string(raw), `"input"`) {
					t.Errorf("%s: the answer shows the input: %s", a.name, raw)
				}
			}
			if runs.Load() != 0 {
				t.Fatalf("runs = %d before the person decided", runs.Load())
			}
			person := exchangeClient(t, params.URL)
			if status, body := httpDo(t, person, "GET", base+"/approvals", ""); status != http.StatusOK || len(body.([]any)) != 1 {
				t.Fatalf("the person's list: %d %v", status, body)
			}
			if status, body := httpDo(t, person, "POST", base+"/approvals/"+id+"/approve", ""); status != http.StatusOK {
				t.Fatalf("the person approves: %d %v", status, body)
			}
			select {
			case res := <-done:
				if res == nil || res.IsError {
					t.Fatalf("the agent's approved call: %+v", res)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the approved call did not run")
			}
			// Whatever the intruder tries once the person approved, and the
			// person's secret does not open the tools either.
			for _, c := range []*http.Client{http.DefaultClient, person} {
				if status, _ := httpDo(t, c, "POST", base+"/tools/delete_note", `{"id":7}`); status != http.StatusNotFound {
					t.Errorf("a call over /tools after the approval: %d; want 404", status)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("runs = %d; want the agent's call alone", runs.Load())
			}
		})
	}
}

// TestConsoleLinkCodeOnce: the code in a console link sent to a client is
// good once: a second use is refused, and a use after its short time to
// live, and the page the first use opened works.
func TestConsoleLinkCodeOnce(t *testing.T) {
	t.Parallel()
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "second use", true: "late use"}[late], func(t *testing.T) {
			b := carmy.New()
			if late {
				b = carmy.SetCodeTTL(b, 50*time.Millisecond)
			}
			_, reg, runs := approvalServer(t, b)
			s, sent := urlOnlyClient(t, reg)
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
				done <- res
			}()
			params := <-sent
			u, _ := url.Parse(params.URL)
			base := u.Scheme + "://" + u.Host
			if late {
				time.Sleep(100 * time.Millisecond)
				if status, secret := exchange(t, params.URL); status != http.StatusForbidden || secret != "" {
					t.Fatalf("a late use: %d; want 403 and no secret", status)
				}
				return
			}
			person := exchangeClient(t, params.URL)
			if status, secret := exchange(t, params.URL); status != http.StatusForbidden || secret != "" {
				t.Fatalf("a second use: %d; want 403 and no secret", status)
			}
			if status, body := httpDo(t, person, "POST", base+"/approvals/"+params.ElicitationID+"/approve", ""); status != http.StatusOK {
				t.Fatalf("the first use's page approves: %d %v", status, body)
			}
			if res := <-done; res == nil || res.IsError || runs.Load() != 1 {
				t.Fatalf("the approved call: %+v, runs %d", res, runs.Load())
			}
		})
	}
}

// TestLoopbackConsoleScoped: on a registry with an authenticator, the
// console served for the stdio session's person shows and decides the
// calls of the stdio principal alone, never those that other principals
// made over HTTP into the same store.
func TestLoopbackConsoleScoped(t *testing.T) {
	t.Parallel()
	srv, reg, _ := approvalServer(t, carmy.New().StdioIdentity(carmy.Identity{Principal: "local"}).Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("bob-secret"), Principal: "bob"})))
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":1}`, "Authorization", "Bearer bob-secret")
	bobs := detail(body, "approval_id")
	s, sent := urlOnlyClient(t, reg)
	go func() {
		_, _ = s.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
	}()
	params := <-sent
	u, _ := url.Parse(params.URL)
	base := u.Scheme + "://" + u.Host
	person := exchangeClient(t, params.URL)
	status, list := httpDo(t, person, "GET", base+"/approvals", "")
	items, _ := list.([]any)
	if status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["id"] != params.ElicitationID {
		t.Fatalf("the person's list: %d %v; want the stdio call's approval alone", status, list)
	}
	if status, _ := httpDo(t, person, "POST", base+"/approvals/"+bobs+"/approve", ""); status != http.StatusNotFound {
		t.Fatalf("approving bob's call from the stdio console: %d; want 404", status)
	}
}

// TestRefusalOverStdioNamesWhatExists: over stdio, a client that cannot
// ask its user is refused with what the person can do: `carmy approvals`,
// and the console, which is served; a person who cancelled the page they
// were sent is not said to be unreachable.
func TestRefusalOverStdioNamesWhatExists(t *testing.T) {
	t.Parallel()
	t.Run("no elicitation", func(t *testing.T) {
		_, reg, _ := approvalServer(t, carmy.New())
		s := singleClient(t, reg, "stdio", "2025-11-25", &mcp.ClientOptions{})
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
		if err != nil {
			t.Fatal(err)
		}
		checkPersonRefusal(t, errorObject(t, res), false)
	})
	t.Run("URL elicitation cancelled", func(t *testing.T) {
		_, reg, _ := approvalServer(t, carmy.New())
		s := singleClient(t, reg, "stdio", "2025-11-25", &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "cancel"}, nil
			},
		})
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
		if err != nil {
			t.Fatal(err)
		}
		e := errorObject(t, res)
		if e["code"] != "confirmation_required" {
			t.Fatalf("%v; want confirmation_required", e)
		}
		checkPersonRefusal(t, e, true)
	})
}

// TestDecisionWithoutSecretSaysWhere: on a server without an
// authenticator, a decision without the console secret is refused with
// where the approver's link is, not with a permission nobody can hold.
func TestDecisionWithoutSecretSaysWhere(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New())
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":3}`)
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/approve", "")
	if msg, _ := errObj(body)["message"].(string); status != http.StatusForbidden || !strings.Contains(msg, "console secret") || !strings.Contains(msg, "`carmy approvals`") {
		t.Fatalf("%d %v; want 403 saying where the approver's link is", status, body)
	}
}

// TestNoPathReachesTheModel: no text a model or client reads names the
// file that holds a console's secret, or any path: an agent with a shell
// that ran as the same user would read the file and approve its own call.
// Checked: the refusal over stdio (message and details, host_help
// included), a stdio task's status, the loopback console's 403 and
// session, and, on a server that wrote its console file, the refusal, the
// approvals route's 403 and the console's session.
func TestNoPathReachesTheModel(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir) // serial: where every console file goes
	var texts []string
	keep := func(what string, v any) {
		b, _ := json.Marshal(v)
		texts = append(texts, what+": "+string(b))
	}

	_, reg, _ := approvalServer(t, carmy.New())
	s := singleClient(t, reg, "stdio", "2025-11-25", &mcp.ClientOptions{})
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	refusal := errorObject(t, res)
	keep("the refusal over stdio", refusal)
	keep("its _meta", res.Meta)
	base := consolePage.FindString(refusal["message"].(string))
	if base == "" {
		t.Fatalf("refusal %v; want the loopback console named", refusal)
	}
	approval, _ := obj(refusal["details"])["approval_id"].(string)
	for _, path := range []string{"/approvals", "/approvals/" + approval, "/console/session"} {
		_, body := httpDo(t, http.DefaultClient, "GET", strings.TrimSuffix(base, "/console")+path, "")
		keep("the loopback console's "+path, body)
	}
	_, body := httpDo(t, http.DefaultClient, "POST", strings.TrimSuffix(base, "/console")+"/approvals/"+approval+"/approve", "{}")
	keep("the loopback console's decision", body)

	_, reg2, _ := approvalServer(t, carmy.New())
	_, call, _, _ := stdioTasksSession(t, reg2)
	id := startSessionTask(t, call, "delete_note", `{"id":8}`)
	waitFor(t, "the task to wait for its person", func() bool {
		r, _ := call("tasks/get", `{"taskId":"`+id+`"}`)
		keep("the stdio task", r)
		return r["status"] == "input_required"
	})

	del := carmy.Tool(func(DeleteNote) error { return nil }, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	printed, _ := listen(t, carmy.New().Tool(del))
	link := consoleURLPattern.FindString(printed)
	if link == "" {
		t.Fatalf("printed %q; want the console URL", printed)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "carmy-console-*.url")); len(files) < 2 {
		t.Fatalf("console files %v; want the loopback console's and the HTTP server's", files)
	}
	httpBase := link[:strings.Index(link, "/console")]
	_, body = httpDo(t, http.DefaultClient, "POST", httpBase+"/tools/delete_note", `{"id":1}`)
	keep("the HTTP refusal", body)
	_, body = httpDo(t, http.DefaultClient, "POST", httpBase+"/approvals/"+detail(body, "approval_id")+"/approve", "{}")
	keep("the approvals route's 403", body)
	_, body = httpDo(t, http.DefaultClient, "GET", httpBase+"/console/session", "")
	keep("the console's session", body)

	path := regexp.MustCompile(`(^|[^:/\w.])/(tmp|run|home|var|Users|private)/`)
	for _, text := range texts {
		if strings.Contains(text, dir) || strings.Contains(text, "carmy-console") || strings.Contains(text, ".url") || path.MatchString(text) {
			t.Errorf("%s\nnames a path; want none", text)
		}
	}
}
