package store

import "context"

// DecisionWaiter is an optional capability of an [ApprovalStore] that
// several hosts share: AwaitDecision returns the approval with that id
// once it is no longer pending (decided, used or expired), waking through
// the store's own notifications when a person decides on any host, or
// with ctx's error and the approval as last seen when ctx is done first.
// A registry uses it for GET /approvals/{id}?wait= and for MCP clients
// waiting on an approval page; without it, a decision made on another
// host is seen by polling.
type DecisionWaiter interface {
	AwaitDecision(ctx context.Context, id string) (Approval, error)
}
