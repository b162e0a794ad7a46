package carmy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// singleClient connects an MCP client of the given protocol version to
// reg over a single-client transport: in memory (ServeMCP), or over a pair
// of pipes (ServeStdio), as a stdio client would.
func singleClient(t *testing.T, reg *carmy.Registry, transport, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	var clientT mcp.Transport
	switch transport {
	case "memory":
		serverT, c := mcp.NewInMemoryTransports()
		clientT = c
		go func() { defer close(served); _ = reg.ServeMCP(ctx, serverT) }()
	case "stdio":
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		clientT = &mcp.IOTransport{Reader: outR, Writer: inW}
		go func() {
			defer close(served)
			_ = reg.ServeStdio(ctx, inR, outW)
			_ = outW.Close()
		}()
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "single", Version: "1"}, opts).Connect(ctx, clientT, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		cancel()
		<-served
	})
	return s
}

// TestConfirmOverSingleClient: over stdio and other single-client
// transports a client that declares form elicitation is asked to confirm,
// by default, showing the call's input: accept runs the call once;
// decline is permission_denied (declined), not retryable; cancel is
// confirmation_required. (The SDK's client refuses to send an answer that
// breaks the form: TestConfirmAnswerBreaksTheForm sends them.) A client of a protocol version without elicitation is
// never asked, and a host that turned forms off is never asked by form.
func TestConfirmOverSingleClient(t *testing.T) {
	tests := []struct {
		name    string
		answer  *mcp.ElicitResult
		builder func() *carmy.Builder
		version string // "" for every version with forms
		asked   bool
		code    string
		reason  string
		runs    int32
	}{
		{name: "accept", answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, asked: true, runs: 1},
		{name: "accept without confirming", answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, asked: true, code: "permission_denied", reason: "declined"},
		{name: "decline", answer: &mcp.ElicitResult{Action: "decline"}, asked: true, code: "permission_denied", reason: "declined"},
		{name: "cancel", answer: &mcp.ElicitResult{Action: "cancel"}, asked: true, code: "confirmation_required"},
		{name: "a version without elicitation", answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, version: "2025-03-26", code: "confirmation_required"},
		{name: "forms turned off", answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}},
			builder: func() *carmy.Builder { return carmy.New().NoFormConfirmation() }, code: "confirmation_required"},
	}
	for _, transport := range []string{"memory", "stdio"} {
		for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
			for _, tt := range tests {
				version := version
				if tt.version != "" && tt.version != version {
					if tt.version >= "2025-06-18" || version != "2025-06-18" {
						continue
					}
					version = tt.version // an older version: run the case once, in it
				}
				t.Run(transport+"/"+version+"/"+tt.name, func(t *testing.T) {
					b := carmy.New()
					if tt.builder != nil {
						b = tt.builder()
					}
					_, reg, runs := approvalServer(t, b)
					var asked atomic.Int32
					var prompt string
					s := singleClient(t, reg, transport, version, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						asked.Add(1)
						prompt = req.Params.Message
						return tt.answer, nil
					}})
					res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
					if err != nil {
						t.Fatal(err)
					}
					if got := asked.Load() > 0; got != tt.asked {
						t.Fatalf("asked = %v; want %v", got, tt.asked)
					}
					if tt.asked && !strings.Contains(prompt, `"id": 7`) {
						t.Errorf("prompt %q; want the input shown", prompt)
					}
					if tt.code == "" {
						if res.IsError {
							t.Fatalf("result %v; want success", errorObject(t, res))
						}
					} else {
						e := errorObject(t, res)
						d, _ := e["details"].(map[string]any)
						if e["code"] != tt.code || (tt.reason != "" && (d["reason"] != tt.reason || e["retryable"] != false)) {
							t.Fatalf("error %v; want %s (reason %q)", e, tt.code, tt.reason)
						}
						if tt.code == "confirmation_required" {
							if msg := e["message"].(string); strings.Contains(msg, "/console") || len(msg) > 300 {
								t.Errorf("message %q: want a short one with no link, as no console is served", msg)
							}
						}
					}
					if runs.Load() != tt.runs {
						t.Fatalf("runs = %d; want %d", runs.Load(), tt.runs)
					}
				})
			}
		}
	}
}

// TestConfirmOverStdioByURL: a stdio client that declares URL elicitation
// only is sent the absolute URL of a console that carmy serves on a
// loopback port for the purpose, carrying the console secret; the person
// approves there, and the waiting call runs once. Forms turned off, the
// same client is still sent there.
func TestConfirmOverStdioByURL(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		for _, noForms := range []bool{false, true} {
			t.Run(version+map[bool]string{true: "/forms off"}[noForms], func(t *testing.T) {
				b := carmy.New()
				if noForms {
					b = b.NoFormConfirmation()
				}
				_, reg, runs := approvalServer(t, b)
				sent := make(chan *mcp.ElicitParams, 1)
				opts := &mcp.ClientOptions{
					Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						sent <- req.Params
						return &mcp.ElicitResult{Action: "accept"}, nil
					},
				}
				s := singleClient(t, reg, "stdio", version, opts)
				type outcome struct {
					res *mcp.CallToolResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
					done <- outcome{res, err}
				}()
				var params *mcp.ElicitParams
				select {
				case params = <-sent:
				case o := <-done:
					t.Fatalf("the call ended without sending a page: %+v %v", o.res, o.err)
				case <-time.After(10 * time.Second):
					t.Fatal("no URL elicitation")
				}
				link, err := url.Parse(params.URL)
				if err != nil || params.Mode != "url" || link.Scheme != "http" || link.Hostname() != "127.0.0.1" || link.Path != "/console" ||
					link.Query().Get("approval") != params.ElicitationID {
					t.Fatalf("URL %q; want the absolute URL of a loopback console showing the approval", params.URL)
				}
				base := link.Scheme + "://" + link.Host
				console, _ := url.Parse(reg.ConsoleURL(base))
				for k, v := range console.Query() {
					if link.Query().Get(k) != v[0] {
						t.Errorf("URL %q; want the console secret in it, for the person (%s)", params.URL, k)
					}
				}
				if link.Fragment != console.Fragment {
					t.Errorf("URL %q; want the console URL's fragment %q", params.URL, console.Fragment)
				}
				res, err := http.Get(params.URL) // the page is served
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
					t.Fatalf("the console at %s: %d %s", params.URL, res.StatusCode, res.Header.Get("Content-Type"))
				}
				person := consoleClient(t, &httptest.Server{URL: base}, reg)
				if status, body := httpDo(t, person, "POST", base+"/approvals/"+params.ElicitationID+"/approve", ""); status != http.StatusOK {
					t.Fatalf("approve: %d %v", status, body)
				}
				select {
				case o := <-done:
					if o.err != nil || o.res.IsError {
						t.Fatalf("the approved call: %+v %v", o.res, o.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the approved call did not end")
				}
				if runs.Load() != 1 {
					t.Fatalf("runs = %d; want 1", runs.Load())
				}
			})
		}
	}
}
