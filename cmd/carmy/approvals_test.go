package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/console"
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
	if code, out, errOut := carmyRun("approvals", "approve", id); code != 1 || !strings.Contains(out, `"table": "users"`) || !strings.Contains(errOut, "-yes") {
		t.Fatalf("carmy approvals approve without a terminal: exit %d\n%s\n%s; want the call shown, then a refusal naming -yes", code, out, errOut)
	}
	if e := drop(t, s, "users"); e == nil || drops.Load() != before {
		t.Fatalf("the call ran although nobody approved it: %v", e)
	}
	if code, out, errOut := carmyRun("approvals", "approve", "-yes", id); code != 0 || !strings.Contains(out, "Approved: the call runs when the agent makes it again") {
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
	var list []listed
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 || list[0].Text != "{\n  \"table\": \"users\"\n}" {
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

// atTerminal makes carmy approvals read the person's answer from answer,
// as typed at a terminal, for the test's duration (serial).
func atTerminal(t *testing.T, answer string) {
	t.Helper()
	in, term := approvalsIn, inTerminal
	approvalsIn, inTerminal = strings.NewReader(answer), func() bool { return true }
	t.Cleanup(func() { approvalsIn, inTerminal = in, term })
}

// TestApprovalsApproveAsks: "approve ID" shows the exact input and what
// will run, then asks at the terminal: anything but yes decides nothing;
// yes approves. Without a terminal, and without -yes, it refuses.
func TestApprovalsApproveAsks(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // serial
	s := stdioAgent(t)
	before := drops.Load()
	id := approvalID.FindStringSubmatch(drop(t, s, "users")["message"].(string))[1]
	tests := []struct {
		name, answer string
		terminal     bool
		code         int
		want         string
	}{
		{"no terminal", "", false, 1, "pass -yes"},
		{"no", "n\n", true, 1, "Not approved: nothing was decided."},
		{"nothing typed", "", true, 1, "Not approved: nothing was decided."},
		{"yes", "y\n", true, 0, "Approved: the call runs when the agent makes it again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.terminal {
				atTerminal(t, tt.answer)
			}
			code, out, errOut := carmyRun("approvals", "approve", id)
			input, prompt := strings.Index(out, `"table": "users"`), strings.Index(out, "Approve this call? [y/N]")
			if code != tt.code || !strings.Contains(out+errOut, tt.want) || input < 0 || !strings.Contains(out, "Approving lets drop_table run once with this input") {
				t.Fatalf("exit %d (want %d)\n%s\n%s", code, tt.code, out, errOut)
			}
			if tt.terminal && prompt < input {
				t.Fatalf("asked before the input was shown:\n%s", out)
			}
			if code != 0 {
				if e := drop(t, s, "users"); e == nil || drops.Load() != before {
					t.Fatalf("the call ran although nobody approved it: %v", e)
				}
			}
		})
	}
	if e := drop(t, s, "users"); e != nil || drops.Load() != before+1 {
		t.Fatalf("the approved call: %v, ran %d times", e, drops.Load()-before)
	}
}

