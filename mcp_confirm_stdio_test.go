package carmy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// TestConfirmOverSingleClient: over stdio and other single-client
// transports a client that declares form elicitation is asked to confirm,
// by default, showing the call's input: accept runs the call once;
// decline is permission_denied (declined), not retryable; cancel is
// confirmation_required. (The SDK's client refuses to send an answer that
// breaks the form: TestConfirmAnswerBreaksTheForm sends them.) A client of a protocol version without elicitation is
// never asked, and a host that turned forms off is never asked by form.
func TestConfirmOverSingleClient(t *testing.T) {
	t.Parallel()
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
							checkPersonRefusal(t, e, tt.asked)
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
// loopback port for the purpose, carrying a one-time code that the page
// exchanges for the console's secret; the person
// approves there, and the waiting call runs once. Forms turned off, the
// same client is still sent there.
func TestConfirmOverStdioByURL(t *testing.T) {
	t.Parallel()
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
				if link.Query().Get("token") != "" || link.Query().Get("code") == "" {
					t.Errorf("URL %q; want a one-time code for the person, never the secret", params.URL)
				}
				res, err := http.Get(params.URL) // the page is served
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
					t.Fatalf("the console at %s: %d %s", params.URL, res.StatusCode, res.Header.Get("Content-Type"))
				}
				person := exchangeClient(t, params.URL)
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

// rawStdio is a client that writes MCP over stdio line by line, to send
// what a well-behaved client never would.
type rawStdio struct {
	t    *testing.T
	in   io.Writer
	msgs chan map[string]any
}

func newRawStdio(t *testing.T, reg *carmy.Registry, capabilities string) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = reg.ServeStdio(ctx, inR, outW)
		_ = outW.Close()
	}()
	c := &rawStdio{t: t, in: inW, msgs: make(chan map[string]any, 16)}
	go func() {
		defer close(c.msgs)
		lines := bufio.NewScanner(outR)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var m map[string]any
			if json.Unmarshal(lines.Bytes(), &m) == nil {
				c.msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		cancel()
		<-served
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + capabilities + `,"clientInfo":{"name":"raw","version":"1"}}}`)
	c.next()
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rawStdio) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message the server writes.
func (c *rawStdio) next() map[string]any {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatal("the server ended")
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no message from the server")
	}
	return nil
}

// Patient is a form with a bound.
type Patient struct {
	Name string `json:"name" validate:"required"`
	Age  int    `json:"age" validate:"min=0,max=150"`
}

