package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// TestMemoryApprovalsBoundedInBytes: an approval whose input would take
// its principal, or the store, beyond its bound of bytes is refused with
// ErrApprovalCapacity; nobody else's approval is dropped for it.
func TestMemoryApprovalsBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryApprovalsWithBytes(100, 250)
	n := 0
	create := func(principal string, size int) error {
		n++
		now := time.Now()
		_, err := s.Create(ctx, store.Approval{ID: principal + strings.Repeat("i", n), Tool: "t", Principal: principal,
			Input: []byte(strings.Repeat("x", size)), Digest: principal + strings.Repeat("d", n), Created: now, Expires: now.Add(time.Hour)})
		return err
	}
	for _, step := range []struct {
		principal string
		size      int
		refused   bool
	}{
		{"alice", 90, false},
		{"alice", 20, true}, // 110 > 100 for alice
		{"bob", 90, false},
		{"carol", 90, true}, // 270 > 250 in all
		{"carol", 70, false},
	} {
		err := create(step.principal, step.size)
		if got := errors.Is(err, store.ErrApprovalCapacity); got != step.refused || (err != nil && !got) {
			t.Fatalf("%s's approval of %d bytes: %v; want refused %v", step.principal, step.size, err, step.refused)
		}
	}
	list, _ := s.List(ctx, "", 0)
	if len(list) != 3 {
		t.Fatalf("the store keeps %d approvals; want alice's, bob's and carol's second", len(list))
	}
}
