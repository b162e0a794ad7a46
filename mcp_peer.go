package carmy

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// mcpPeer is an MCP client as the runtime sees it (a [taskPeer]): the
// door's answers (a client that cannot elicit, a question that waits for
// the next round of the sessionless protocol) are made here, as the
// errors the tool returns.
type mcpPeer struct{ *mcpserve.Peer } // one pointer: held in an interface without an allocation

// peerOf is client p as the runtime holds it: nil for none, never an
// interface holding a nil pointer.
func peerOf(p *mcpserve.Peer) taskPeer {
	if p == nil {
		return nil
	}
	return mcpPeer{p}
}

func (p mcpPeer) elicitable() error {
	if !p.CanElicit() {
		return &Error{Code: CodeUnavailable, Message: "the client cannot ask its user for input: it did not declare elicitation",
			Err: &mcpserve.MissingCapability{Capability: "elicitation"}}
	}
	return nil
}

func (p mcpPeer) Elicit(ctx context.Context, name string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	res, err := p.Peer.Elicit(ctx, name, params)
	if errors.Is(err, mcpserve.ErrNeedsInput) {
		return nil, needsInput()
	}
	return res, err
}
