package store

// NewMemoryApprovalsWithLimits is NewMemoryApprovals with other bounds, so
// that tests can reach them.
func NewMemoryApprovalsWithLimits(limit, global int) ApprovalStore {
	return newMemoryApprovals(limit, global, DefaultApprovalBytes, DefaultApprovalGlobalBytes)
}

// NewMemoryApprovalsWithBytes is NewMemoryApprovals with other bounds of
// bytes.
func NewMemoryApprovalsWithBytes(byteLimit, globalBytes int) ApprovalStore {
	return newMemoryApprovals(DefaultApprovalLimit, DefaultApprovalGlobalLimit, byteLimit, globalBytes)
}
