package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
	"github.com/carmy-dev/carmy/store/storetest"
)

func TestMemoryApprovalsConformance(t *testing.T) {
	storetest.TestApprovalStore(t, func(*testing.T) store.ApprovalStore { return store.NewMemoryApprovals() })
}

// TestMemoryApprovalsBoundedPerPrincipal: one principal's flood of
// approvals drops its own oldest, never another principal's, not even at
// the global cap; an approval already approved stays usable.
func TestMemoryApprovalsBoundedPerPrincipal(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, s store.ApprovalStore, principal string, n int) store.Approval {
		t.Helper()
		a, err := s.Create(ctx, store.Approval{
			ID: fmt.Sprintf("%s-%d", principal, n), Tool: "delete_note", Principal: principal,
			Input: []byte(fmt.Sprintf(`{"id":%d}`, n)), Digest: fmt.Sprintf("%s-digest-%d", principal, n),
			Created: time.Now(), Expires: time.Now().Add(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	held := func(t *testing.T, s store.ApprovalStore) map[string][]string {
		t.Helper()
		list, err := s.List(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, a := range list {
			out[a.Principal] = append(out[a.Principal], a.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name          string
		limit, global int
		wantMallory   []string // newest first
	}{
		{"the principal's own bound", 3, 100, []string{"mallory-9", "mallory-8", "mallory-7"}},
		{"the global cap", 100, 5, []string{"mallory-9", "mallory-8", "mallory-7"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := store.NewMemoryApprovalsWithLimits(tt.limit, tt.global)
			quiet := create(t, s, "alice", 0)
			if _, err := s.Decide(ctx, quiet.ID, true, "bob"); err != nil {
				t.Fatal(err)
			}
			create(t, s, "carol", 0)
			for n := range 10 {
				create(t, s, "mallory", n)
			}
			got := held(t, s)
			if !slices.Equal(got["mallory"], tt.wantMallory) || len(got["alice"]) != 1 || len(got["carol"]) != 1 {
				t.Fatalf("held %v; want mallory's newest %v and the others' own", got, tt.wantMallory)
			}
			if a, err := s.Consume(ctx, quiet.ID, ""); err != nil || a.Status != store.ApprovalUsed {
				t.Fatalf("alice's approved call after the flood: %+v, %v; want it usable", a, err)
			}
			if _, err := s.Get(ctx, "mallory-0"); !errors.Is(err, store.ErrApprovalNotFound) {
				t.Fatalf("mallory's oldest: %v; want it dropped", err)
			}
		})
	}
}
