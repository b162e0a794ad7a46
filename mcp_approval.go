package carmy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/store"
)

// confirmOverMCP handles a confirmation_required refusal of an MCP call.
// Where form confirmation applies ([Registry.asksByForm]: by default over
// a single-client transport) a client that can show its user a form is
// asked to confirm (confirmByElicitation). Otherwise a client that
// supports URL elicitation is sent the approval's page (in a session, as a
// request; in the sessionless protocol, as a question of the call's
// result, answered in the next round): once the user opened it, the call
// waits for a person's decision there (until the approval expires or the
// client gives up), then runs again, which uses the approval up or gets
// the denial. Over a single-client transport that page is a console that
// carmy serves on a loopback port, and its URL carries the console
// secret, for the person at the client. Other clients get the refusal.
func (r *Registry) confirmOverMCP(ctx context.Context, p *mcpPeer, c Call, refusal error) (Result, error) {
	var e *Error
	if !errors.As(refusal, &e) {
		return Result{}, refusal
	}
	if r.asksByForm(p) && p.canElicit() {
		return r.confirmByElicitation(ctx, p, c, e)
	}
	id, _ := e.Details["approval_id"].(string)
	link, _ := e.Details["approval_url"].(string)
	if p.single && id != "" {
		link = r.personalApprovalURL(ctx, id, link)
	}
	if id == "" || link == "" || !p.canElicitURL() {
		return Result{}, refusal
	}
	res, err := p.ask(ctx, "carmy/approval/"+id, &mcp.ElicitParams{
		Mode:          "url",
		Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", c.Tool),
		URL:           link,
		ElicitationID: id,
	})
	if errors.Is(err, errNeedsInput) {
		return Result{}, err
	}
	if err == nil && res.Action == "decline" {
		return Result{}, r.declined(ctx, r.tools[c.Tool], c, id)
	}
	if err != nil || res.Action != "accept" {
		return Result{}, refusal
	}
	a, err := r.awaitDecision(ctx, id)
	if err != nil || a.Status == store.ApprovalPending {
		return Result{}, refusal
	}
	if !p.sessionless {
		_ = p.req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
	}
	return r.Execute(ctx, c)
}

// personalApprovalURL is the page where the person at a single-client
// transport's client decides on approval id: the console of the server
// that link (the approval's URL, if any) is on, else the console that
// carmy serves on a loopback port for the purpose, opened on the first
// need. The URL carries the console secret, if the registry has one: the
// client hands it to its user, not to the model. It is "" when no console
// can be served.
func (r *Registry) personalApprovalURL(ctx context.Context, id, link string) string {
	base, ok := strings.CutSuffix(link, "/console?approval="+url.QueryEscape(id))
	if !ok || base == "" {
		var err error
		if base, err = r.localConsole(ctx); err != nil {
			r.logger.Error("carmy: cannot serve the console for approvals", "error", err)
			return ""
		}
	}
	u, err := url.Parse(r.ConsoleURL(base))
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("approval", id)
	u.RawQuery = q.Encode()
	return u.String()
}
