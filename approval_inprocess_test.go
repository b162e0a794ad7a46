package carmy_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestDecideInProcess: a host that asked the person itself decides the
// approval in Go; the approved input then runs once, a denied one never,
// and a decision is taken once.
func TestDecideInProcess(t *testing.T) {
	ctx := context.Background()
	call := carmy.Call{Tool: "delete_note", Input: []byte(`{"id":7}`), Principal: "alice"}
	pending := func(t *testing.T, reg *carmy.Registry) string {
		t.Helper()
		_, err := reg.Execute(ctx, call)
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
			t.Fatalf("first call: %v, want confirmation_required", err)
		}
		id, _ := e.Details["approval_id"].(string)
		if id == "" {
			t.Fatalf("no approval_id in %v", e.Details)
		}
		return id
	}
	t.Run("approved runs once", func(t *testing.T) {
		var mu sync.Mutex
		var executed []carmy.AuditRecord
		audit := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			mu.Lock()
			defer mu.Unlock()
			if rec.Decision == carmy.AuditExecuted {
				executed = append(executed, rec)
			}
			return nil
		})
		_, reg, runs := approvalServer(t, carmy.New().Audit(audit))
		id := pending(t, reg)
		if err := reg.Decide(ctx, id, true, "person:alice"); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Execute(ctx, call); err != nil {
			t.Fatalf("approved call: %v", err)
		}
		if _, err := reg.Execute(ctx, call); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Fatalf("second call after one approval: %v, want confirmation_required", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("runs = %d, want 1", n)
		}
		mu.Lock()
		if len(executed) != 1 || executed[0].ApprovalID != id || executed[0].Approver != "person:alice" {
			t.Errorf("audit of the execution: %+v, want approval %s by person:alice", executed, id)
		}
		mu.Unlock()
		if err := reg.Decide(ctx, id, false, "person:alice"); carmy.CodeOf(err) != carmy.CodeConflict {
			t.Fatalf("second decision: %v, want conflict", err)
		}
	})
	t.Run("denied never runs", func(t *testing.T) {
		_, reg, runs := approvalServer(t, carmy.New())
		id := pending(t, reg)
		if err := reg.Decide(ctx, id, false, "person:alice"); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Execute(ctx, call); carmy.CodeOf(err) != carmy.CodePermissionDenied {
			t.Fatalf("denied call: %v, want permission_denied", err)
		}
		if n := runs.Load(); n != 0 {
			t.Fatalf("runs = %d, want 0", n)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		_, reg, _ := approvalServer(t, carmy.New())
		id := pending(t, reg)
		if err := reg.Decide(ctx, id, true, ""); carmy.CodeOf(err) != carmy.CodeInvalidInput {
			t.Fatalf("no approver: %v, want invalid_input", err)
		}
		if err := reg.Decide(ctx, id, true, "alice"); carmy.CodeOf(err) != carmy.CodePermissionDenied {
			t.Fatalf("the caller as approver: %v, want permission_denied", err)
		}
		if _, err := reg.Execute(ctx, call); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
			t.Fatalf("after refused decisions: %v, want confirmation_required still", err)
		}
		if err := reg.Decide(ctx, "no-such-approval", true, "person:alice"); carmy.CodeOf(err) != carmy.CodeNotFound {
			t.Fatalf("unknown approval: %v, want not_found", err)
		}
	})
}
