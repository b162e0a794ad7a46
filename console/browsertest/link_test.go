package browsertest

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// stdioAgent connects an agent to reg as a stdio client does, declaring
// URL elicitation only, and has it call delete_note: it returns the page
// the client is sent for its user, and a channel that gets the call's
// result.
func stdioAgent(t *testing.T, reg *carmy.Registry) (*mcp.ElicitParams, chan *mcp.CallToolResult) {
	t.Helper()
	serverT, clientT := mcp.NewInMemoryTransports()
	served := make(chan struct{})
	go func() { defer close(served); _ = reg.ServeMCP(t.Context(), serverT) }()
	sent := make(chan *mcp.ElicitParams, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			sent <- req.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	s, err := client.Connect(t.Context(), clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); <-served })
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
		done <- res
	}()
	select {
	case p := <-sent:
		return p, done
	case <-time.After(10 * time.Second):
		t.Fatal("no page sent to the client")
	}
	return nil, nil
}

// TestConsoleOneTimeLink: the link a stdio client is sent carries a
// one-time code; the page exchanges it on its first load, takes it out of
// the address bar, and decides the call, which runs once. The same link
// opened again, in another browser, grants nothing: the page says the
// link was used and where the person can decide instead.
func TestConsoleOneTimeLink(t *testing.T) {
	_, reg, n := server(t, carmy.New())
	params, done := stdioAgent(t, reg)
	if u, _ := url.Parse(params.URL); u.Query().Get("code") == "" || u.Query().Get("token") != "" {
		t.Fatalf("the link %s; want a one-time code, never the secret", params.URL)
	}
	ctx := browser(t)
	open(t, ctx, params.URL)
	card := "#approval-" + params.ElicitationID
	do(t, ctx, chromedp.WaitVisible(css(card+" button.approve")))
	if loc := get(t, ctx, chromedp.Location()); strings.Contains(loc, "code=") {
		t.Fatalf("the address bar still holds the code: %s", loc)
	}
	if hidden := get(t, ctx, chromedp.Evaluate[bool](`document.getElementById('tools-section').hidden`)); !hidden {
		t.Error("the console of a stdio session shows tools, which it does not serve")
	}
	do(t, ctx, chromedp.Click(css(card+" button.approve")))
	select {
	case res := <-done:
		if res == nil || res.IsError || n.deleted.Load() != 1 {
			t.Fatalf("the approved call: %+v, ran %d times", res, n.deleted.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the approved call did not run")
	}

	other := browser(t)
	open(t, other, params.URL)
	notice := get(t, other, chromedp.Text(css(`#notice`)))
	shown := get(t, other, chromedp.Text(css(`#approvals`)))
	buttons := get(t, other, chromedp.Evaluate[int](`document.querySelectorAll('button.approve, button.deny').length`))
	if buttons != 0 || !strings.Contains(notice, "used before or has expired") || !strings.Contains(shown, "carmy approvals") {
		t.Fatalf("the link used again: %d buttons, notice %q, approvals %q", buttons, notice, shown)
	}
}

// TestConsoleSaysWhereTheApproversLinkIs: an approval link opened without
// the secret says how the person decides (carmy approvals), and never
// names the console file; on a local HTTP server and on a stdio session's
// console.
func TestConsoleSaysWhereTheApproversLinkIs(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // where the files go
	t.Run("stdio", func(t *testing.T) {
		_, reg, _ := server(t, carmy.New())
		params, _ := stdioAgent(t, reg)
		u, _ := url.Parse(params.URL)
		ctx := browser(t)
		open(t, ctx, u.Scheme+"://"+u.Host+"/console?approval="+params.ElicitationID)
		shown := get(t, ctx, chromedp.Text(css(`#approvals`)))
		if !strings.Contains(shown, "carmy approvals") || strings.Contains(shown, "carmy-console-") {
			t.Fatalf("the approvals say %q; want carmy approvals, and no file named", shown)
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		srv, _, _ := server(t, carmy.New())
		_, body := agent{t, srv.URL}.call(`{"id":9}`)
		link, _ := details(body)["approval_url"].(string)
		ctx := browser(t)
		open(t, ctx, link)
		where := get(t, ctx, chromedp.Text(css(`#approval-`+details(body)["approval_id"].(string)+` .where`)))
		if !strings.Contains(where, "carmy approvals") || strings.Contains(where, "You may not decide this approval.") {
			t.Fatalf("the approval says %q; want where the approver's link is", where)
		}
	})
}