// TestConfirmAnswerBreaksTheForm: in a session, over stdio and over HTTP,
// an accepted answer that breaks the form, the confirmation's or a tool's
// own (Context.Elicit), is invalid_input naming the fields, not a
// retryable failure; and the tool does not run.
func TestConfirmAnswerBreaksTheForm(t *testing.T) {
	t.Parallel()
	var admitted atomic.Int32
	admit := carmy.Tool(func(ctx carmy.Context) (string, error) {
		var p Patient
		if ok, err := ctx.Elicit("Who is it?", &p); err != nil || !ok {
			return "", err
		}
		admitted.Add(1)
		return p.Name, nil
	}, carmy.Write, carmy.Name("admit"), carmy.Register(false))
	check := func(t *testing.T, msg map[string]any, path string) {
		t.Helper()
		e := (rawReply{msgs: []map[string]any{msg}}).toolError()
		res, _ := msg["result"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		obj, _ := meta["carmy/error"].(map[string]any)
		fields, _ := obj["fields"].([]any)
		if e != "invalid_input" || obj["retryable"] == true || len(fields) == 0 || fields[0].(map[string]any)["path"] != path {
			t.Fatalf("answer %v; want invalid_input at %s", msg, path)
		}
	}
	tests := []struct {
		tool, args, content, path string
	}{
		{"delete_note", `{"id":7}`, `{"confirm":"yes"}`, "confirm"},
		{"delete_note", `{"id":7}`, `{}`, "confirm"},
		{"admit", `{}`, `{"name":"Ada","age":200}`, "age"},
	}
	for _, tt := range tests {
		t.Run("stdio/"+tt.tool+"/"+tt.content, func(t *testing.T) {
			_, reg, runs := approvalServer(t, carmy.New().Tool(admit))
			c := newRawStdio(t, reg, `{"elicitation":{}}`)
			c.send(callBody(5, tt.tool, tt.args, ""))
			ask := c.next()
			if ask["method"] != "elicitation/create" {
				t.Fatalf("got %v; want the question", ask)
			}
			id, _ := json.Marshal(ask["id"])
			c.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":` + tt.content + `}}`)
			check(t, c.next(), tt.path)
			if runs.Load() != 0 || admitted.Load() != 0 {
				t.Fatal("the tool ran")
			}
		})
	}
	t.Run("HTTP session/wipe", func(t *testing.T) {
		f := newMCPFixture(t, carmy.New().ElicitConfirmation())
		alice := f.client(t, "alice-secret").open()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res, err := alice.request(ctx, http.MethodPost, callBody(11, "wipe", `{"target":"all","count":1}`, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		events := bufio.NewScanner(res.Body)
		ask := nextEvent(events, func(m map[string]any) bool { return m["method"] == "elicitation/create" })
		id, _ := json.Marshal(ask["id"])
		if rep := alice.post(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"confirm":1}}}`); rep.status != http.StatusAccepted {
			t.Fatalf("answer: %d %s", rep.status, rep.text)
		}
		check(t, nextEvent(events, func(m map[string]any) bool { return m["id"] == float64(11) }), "confirm")
		if f.wipes.Load() != 0 {
			t.Fatal("wipe ran")
		}
	})
}

// Paint is a form with an optional choice and a bound a form cannot say.
type Paint struct {
	Color string  `json:"color,omitempty" validate:"omitempty,oneof=red green blue"`
	Shade *string `json:"shade,omitempty" validate:"omitempty,oneof=light dark"`
	Coats int     `json:"coats" validate:"min=1,max=3"`
	Ratio float64 `json:"ratio" validate:"gt=0"`
}

// Nested is a form MCP cannot show.
type Nested struct {
	Inner struct {
		A string `json:"a"`
	} `json:"inner"`
}

// TestElicitForm: Context.Elicit sends MCP's restricted elicitation schema,
// a flat object of primitives where a choice is a plain enum and an
// optional field is not required; a struct a form cannot hold is the
// tool's error, asked of nobody; and a client whose protocol version has
// no elicitation is never asked, whatever it declares.
func TestElicitForm(t *testing.T) {
	t.Parallel()
	paint := carmy.Tool(func(ctx carmy.Context) (string, error) {
		var p Paint
		if ok, err := ctx.Elicit("Which paint?", &p); err != nil || !ok {
			return "", err
		}
		return p.Color, nil
	}, carmy.Read, carmy.Name("paint"), carmy.Register(false))
	nested := carmy.Tool(func(ctx carmy.Context) (string, error) {
		_, err := ctx.Elicit("?", &Nested{})
		return "", err
	}, carmy.Read, carmy.Name("nested"), carmy.Register(false))
	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			reg, err := carmy.New().Tool(paint, nested).Logger(quietLogger()).Build()
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			var asked []*mcp.ElicitParams
			s := singleClient(t, reg, "memory", version, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, req.Params)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "red", "coats": 2, "ratio": 0.5}}, nil
			}})
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "paint"})
			if err != nil {
				t.Fatal(err)
			}
			if version < "2025-06-18" {
				if len(asked) != 0 || errorObject(t, res)["code"] != "unavailable" {
					t.Fatalf("asked %d, result %+v; want a client of %s never asked", len(asked), res, version)
				}
				return
			}
			if len(asked) != 1 || res.IsError {
				t.Fatalf("asked %d, result %+v", len(asked), res)
			}
			form, _ := json.Marshal(asked[0].RequestedSchema)
			want := `{"properties":{"coats":{"maximum":3,"minimum":1,"type":"integer"},"color":{"enum":["red","green","blue"],"type":"string"},"ratio":{"type":"number"},"shade":{"enum":["light","dark"],"type":"string"}},"required":["coats","ratio"],"type":"object"}`
			if string(form) != want {
				t.Fatalf("form\n%s\nwant\n%s", form, want)
			}
			asked = nil
			res, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "nested"})
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 0 || errorObject(t, res)["code"] != "internal" {
				t.Fatalf("nested: asked %d, result %v; want the tool's internal error", len(asked), errorObject(t, res))
			}
		})
	}
}

// TestRefusalForTheModel: over HTTP, where the server's console is served,
// the refusal a model reads is short, links to the approval's page with an
// absolute URL, and leaves the grants a host could give to the details.
func TestRefusalForTheModel(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New())
	status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	e := errObj(body)
	if status != http.StatusForbidden || e["code"] != "confirmation_required" {
		t.Fatalf("%d %v", status, body)
	}
	d, _ := e["details"].(map[string]any)
	link, _ := d["approval_url"].(string)
	if !strings.HasPrefix(link, srv.URL+"/console?approval=") || !strings.Contains(e["message"].(string), link) {
		t.Fatalf("%v; want the absolute approval URL in the details and the message", e)
	}
	raw, _ := json.Marshal(e)
	var ce carmy.Error
	if err := json.Unmarshal(raw, &ce); err != nil {
		t.Fatal(err)
	}
	ce.Details = d
	checkModelMessage(t, &ce)
}

// nextEvent returns the next message of an event stream that is wanted,
// nil when the stream ends first.
func nextEvent(events *bufio.Scanner, wanted func(map[string]any) bool) map[string]any {
	for events.Scan() {
		data, ok := strings.CutPrefix(events.Text(), "data: ")
		var m map[string]any
		if ok && json.Unmarshal([]byte(data), &m) == nil && wanted(m) {
			return m
		}
	}
	return nil
}
