package carmy_test

// Mounting servers nobody here wrote: the reference MCP servers published
// on npm (interop/servers), run with Node. The tests skip, saying why,
// where Node or the packages are absent; CI installs both.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// referenceServer returns the command line of a reference server's entry
// point, or skips the test.
func referenceServer(t *testing.T, pkg string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the reference MCP servers run with Node.js 20+")
	}
	entry, _ := filepath.Abs(filepath.Join("interop", "servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("@modelcontextprotocol/%s is not installed: run npm ci --prefix interop/servers", pkg)
	}
	return []string{node, entry}
}

// text is the text of a mounted tool's content output.
func text(t *testing.T, res carmy.Result) string {
	t.Helper()
	var blocks []struct{ Text string }
	if err := json.Unmarshal(res.Output, &blocks); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	var out []string
	for _, b := range blocks {
		out = append(out, b.Text)
	}
	return strings.Join(out, "\n")
}

func TestMountServerEverything(t *testing.T) {
	cmd := referenceServer(t, "server-everything")
	for _, transport := range []string{"stdio", "streamableHttp"} {
		t.Run(transport, func(t *testing.T) {
			var up carmy.Upstream
			if transport == "stdio" {
				up = carmy.Command(cmd[0], cmd[1], "stdio")
			} else {
				up = carmy.Endpoint(startEverythingHTTP(t, cmd))
			}
			reg := build(t, carmy.New().Mount("ev", up))
			ctx := context.Background()
			res, err := reg.Execute(ctx, carmy.Call{Tool: "ev_echo", Input: json.RawMessage(`{"message":"hello"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); !strings.Contains(got, "hello") {
				t.Errorf("echo answered %q", got)
			}
			_, err = reg.Execute(ctx, carmy.Call{Tool: "ev_echo", Input: json.RawMessage(`{"message":7}`)})
			if carmy.CodeOf(err) != carmy.CodeInvalidInput {
				t.Errorf("an input the upstream's schema refuses: err = %v, want invalid_input", err)
			}
			m, ok := reg.Lookup("ev_trigger-long-running-operation")
			if !ok || m.Effect != carmy.Read {
				t.Errorf("the long running operation: %+v, want a read tool (readOnlyHint)", m)
			}

			// Progress and a question of the upstream reach carmy's MCP
			// client, through a single-client connection.
			var asked atomic.Value
			progress := make(chan float64, 16)
			s := singleClient(t, reg, "memory", "2025-11-25", &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Store(req.Params.Message)
					return &mcp.ElicitResult{Action: "decline"}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.Progress
				},
			})
			out, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "ev_trigger-long-running-operation",
				Arguments: map[string]any{"duration": 0.2, "steps": 2}, Meta: mcp.Meta{"progressToken": "lro"}})
			if err != nil || out.IsError {
				t.Fatalf("long running operation: %v %+v", err, out)
			}
			select {
			case <-progress:
			case <-time.After(5 * time.Second):
				t.Error("no progress of the upstream reached carmy's client")
			}
			// Registered once the upstream knows carmy declared elicitation.
			out, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "ev_trigger-elicitation-request", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := asked.Load().(string); !strings.HasPrefix(got, "Server ev asks: ") {
				t.Errorf("the person was asked %q, want the upstream's question labelled with the mount (result %+v)", got, out)
			}

			// Its tool that runs only as a task (2025-11-25 tasks), called
			// through carmy as a task, asks for a clarification in the
			// middle, and ends with the answer in its report.
			researchAsTask(t, reg)

			// Its resources, under their own URIs, and its prompts, under
			// the mount's prefix.
			resources, err := s.ListResources(ctx, nil)
			if err != nil || len(resources.Resources) == 0 {
				t.Fatalf("resources/list = %+v, %v; want server-everything's resources", resources, err)
			}
			uri := resources.Resources[0].URI
			read, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(read.Contents) == 0 || read.Contents[0].URI != uri {
				t.Errorf("resources/read %s = %+v, %v", uri, read, err)
			}
			prompts, err := s.ListPrompts(ctx, nil)
			if err != nil || len(prompts.Prompts) == 0 {
				t.Fatalf("prompts/list = %+v, %v; want server-everything's prompts", prompts, err)
			}
			for _, p := range prompts.Prompts {
				if !strings.HasPrefix(p.Name, "ev_") {
					t.Errorf("prompt %q, want the mount's prefix", p.Name)
				}
				if len(p.Arguments) == 0 {
					got, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name})
					if err != nil || len(got.Messages) == 0 {
						t.Errorf("prompts/get %s = %+v, %v", p.Name, got, err)
					}
				}
			}
		})
	}
}

// researchAsTask runs server-everything's simulate-research-query, which
// runs only as a task upstream, as a carmy task: its status messages
// reach the task as progress, its question reaches the task, and the
// answer reaches the upstream's report.
func researchAsTask(t *testing.T, reg *carmy.Registry) {
	t.Helper()
	ctx := context.Background()
	if m, ok := reg.Lookup("ev_simulate-research-query"); !ok || m.Tasks != carmy.TaskRequired {
		t.Fatalf("simulate-research-query: %+v, %v; want a tool that runs only as a task", m, ok)
	}
	task, err := reg.Start(ctx, carmy.Call{Tool: "ev_simulate-research-query", Input: json.RawMessage(`{"topic":"python","ambiguous":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(task.Questions) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("task %s asks nothing; want the upstream's clarification", task.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if task, err = reg.Task(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
	}
	if q := task.Questions[0]; task.Status != carmy.TaskInputRequired || !strings.HasPrefix(q.Message, "Server ev asks: ") {
		t.Fatalf("task %s asks %+v; want the upstream's question, labelled", task.Status, q)
	}
	// The upstream tells how far it came in its task's status message,
	// which reaches carmy's task as its progress.
	if p := task.Progress; p == nil || !slices.Contains([]string{"Gathering sources...", "Analyzing content...", "Synthesizing findings..."}, p.Message) {
		t.Errorf("the task's progress %+v; want a stage of the upstream's research", p)
	}
	if err := task.Answer(ctx, task.Questions[0].ID, carmy.TaskAnswer{Action: "accept", Content: map[string]any{"interpretation": "snake"}}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := task.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); task.Status != carmy.TaskCompleted || !strings.Contains(got, "Research Report: python (snake)") {
		t.Errorf("task %s: %q; want the report on the answer", task.Status, got)
	}
}

// startEverythingHTTP starts server-everything's streamable HTTP mode on a
// free loopback port, stopped when the test ends, and returns its URL.
func startEverythingHTTP(t *testing.T, cmd []string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	c := exec.Command(cmd[0], cmd[1], "streamableHttp")
	c.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 200 {
		if conn, err := net.Dial("tcp", addr); err == nil {
			_ = conn.Close()
			return "http://" + addr + "/mcp"
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server-everything did not listen on %s", addr)
	return ""
}

func TestMountServerFilesystem(t *testing.T) {
	cmd := referenceServer(t, "server-filesystem")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := build(t, carmy.New().Mount("fs", carmy.Command(cmd[0], cmd[1], dir), carmy.MountRoots("file://"+dir)))
	m, ok := reg.Lookup("fs_write_file")
	if !ok || m.Effect != carmy.Destructive || m.Confirmation != carmy.ConfirmationRequired {
		t.Fatalf("fs_write_file: %+v, want destructive and confirmed by a person", m)
	}

	// A person confirms the write once, by form; the upstream writes once.
	var asked atomic.Int32
	s := singleClient(t, reg, "stdio", "2025-11-25", &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
		// The caller's own roots, which must not widen the mount's.
		//lint:ignore SA1019 roots are deprecated from 2026-07-28 on; this client is of 2025-11-25
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
	})
	ctx := context.Background()
	file := filepath.Join(dir, "note.txt")
	write := &mcp.CallToolParams{Name: "fs_write_file", Arguments: map[string]any{"path": file, "content": "first"}, Meta: mcp.Meta{carmy.MetaRequestID: "write-1"}}
	res, err := s.CallTool(ctx, write)
	if err != nil || res.IsError {
		t.Fatalf("write: %v %+v", err, res)
	}
	if got, _ := os.ReadFile(file); string(got) != "first" || asked.Load() != 1 {
		t.Fatalf("file %q after the write, person asked %d times; want first, once", got, asked.Load())
	}

	// The same request id again: the recorded outcome, and nothing written.
	if err := os.WriteFile(file, []byte("changed since"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err = s.CallTool(ctx, write); err != nil || res.IsError {
		t.Fatalf("replay: %v %+v", err, res)
	}
	if got, _ := os.ReadFile(file); string(got) != "changed since" {
		t.Errorf("the replay wrote again: the file holds %q", got)
	}

	// Roots are the mount's: nothing outside them is reachable.
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read_text_file", Arguments: map[string]any{"path": filepath.Join(outside, "secret.txt")}})
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := json.Marshal(res); !res.IsError || strings.Contains(string(body), `"secret"`) {
		t.Errorf("a file outside the mount's roots was read: %s", body)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "fs_list_allowed_directories", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := json.Marshal(res.Content); !strings.Contains(string(body), dir) || strings.Contains(string(body), outside) {
		t.Errorf("allowed directories %s, want %s alone", body, dir)
	}
}
