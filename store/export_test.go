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

// LimiterKeys returns how many keys l remembers rates of.
func LimiterKeys(l *MemoryLimiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tats)
}
