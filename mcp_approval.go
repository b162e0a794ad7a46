package carmy

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/store"
)

// infoBase is the key of the auth.TokenInfo that carries the URL of the
// server an MCP request over HTTP reached, for approval URLs.
const infoBase = "carmy/base"

// confirmOverMCP handles a confirmation_required refusal of an MCP call.
// A client that supports URL elicitation is sent the approval's page: once
// the user opened it, the call waits for a person's decision there (until
// the approval expires or the client gives up), then runs again, which uses
// the approval up or gets the denial. A client that supports form
// elicitation, when the host opted in with [Builder.ElicitConfirmation],
// is asked to confirm. Other clients get the refusal, whose text holds the
// approval URL for the model to show the user.
func (r *Registry) confirmOverMCP(ctx context.Context, s *mcp.ServerSession, c Call, refusal error) (Result, error) {
	var e *Error
	if s == nil || !errors.As(refusal, &e) {
		return Result{}, refusal
	}
	id, _ := e.Details["approval_id"].(string)
	link, _ := e.Details["approval_url"].(string)
	if id != "" && link != "" && elicitsURL(s) {
		res, err := s.Elicit(ctx, &mcp.ElicitParams{
			Mode:          "url",
			Message:       fmt.Sprintf("%s needs a person's approval. Open this page to see the call and approve or deny it; the call waits for the decision.", c.Tool),
			URL:           link,
			ElicitationID: id,
		})
		if err != nil || res.Action != "accept" {
			return Result{}, refusal
		}
		a, err := r.awaitDecision(ctx, id)
		if err != nil || a.Status == store.ApprovalPending {
			return Result{}, refusal
		}
		_ = s.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
		return r.Execute(ctx, c)
	}
	if r.elicit {
		return r.confirmByElicitation(ctx, s, c, refusal)
	}
	return Result{}, refusal
}

// elicitsURL reports whether the client of a session takes URL
// elicitation.
func elicitsURL(s *mcp.ServerSession) bool {
	p := s.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}
