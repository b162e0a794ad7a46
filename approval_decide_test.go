package carmy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestDecisionRefusedAlikeEverywhere: a decision on an approval that is no
// longer pending gets the same error from Registry.Decide as from the HTTP
// API, both deciding by one path: a conflict that names the approval's
// status.
func TestDecisionRefusedAlikeEverywhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, reg, _ := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	_, err := reg.Execute(ctx, carmy.Call{Tool: "delete_note", Input: []byte(`{"id":7}`), Principal: "alice"})
	var pending *carmy.Error
	if !errors.As(err, &pending) {
		t.Fatalf("err = %v; want a pending approval", err)
	}
	id, _ := pending.Details["approval_id"].(string)
	if id == "" {
		t.Fatalf("err = %v; want a pending approval", err)
	}
	if err := reg.Decide(ctx, id, true, "person:bob"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, id string
		status   int
		code     carmy.Code
		detail   string // the status a conflict names
	}{
		{"decided", id, 409, carmy.CodeConflict, "approved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := reg.Decide(ctx, tt.id, false, "person:bob")
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != tt.code || e.Details["status"] != tt.detail {
				t.Fatalf("Decide: %v (details %v); want %s naming status %q", err, e.Details, tt.code, tt.detail)
			}
			status, body := httpDo(t, person, "POST", srv.URL+"/approvals/"+tt.id+"/deny", "")
			if status != tt.status || errObj(body)["message"] != e.Message || detail(body, "status") != tt.detail {
				t.Fatalf("HTTP: %d %v; want %d with Decide's error %q", status, body, tt.status, e.Message)
			}
		})
	}
}
