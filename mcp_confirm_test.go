package carmy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// passCounter counts, for one registry, the tools/call requests its MCP
// server received, the passes of calls through its middleware, and keeps
// its audit records: what a rate-limiting or metering middleware, and an
// auditor, would see of a call that a person confirms in-band.
type passCounter struct {
	mu       sync.Mutex
	requests int
	passes   int
	records  []carmy.AuditRecord
}

// builder adds the counting middleware, the recording sink and the
// request counter to b.
func (pc *passCounter) builder(b *carmy.Builder) *carmy.Builder {
	count := func(n *int) {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		*n++
	}
	return b.Use(func(next carmy.CallFunc) carmy.CallFunc {
		return func(ctx context.Context, req *carmy.Request) (carmy.Result, error) {
			count(&pc.passes)
			return next(ctx, req)
		}
	}).Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		pc.records = append(pc.records, rec)
		return nil
	})).ConfigureMCP(func(s *mcp.Server) {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					count(&pc.requests)
				}
				return next(ctx, method, req)
			}
		})
	})
}

// check asserts that the call passed the middleware once per protocol
// request that carried it (requests of them), that the audit holds
// refused refusals and any approval, all before the run, and that the call
// ran once.
func (pc *passCounter) check(t *testing.T, requests, refused int) {
	t.Helper()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.requests != requests || pc.passes != requests {
		t.Errorf("%d tools/call requests, %d middleware passes; want %d of each", pc.requests, pc.passes, requests)
	}
	var got []carmy.AuditDecision
	nRefused, ran := 0, false
	for _, rec := range pc.records {
		got = append(got, rec.Decision)
		switch rec.Decision {
		case carmy.AuditRefused:
			nRefused++
			if ran {
				t.Errorf("a refusal audited after the run: %v", got)
			}
		case carmy.AuditApproved:
			if ran {
				t.Errorf("the approval audited after the run: %v", got)
			}
		case carmy.AuditStarted:
			ran = true
		case carmy.AuditExecuted:
			if rec.ApprovalID == "" || rec.Approver == "" {
				t.Errorf("the executed record %+v does not name its approval and approver", rec)
			}
		}
	}
	if nRefused != refused || !ran || got[len(got)-1] != carmy.AuditExecuted {
		t.Errorf("audit decisions %v; want %d refused, then the run", got, refused)
	}
}

// TestConfirmationInBandIsOnePass: a call that the person at an MCP client
// confirms in-band (a form, or the approval's page opened through URL
// elicitation) goes on inside the pipeline. In a session it is one
// request, one middleware pass, and no refusal audited; in the sessionless
// protocol the question goes back as the first round's input request
// (one pass, one refusal audited) and the round with the answer passes
// once and runs.
func TestConfirmationInBandIsOnePass(t *testing.T) {
	t.Parallel()
	confirm := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	tests := []struct {
		name     string
		version  string
		requests int // the tools/call requests that carry the call
		refused  int
	}{
		{"session", "2025-11-25", 1, 0},
		{"sessionless", "2026-07-28", 2, 1},
	}
	for _, tt := range tests {
		t.Run("form over stdio/"+tt.name, func(t *testing.T) {
			t.Parallel()
			var pc passCounter
			_, reg, runs := approvalServer(t, pc.builder(carmy.New()))
			s := singleClient(t, reg, "stdio", tt.version, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return confirm, nil
			}})
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
			if err != nil || res.IsError {
				t.Fatalf("result %+v, %v; want success", res, err)
			}
			if runs.Load() != 1 {
				t.Fatalf("runs = %d; want 1", runs.Load())
			}
			pc.check(t, tt.requests, tt.refused)
		})
		t.Run("URL over HTTP/"+tt.name, func(t *testing.T) {
			t.Parallel()
			var pc passCounter
			srv, reg, runs := approvalServer(t, pc.builder(carmy.New()))
			person := consoleClient(t, srv, reg)
			opts := &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					go func() {
						time.Sleep(20 * time.Millisecond) // the call waits for the decision
						httpDo(t, person, "POST", srv.URL+"/approvals/"+req.Params.ElicitationID+"/approve", "")
					}()
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, opts)
			s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: tt.version})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
			if err != nil || res.IsError {
				t.Fatalf("result %+v, %v; want success", res, err)
			}
			if runs.Load() != 1 {
				t.Fatalf("runs = %d; want 1", runs.Load())
			}
			pc.check(t, tt.requests, tt.refused)
		})
	}
	t.Run("form over HTTP/sessionless, round by round", func(t *testing.T) {
		t.Parallel()
		var pc passCounter
		srv, _, runs := approvalServer(t, pc.builder(carmy.New().ElicitConfirmation()))
		s := sessionless{t, srv.URL}
		const in = `{"id":7}`
		r := s.call("delete_note", in, "")
		_, state, ok := question(r)
		if !ok {
			t.Fatalf("first round %v; want the confirmation question", r)
		}
		pc.mu.Lock()
		first := pc.passes
		pc.mu.Unlock()
		if first != 1 || runs.Load() != 0 {
			t.Fatalf("after the first round: %d passes, %d runs; want 1 pass, no run", first, runs.Load())
		}
		if r := s.call("delete_note", in, answer("carmy/confirm", state, accept)); r["isError"] == true || r["resultType"] == "input_required" {
			t.Fatalf("the answering round: %v; want the result", r)
		}
		if runs.Load() != 1 {
			t.Fatalf("runs = %d; want 1", runs.Load())
		}
		pc.check(t, 2, 1)
	})
}

