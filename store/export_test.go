package store

// NewMemoryApprovalsWithLimits is NewMemoryApprovals with other bounds, so
// that tests can reach them.
func NewMemoryApprovalsWithLimits(limit, global int) ApprovalStore {
	return newMemoryApprovals(limit, global)
}
