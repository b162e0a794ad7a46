package carmy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

type approvalCase struct {
	name     string
	url      bool   // the client takes URL elicitation
	action   string // the client's answer to it
	decision string // what the person does: approve, deny or nothing
	code     string // "" for success
	runs     int32
}

// A client that takes URL elicitation is sent the approval's page; its
// call waits for the person's decision, then runs once or gets the denial.
// Others get the approval URL in the refusal's text.
func TestMCPApprovalByURL(t *testing.T) {
	t.Parallel()
	tests := []approvalCase{
		{"approved", true, "accept", "approve", "", 1},
		{"denied", true, "accept", "deny", "permission_denied", 0},
		{"the user declines to open the page", true, "decline", "", "permission_denied", 0},
		{"the user dismisses the request", true, "cancel", "", "confirmation_required", 0},
		{"no URL elicitation", false, "", "", "confirmation_required", 0},
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				testMCPApprovalByURL(t, version, tt)
			})
		}
	}
}

// testMCPApprovalByURL runs one case of TestMCPApprovalByURL in one
// protocol version.
func testMCPApprovalByURL(t *testing.T, version string, tt approvalCase) {
	srv, reg, runs := approvalServer(t, carmy.New())
	person := consoleClient(t, srv, reg)
	var sent *mcp.ElicitParams
	decided := make(chan time.Time, 1)
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		sent = req.Params
		if tt.decision != "" {
			go func() {
				time.Sleep(20 * time.Millisecond)
				decided <- time.Now()
				httpDo(t, person, "POST", srv.URL+"/approvals/"+req.Params.ElicitationID+"/"+tt.decision, "")
			}()
		}
		return &mcp.ElicitResult{Action: tt.action}, nil
	}}
	if tt.url {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	s := mcpConnect(t, srv.URL, version, opts)
	if got := s.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("protocol %s; want %s", got, version)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if tt.url && (sent == nil || sent.Mode != "url" || sent.URL != srv.URL+"/console?approval="+sent.ElicitationID) {
		t.Fatalf("elicitation = %+v; want the approval's page", sent)
	}
	if !tt.url && sent != nil {
		t.Fatalf("a client without URL elicitation was asked: %+v", sent)
	}
	if tt.code == "" {
		if res.IsError {
			t.Fatalf("result = %+v; want success", res.Content[0])
		}
		t.Logf("from sending the approval to the call's answer: %v", time.Since(<-decided))
	} else {
		e := errorObject(t, res)
		if e["code"] != tt.code {
			t.Fatalf("error = %v; want %s", e, tt.code)
		}
		if tt.code == "confirmation_required" && !strings.Contains(e["message"].(string), srv.URL+"/console?approval=") {
			t.Fatalf("message = %q; want the approval URL in it, for the model to show", e["message"])
		}
	}
	if runs.Load() != tt.runs {
		t.Fatalf("runs = %d; want %d", runs.Load(), tt.runs)
	}
}