// TestConfirmWaitSendsProgress: on every MCP path (HTTP and stdio, both
// protocol generations), a call that waits for a person's decision (at the
// page URL elicitation sent, or on a form the client shows) sends its
// client progress while it waits, when the client gave a progress token,
// so a client that resets its request timeout on progress keeps waiting;
// the call runs once approved. Without a token, no progress is sent. In
// the sessionless generation the request waits once the client answered
// that its user opened the page; a form's answer comes in a round of its
// own, and no request waits for it.
func TestConfirmWaitSendsProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ transport, version, mode string }{
		{"http", "2025-11-25", "url"},
		{"http", "2026-07-28", "url"},
		{"stdio", "2025-11-25", "url"},
		{"stdio", "2026-07-28", "url"},
		{"stdio", "2025-11-25", "form"},
	} {
		for _, token := range []bool{true, false} {
			name := tc.transport + "/" + tc.version + "/" + tc.mode + "/" + map[bool]string{true: "progress token", false: "no token"}[token]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv, reg, runs := approvalServer(t, carmy.SetPersonProgress(carmy.New(), 10*time.Millisecond))
				progress := make(chan *mcp.ProgressNotificationParams, 100)
				caps := &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}
				if tc.mode == "form" {
					caps = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
				}
				opts := &mcp.ClientOptions{
					Capabilities: &mcp.ClientCapabilities{Elicitation: caps},
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						if req.Params.Mode != "url" {
							time.Sleep(200 * time.Millisecond) // the person takes their time
							return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
						}
						go func() {
							time.Sleep(200 * time.Millisecond) // the person takes their time
							if tc.transport == "http" {
								httpDo(t, consoleClient(t, srv, reg), "POST", srv.URL+"/approvals/"+req.Params.ElicitationID+"/approve", "")
							} else if err := reg.Decide(context.Background(), req.Params.ElicitationID, true, "person:alice"); err != nil {
								t.Error(err)
							}
						}()
						return &mcp.ElicitResult{Action: "accept"}, nil
					},
					ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
						progress <- req.Params
					},
				}
				var s *mcp.ClientSession
				if tc.transport == "http" {
					s = mcpConnect(t, srv.URL, tc.version, opts)
				} else {
					s = singleClient(t, reg, "stdio", tc.version, opts)
				}
				params := &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}}
				if token {
					params.SetProgressToken("wait-1")
				}
				res, err := s.CallTool(context.Background(), params)
				if err != nil || res.IsError || runs.Load() != 1 {
					t.Fatalf("result %+v, %v, runs %d; want one run", res, err, runs.Load())
				}
				got := len(progress)
				if !token {
					if got != 0 {
						t.Fatalf("%d progress notifications without a progress token; want none", got)
					}
					return
				}
				// A client busy with a form may hold up the notifications
				// behind it (over stdio, a pipe it reads once the person
				// answered); over a page, it goes on reading.
				if want := map[string]int{"url": 2, "form": 1}[tc.mode]; got < want {
					t.Fatalf("%d progress notifications while the call waited for a person; want %d at least", got, want)
				}
				last := -1.0
				for range got {
					p := <-progress
					if p.ProgressToken != "wait-1" || p.Progress <= last || p.Message == "" {
						t.Fatalf("progress %+v after %v; want the call's token, increasing, with a message", p, last)
					}
					last = p.Progress
				}
			})
		}
	}
}

