package carmy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy/store"
)

// tableAsker is a door that answers every question with answer, after
// before (a person deciding where approvals are decided), and records
// what the decision table asked of it.
type tableAsker struct {
	r      *Registry
	before func(ctx context.Context, r *Registry, id string)
	answer personAnswer
	told   *store.Approval // the approval the door was told lets the call run
	stood  *bool           // asked, when the refusal stood
}

func (a *tableAsker) confirmedBefore(context.Context, string) (string, bool) { return "", false }

func (a *tableAsker) ask(ctx context.Context, q personQuestion) personAnswer {
	if a.before != nil {
		a.before(ctx, a.r, q.pending.ID)
		return a.r.awaitPerson(ctx, q.pending.ID)
	}
	return a.answer
}

func (a *tableAsker) accepted(_ context.Context, _ personQuestion, ap store.Approval) { a.told = &ap }

func (a *tableAsker) standing(_ context.Context, q personQuestion, asked bool) error {
	a.stood = &asked
	return q.refusal
}

// TestConfirmationDecisionTable pins what each door-neutral answer does to
// a call, whichever door asked: the one switch (answered) decides it.
func TestConfirmationDecisionTable(t *testing.T) {
	t.Parallel()
	decide := func(approve bool) func(context.Context, *Registry, string) {
		return func(ctx context.Context, r *Registry, id string) {
			if err := r.Decide(ctx, id, approve, "person:bob"); err != nil {
				t.Errorf("Decide: %v", err)
			}
		}
	}
	tests := []struct {
		name     string
		answer   personAnswer
		before   func(context.Context, *Registry, string)
		runs     int32
		code     Code
		reason   string
		status   store.ApprovalStatus // the approval's, after the call
		accepted bool                 // the door was told the approval lets the call run
		standing string               // "asked", "not asked": the door worded the refusal that stands
	}{
		{name: "accepted", answer: personAnswer{verdict: accepted}, runs: 1, status: store.ApprovalUsed, accepted: true},
		{name: "declined", answer: personAnswer{verdict: declined}, code: CodePermissionDenied, reason: "declined", status: store.ApprovalDenied},
		{name: "approved where approvals are decided", before: decide(true), runs: 1, status: store.ApprovalUsed},
		{name: "denied where approvals are decided", before: decide(false), code: CodePermissionDenied, status: store.ApprovalDenied},
		{name: "unanswered", answer: personAnswer{verdict: unanswered}, code: CodeConfirmationRequired, status: store.ApprovalPending, standing: "asked"},
		{name: "unsupported", answer: personAnswer{verdict: unsupported}, code: CodeConfirmationRequired, status: store.ApprovalPending, standing: "not asked"},
		{name: "next round", answer: personAnswer{verdict: nextRound}, code: CodeConfirmationRequired, status: store.ApprovalPending},
		{name: "broken", answer: personAnswer{verdict: broken, field: FieldError{Path: "confirm", Message: "must be a boolean"}}, code: CodeInvalidInput, status: store.ApprovalPending},
		{name: "failed", answer: personAnswer{verdict: failed, err: errors.New("state lost")}, code: CodeUnavailable, status: store.ApprovalPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			tool := Tool(func(struct {
				OrderID int `json:"order_id"`
			}) error {
				runs.Add(1)
				return nil
			}, Destructive, Name("cancel_order"), RequireConfirmation(), Register(false))
			r, err := New().Tool(tool).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			asker := &tableAsker{r: r, answer: tt.answer, before: tt.before}
			ctx := context.Background()
			_, err = r.dispatch(ctx, Call{Tool: "cancel_order", Principal: "agent", Input: []byte(`{"order_id":7}`)}, via{asker: asker}, nil)
			if got := CodeOf(err); got != tt.code {
				t.Fatalf("code %q (%v), want %q", got, err, tt.code)
			}
			var e *Error
			if tt.reason != "" && (!errors.As(err, &e) || e.Details["reason"] != tt.reason) {
				t.Errorf("error %v, want reason %q", err, tt.reason)
			}
			if got := runs.Load(); got != tt.runs {
				t.Errorf("the tool ran %d times, want %d", got, tt.runs)
			}
			list, lerr := r.approvals.store.List(ctx, "", 10)
			if lerr != nil || len(list) != 1 {
				t.Fatalf("approvals %v, %v; want one", list, lerr)
			}
			if list[0].Status != tt.status {
				t.Errorf("approval %s, want %s", list[0].Status, tt.status)
			}
			if (asker.told != nil) != tt.accepted {
				t.Errorf("door told of the acceptance: %v, want %v", asker.told != nil, tt.accepted)
			}
			standing := ""
			if asker.stood != nil {
				standing = map[bool]string{true: "asked", false: "not asked"}[*asker.stood]
			}
			if standing != tt.standing {
				t.Errorf("the door worded the refusal: %q, want %q", standing, tt.standing)
			}
		})
	}
}
