package store_test

import (
	"testing"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryApprovalsConformance(t *testing.T) {
	storetest.TestApprovalStore(t, func(*testing.T) store.ApprovalStore { return store.NewMemoryApprovals() })
}
