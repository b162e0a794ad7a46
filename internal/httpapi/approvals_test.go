package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// gateHost is a host whose gate refuses with a given reason; the methods
// a decision does not reach are left to the embedded nil interface.
type gateHost struct {
	Host
	refusal error
}

func (gateHost) Authenticate(*http.Request) (Identity, error) { return Identity{Principal: "bob"}, nil }

func (gateHost) Challenge(*http.Request, error, bool) string { return "" }

func (gateHost) Public(err error) *Error {
	return &Error{Code: codeInternal, Message: "internal error", Retryable: true}
}

func (gateHost) Approval(_ context.Context, id string) (store.Approval, error) {
	return store.Approval{ID: id, Tool: "wipe", Principal: "alice", Status: store.ApprovalPending}, nil
}

func (h gateHost) Decide(_ *http.Request, a store.Approval, _ bool, _ approve.Who) (store.Approval, error) {
	return a, h.refusal
}

// TestDecisionRefusalsWorded: the door words each refusal of the
// registry's one gate for the person or program at the route, and a
// refusal the gate makes for a hidden approval is a 404, as for none.
func TestDecisionRefusalsWorded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		refusal       error
		authenticated bool
		status        int
		reason, want  string
	}{
		{"own call", approve.ErrOwnCall, true, 403, "own_call", "never decides its approval"},
		{"no right, a token", approve.ErrNoRight, true, 403, "", `needs the permission "approve:wipe" or "approve:*"`},
		{"no right, the console", approve.ErrNoRight, false, 403, "", "needs the console secret"},
		{"hidden", store.ErrApprovalNotFound, true, 404, "", `no approval "a1" is visible to you`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := New(gateHost{refusal: tt.refusal}, Config{Logger: slog.New(slog.DiscardHandler), Life: context.Background(),
				Authenticated: tt.authenticated, BodyLimit: 1 << 20, BodyRead: time.Second, MCP: func() http.Handler { return http.NotFoundHandler() }})
			req := httptest.NewRequest("POST", "http://localhost/approvals/a1/approve", strings.NewReader(""))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			var got struct {
				Error struct {
					Code, Message string
					Details       map[string]any
				}
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%d %s: %v", rec.Code, body, err)
			}
			if rec.Code != tt.status || !strings.Contains(got.Error.Message, tt.want) || (tt.reason != "" && got.Error.Details["reason"] != tt.reason) {
				t.Fatalf("%d %s; want %d saying %q", rec.Code, body, tt.status, tt.want)
			}
		})
	}
}