// TestElicitWaitSendsProgress: in a session, over HTTP and stdio, a tool
// whose question waits for the client's user keeps the client waiting
// with progress, when the call has a progress token; each notification's
// value is greater than the one before, as MCP requires, and what the tool
// reported stands: its values, its total. Without a token, nothing is
// sent.
func TestElicitWaitSendsProgress(t *testing.T) {
	t.Parallel()
	type Who struct {
		Name string `json:"name"`
	}
	for _, transport := range []string{"http", "stdio"} {
		for _, token := range []bool{true, false} {
			t.Run(transport+"/"+map[bool]string{true: "progress token", false: "no token"}[token], func(t *testing.T) {
				t.Parallel()
				greet := carmy.Tool(func(ctx carmy.Context, _ struct{}) (string, error) {
					ctx.Progress(0, 2, "starting")
					var who Who
					if ok, err := ctx.Elicit("Who are you?", &who); err != nil || !ok {
						return "", fmt.Errorf("no answer: %v", err)
					}
					ctx.Progress(2, 2, "done")
					return "hello " + who.Name, nil
				}, carmy.Read, carmy.Name("greet"), carmy.Register(false))
				reg := build(t, carmy.SetPersonProgress(carmy.New(), 10*time.Millisecond).Tool(greet).Logger(quietLogger()))
				var mu sync.Mutex
				var progress []*mcp.ProgressNotificationParams
				opts := &mcp.ClientOptions{
					Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
					ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						time.Sleep(200 * time.Millisecond) // the user takes their time
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
					},
					ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
						mu.Lock()
						defer mu.Unlock()
						progress = append(progress, req.Params)
					},
				}
				var s *mcp.ClientSession
				if transport == "http" {
					s = mcpConnect(t, serve(t, reg).URL, "2025-11-25", opts)
				} else {
					s = singleClient(t, reg, "stdio", "2025-11-25", opts)
				}
				params := &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}}
				if token {
					params.SetProgressToken("ask-1")
				}
				res, err := s.CallTool(context.Background(), params)
				if err != nil || res.IsError {
					t.Fatalf("result %+v, %v; want the greeting", res, err)
				}
				// The client hands notifications to its handler on goroutines
				// of their own: the last may come after the result.
				want := 0
				if token {
					// starting, a wait at least (a client busy with the
					// question may hold up the notifications behind it), done
					want = 3
				}
				for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					mu.Lock()
					n, last := len(progress), ""
					if n > 0 {
						last = progress[n-1].Message
					}
					mu.Unlock()
					if (n >= want && (!token || last == "done")) || time.Now().After(deadline) {
						break
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !token {
					if len(progress) != 0 {
						t.Fatalf("%d progress notifications without a progress token; want none", len(progress))
					}
					return
				}
				if len(progress) < want || progress[0].Message != "starting" || progress[0].Progress != 0 || progress[len(progress)-1].Message != "done" || progress[len(progress)-1].Progress != 2 {
					t.Fatalf("progress %v; want the tool's start, waits, and its end", progressText(progress))
				}
				last := -1.0
				for _, p := range progress {
					if p.ProgressToken != "ask-1" || p.Progress <= last || p.Total != 2 || p.Message == "" {
						t.Fatalf("progress %v; want the call's token, increasing values, the tool's total", progressText(progress))
					}
					last = p.Progress
				}
			})
		}
	}
}

func progressText(ps []*mcp.ProgressNotificationParams) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%v/%v %q] ", p.Progress, p.Total, p.Message)
	}
	return b.String()
}