// TestApprovalsChallengesTheServer: a console file whose server is gone,
// its port taken by another program that answers like a carmy server but
// does not know the file's secret, is skipped with a warning: that
// program is neither listed nor sent a decision, and never receives the
// secret. A live server proves itself and is listed.
func TestApprovalsChallengesTheServer(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir) // serial
	var sawSecret, decided atomic.Bool
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get(console.Header) != "" {
			sawSecret.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.URL.Path == console.ChallengePath:
			io.WriteString(w, `{"proof":"00"}`)
		case req.URL.Path == "/approvals":
			io.WriteString(w, `[{"id":"fake-1","tool":"drop_table","status":"pending"}]`)
		case strings.HasSuffix(req.URL.Path, "/approve"):
			decided.Store(true)
			io.WriteString(w, `{"id":"fake-1","status":"approved"}`)
		default:
			io.WriteString(w, `{"id":"fake-1","tool":"drop_table","status":"pending","text":"{}"}`)
		}
	}))
	defer impostor.Close()
	// The file of the server that stopped, which listened where the
	// impostor does now.
	if _, err := console.WriteFile(impostor.URL + "/console?token=the-dead-servers-secret"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := carmyRun("approvals")
	if code != 0 || strings.Contains(out, "fake-1") || !strings.Contains(errOut, "skipped "+impostor.URL) || !strings.Contains(errOut, "does not know this file's secret") {
		t.Fatalf("exit %d\n%s\n%s; want the impostor skipped with a warning", code, out, errOut)
	}
	if code, _, errOut := carmyRun("approvals", "approve", "-yes", "fake-1"); code != 1 || decided.Load() {
		t.Fatalf("approve: exit %d, %s; the impostor was sent a decision: %v", code, errOut, decided.Load())
	}
	if sawSecret.Load() {
		t.Fatal("the impostor received the file's secret")
	}

	s := stdioAgent(t) // a live server proves itself
	id := approvalID.FindStringSubmatch(drop(t, s, "users")["message"].(string))[1]
	if code, out, errOut := carmyRun("approvals"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("with a live server: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestApprovalsTaskResumes: over stdio, a destructive call started as a
// task, the first thing of the server that needs a person, is listed by
// carmy approvals; approving says that the waiting task resumes, and it
// does: it completes without the agent calling again.
func TestApprovalsTaskResumes(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // serial
	reg, err := carmy.New().Logger(slog.New(slog.DiscardHandler)).Tool(carmy.Tool(dropTable, carmy.Destructive, carmy.RequireConfirmation(), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = reg.ServeStdio(context.Background(), inR, outW)
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go io.Copy(io.Discard, outR)
		<-served
		_ = reg.Close()
	})
	lines := bufio.NewScanner(outR)
	n := 0
	call := func(method, params string) map[string]any {
		t.Helper()
		n++
		if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", n, method, params); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			var m struct {
				ID     int            `json:"id"`
				Result map[string]any `json:"result"`
			}
			if json.Unmarshal(lines.Bytes(), &m) == nil && m.ID == n {
				return m.Result
			}
		}
		t.Fatalf("no answer to %s", method)
		return nil
	}
	call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{"tasks":{}},"clientInfo":{"name":"agent","version":"1"}}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	before := drops.Load()
	task, _ := call("tools/call", `{"name":"drop_table","arguments":{"table":"users"},"task":{"ttl":60000}}`)["task"].(map[string]any)
	taskID, _ := task["taskId"].(string)
	status := func() (string, string) {
		r := call("tasks/get", `{"taskId":"`+taskID+`"}`)
		s, _ := r["status"].(string)
		m, _ := r["statusMessage"].(string)
		return s, m
	}
	var msg string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var s string
		if s, msg = status(); s == "input_required" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %v: status %s; want it to wait for a person", task, s)
		}
	}
	m := approvalID.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("status message %q; want it to name the approval", msg)
	}
	id := m[1]
	if code, out, errOut := carmyRun("approvals"); code != 0 || !strings.Contains(out, id+"  drop_table") {
		t.Fatalf("carmy approvals: exit %d\n%s\n%s; want the task's approval listed", code, out, errOut)
	}
	code, out, errOut := carmyRun("approvals", "approve", "-yes", id)
	if code != 0 || !strings.Contains(out, "the task that waits for it resumes") || !strings.Contains(out, "Approved: the waiting task resumes now") {
		t.Fatalf("carmy approvals approve: exit %d\n%s\n%s; want it to say the waiting task resumes", code, out, errOut)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s, _ := status(); s == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the approved task did not complete")
		}
	}
	if drops.Load() != before+1 {
		t.Fatalf("the task's call ran %d times; want once", drops.Load()-before)
	}
}

// TestStdioTaskServerProcess is the stdio server that
// TestTypeScriptStdioTaskApproval's client starts, in a process of its
// own: drop_table, which needs a person's approval.
func TestStdioTaskServerProcess(t *testing.T) {
	if os.Getenv("CARMY_TEST_TASK_SERVER") != "1" {
		t.Skip("started by TestTypeScriptStdioTaskApproval's client")
	}
	err := carmy.New().Logger(slog.New(slog.DiscardHandler)).Tool(carmy.Tool(dropTable, carmy.Destructive, carmy.RequireConfirmation(), carmy.Register(false))).RunStdio(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestTypeScriptStdioTaskApproval: the official TypeScript SDK's
// client.experimental.tasks.callToolStream, over stdio, starts a
// destructive call as a task, the first thing of its server that needs a
// person (interop/ts/stdio-approval.mjs). The task's status message ends
// with the console's page, without secret or code; carmy approvals lists
// the approval and approves it, saying the task resumes; the client's
// stream then ends with the tool's result.
func TestTypeScriptStdioTaskApproval(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not on PATH; the TypeScript SDK needs Node.js 20 or later (then run: npm ci --prefix interop/ts)")
	}
	dir := filepath.Join("..", "..", "interop", "ts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("skipping: interop/ts/node_modules does not hold @modelcontextprotocol/sdk (run: npm ci --prefix interop/ts)")
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // serial; the server inherits it
	t.Setenv("CARMY_TEST_TASK_SERVER", "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "stdio-approval.mjs", "drop_table", `{"table":"users"}`, self, "-test.run=^TestStdioTaskServerProcess$", "-test.count=1")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "waiting ") {
		_ = cmd.Wait()
		t.Fatalf("the client: %q; want the task waiting for a person\n%s", lines.Text(), stderr.String())
	}
	msg := lines.Text()
	m := approvalID.FindStringSubmatch(msg)
	if m == nil || !regexp.MustCompile(`http://127\.0\.0\.1:\d+/console\?approval=`+m[1]+`$`).MatchString(msg) || strings.Contains(msg, "token=") || strings.Contains(msg, "code=") {
		t.Fatalf("%q; want a status message that ends with the console's page for the approval, without secret or code", msg)
	}
	if code, listed, errOut := carmyRun("approvals"); code != 0 || !strings.Contains(listed, m[1]+"  drop_table") {
		t.Fatalf("carmy approvals: exit %d\n%s\n%s", code, listed, errOut)
	}
	if code, said, errOut := carmyRun("approvals", "approve", "-yes", m[1]); code != 0 || !strings.Contains(said, "the waiting task resumes now") {
		t.Fatalf("carmy approvals approve: exit %d\n%s\n%s", code, said, errOut)
	}
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(string(rest), "ok: ") {
		t.Fatalf("the client: %v\n%s%s", err, rest, stderr.String())
	}
	t.Log(strings.TrimSpace(string(rest)))
}
