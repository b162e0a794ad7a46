package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InboxPeer is the peer of a task that no MCP client started (over HTTP,
// in Go): nobody listens to the request that started it, so its tool's
// questions wait, as those of a sessionless client's task do, for answers
// handed to it with [Peer.Deliver], which come through the task (any door,
// any host). changed is told the questions that wait each time they
// change: nil once none waits. It asks for forms only; progress and logs
// go nowhere.
func InboxPeer(changed func(questions mcp.InputRequestMap)) *Peer {
	// The request says what the peer can do, as a client's would: forms,
	// in the first protocol version that has them. It goes nowhere.
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{
		mcp.MetaKeyProtocolVersion:    formProtocol,
		mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
	}}}
	return &Peer{req: req, inbox: &inbox{pending: mcp.InputRequestMap{}, waiting: map[string]chan *mcp.ElicitResult{}, changed: changed}}
}
