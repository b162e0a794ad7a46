package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// stdioAgent serves a registry with drop_table over stdio, to a client
// that cannot ask its user anything (no elicitation), as the MCP
// Inspector's CLI does.
func stdioAgent(t *testing.T) *mcp.ClientSession {
	t.Helper()
	reg, err := carmy.New().Logger(slog.New(slog.DiscardHandler)).Tool(carmy.Tool(dropTable, carmy.Destructive, carmy.RequireConfirmation(), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = reg.ServeStdio(ctx, inR, outW)
		_ = outW.Close()
	}()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "inspector-cli", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		cancel()
		<-served
		_ = reg.Close()
	})
	return s
}

// drop calls drop_table and returns the error object of a refusal, nil
// when the call ran.
func drop(t *testing.T, s *mcp.ClientSession, table string) map[string]any {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "drop_table", Arguments: map[string]any{"table": table}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		return nil
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

var approvalID = regexp.MustCompile(`approval ([0-9a-f-]{36})`)

// TestApprovalsOverStdio: over stdio with a client that cannot ask its
// user, the refusal names a command that exists, carmy approvals; it lists
// the call with its input, from the server's owner-only file; approving
// lets the agent's next call run once; denying keeps it refused; an
// unknown id is an error.
func TestApprovalsOverStdio(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir) // serial: the whole process sees it
	if code, out, _ := carmyRun("approvals"); code != 0 || !strings.Contains(out, "No carmy server") {
		t.Fatalf("with no server: exit %d, %q", code, out)
	}
	s := stdioAgent(t)
	before := drops.Load()
	e := drop(t, s, "users")
	msg, _ := e["message"].(string)
	m := approvalID.FindStringSubmatch(msg)
	if e["code"] != "confirmation_required" || m == nil || !strings.Contains(msg, "`carmy approvals`") {
		t.Fatalf("refusal %v; want one that names carmy approvals and the approval", e)
	}
	if !strings.Contains(usageText(), "approvals") {
		t.Fatal("the refusal names carmy approvals, which this command does not have")
	}
	id := m[1]
	files, _ := filepath.Glob(filepath.Join(dir, "carmy-console-*.url"))
	if len(files) != 1 {
		t.Fatalf("console files %v; want the stdio server's", files)
	}
	code, out, errOut := carmyRun("approvals")
	if code != 0 || !strings.Contains(out, id+"  drop_table") || !strings.Contains(out, `"table": "users"`) {
		t.Fatalf("carmy approvals: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := carmyRun("approvals", "approve", "no-such-id"); code != 1 || !strings.Contains(errOut, "no local carmy server has approval") {
		t.Fatalf("approving an unknown id: exit %d, %q", code, errOut)
	}
	if code, out, errOut := carmyRun("approvals", "approve", id); code != 0 || !strings.Contains(out, "Approved") {
		t.Fatalf("carmy approvals approve: exit %d\n%s\n%s", code, out, errOut)
	}
	if e := drop(t, s, "users"); e != nil || drops.Load() != before+1 {
		t.Fatalf("the approved call: %v, ran %d times", e, drops.Load()-before)
	}
	if e := drop(t, s, "users"); e == nil || drops.Load() != before+1 {
		t.Fatalf("the approval ran twice: %v", e)
	}

	e = drop(t, s, "orders")
	id = approvalID.FindStringSubmatch(e["message"].(string))[1]
	if code, out, errOut := carmyRun("approvals", "deny", id); code != 0 || !strings.Contains(out, "Denied") {
		t.Fatalf("carmy approvals deny: exit %d\n%s\n%s", code, out, errOut)
	}
	if e := drop(t, s, "orders"); e == nil || e["code"] != "permission_denied" || drops.Load() != before+1 {
		t.Fatalf("the denied call: %v", e)
	}
	// The third call of users waits for a new approval; orders' is denied.
	code, out, _ = carmyRun("approvals", "-json")
	var listed []approval
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 1 || listed[0].Text != "{\n  \"table\": \"users\"\n}" {
		t.Fatalf("carmy approvals -json: exit %d, %q", code, out)
	}
}

// A file of the pattern that another user could read is not used, and
// one whose server is gone is removed.
func TestApprovalsSkipsFiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	shared := filepath.Join(dir, "carmy-console-shared.url")
	if err := os.WriteFile(shared, []byte("http://127.0.0.1:1/console?token=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(shared, 0o644)
	gone := filepath.Join(dir, "carmy-console-gone.url")
	if err := os.WriteFile(gone, []byte("http://127.0.0.1:1/console?token=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := carmyRun("approvals")
	if code != 0 || !strings.Contains(out, "No carmy server") || !strings.Contains(errOut, "skipped") || !strings.Contains(errOut, "removed "+gone) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("the file of a server that is gone: %v; want it removed", err)
	}
}

func usageText() string {
	var b strings.Builder
	usage(&b)
	return b.String()
}
