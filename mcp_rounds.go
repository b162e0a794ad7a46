package carmy

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// missingCapability is the protocol error of a sessionless call that ended
// with a question its client cannot answer, if err is one.
func missingCapability(p *mcpserve.Peer, err error) (*jsonrpc.Error, bool) {
	var m *mcpserve.MissingCapability
	if !p.Sessionless() || !errors.As(err, &m) {
		return nil, false
	}
	return m.RPCError(), true
}
