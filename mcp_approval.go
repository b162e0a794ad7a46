package carmy

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/store"
)

// confirmOverMCP handles a confirmation_required refusal of an MCP call.
// A client that supports URL elicitation is sent the approval's page (in
// a session, as a request; in the sessionless protocol, as a question of
// the call's result, answered in the next round): once the user opened
// it, the call waits for a person's decision there (until the approval
// expires or the client gives up), then runs again, which uses the
// approval up or gets the denial. A client that supports form
// elicitation, when the host opted in with [Builder.ElicitConfirmation],
// is asked to confirm. Other clients get the refusal, whose text holds the
// approval URL for the model to show the user.
func (r *Registry) confirmOverMCP(ctx context.Context, p *mcpPeer, c Call, refusal error) (Result, error) {
	var e *Error
	if !errors.As(refusal, &e) {
		return Result{}, refusal
	}
	id, _ := e.Details["approval_id"].(string)
	link, _ := e.Details["approval_url"].(string)
	if id != "" && link != "" && p.canElicitURL() {
		res, err := p.ask(ctx, "carmy/approval/"+id, &mcp.ElicitParams{
			Mode:          "url",
			Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", c.Tool),
			URL:           link,
			ElicitationID: id,
		})
		if errors.Is(err, errNeedsInput) {
			return Result{}, err
		}
		if err != nil || res.Action != "accept" {
			return Result{}, refusal
		}
		a, err := r.awaitDecision(ctx, id)
		if err != nil || a.Status == store.ApprovalPending {
			return Result{}, refusal
		}
		if !p.modern {
			_ = p.req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
		}
		return r.Execute(ctx, c)
	}
	if r.elicit {
		return r.confirmByElicitation(ctx, p, c, refusal)
	}
	return Result{}, refusal
}
