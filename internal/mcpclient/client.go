//lint:file-ignore SA1019 roots, sampling and logging are deprecated from 2026-07-28 on, and still what servers of earlier versions use.

// Package mcpclient is carmy's client of an upstream MCP server, the one a
// mount connects to: a stdio server run as a child process, or a
// streamable HTTP endpoint of either protocol generation. It lists the
// upstream's tools with their definitions as the upstream wrote them,
// calls them with carmy's _meta (as the upstream's tasks where asked:
// tasks.go), forwards progress, log messages,
// questions, sampling and cancellation, reads the upstream's resources and
// prompts on a caller's behalf, follows the upstream's list changes and
// reconnects with backoff. It decides nothing: the mount governs every
// call and every read.
package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/canon"
)

// Config says how to reach one upstream and what carmy declares to it.
type Config struct {
	// Name names the mount in every error and log line.
	Name string
	// Command runs a stdio server: the program and its arguments.
	Command []string
	// Env is the environment the child gets beside PATH, HOME and LANG.
	Env map[string]string
	// URL reaches a streamable HTTP server.
	URL string
	// Headers are sent with every HTTP request: the upstream's credentials.
	Headers map[string]string
	// Roots are the roots carmy declares; none declares no roots at all.
	Roots []string
	// URLElicitation declares URL elicitation beside forms.
	URLElicitation bool
	// Sampling declares sampling: the upstream's requests go to the
	// caller of the call they belong to (Request.Sample).
	Sampling bool
	// Logger gets the child's stderr, the upstream's log messages and
	// anything tied to no call.
	Logger *slog.Logger
	// ConnectTimeout bounds connecting and listing tools (default 30s).
	ConnectTimeout time.Duration
	// MaxResult bounds one message from the upstream, in bytes (default
	// 16 MiB).
	MaxResult int
	// Changed is told once the upstream's tools may have changed: after a
	// list_changed notification or a reconnection, with the new list.
	Changed func(tools []Tool)
	// ResourcesChanged is told of the upstream's resource list changes,
	// and PromptsChanged of its prompt list changes.
	ResourcesChanged, PromptsChanged func()
	// ResourceUpdated is told of an update of a resource subscribed to.
	ResourceUpdated func(uri string)
}

// Tool is one upstream tool as the upstream defines it.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema and OutputSchema are the upstream's bytes; OutputSchema
	// is nil when it declares none.
	InputSchema, OutputSchema json.RawMessage
	// The hints, as the upstream set them; nil where it left one out.
	ReadOnly, Destructive, OpenWorld, Idempotent *bool
	// TaskSupport is execution.taskSupport: "", "forbidden", "optional"
	// or "required".
	TaskSupport string
	// Hash is the hex SHA-256 of the definition's canonical JSON: its
	// description, schemas, annotations and execution.
	Hash string
}

// Kind says what happened to a call that failed.
type Kind uint8

const (
	// NotSent: the call never left carmy; sending it again is safe.
	NotSent Kind = iota + 1
	// OutcomeUnknown: the call was sent and its answer lost; the upstream
	// may have acted.
	OutcomeUnknown
	// Refused: the upstream answered with a protocol error.
	Refused
	// TooLarge: the upstream's answer exceeded MaxResult.
	TooLarge
	// Malformed: the upstream's answer could not be read.
	Malformed
	// TaskFailed: the upstream ran the call as a task, which failed (a
	// protocol error of the upstream's) or was cancelled upstream.
	TaskFailed
)

// Error is a failed call or connection, naming the mount.
type Error struct {
	Mount string
	Kind  Kind
	// Code is the upstream's JSON-RPC error code, for Refused.
	Code int64
	Msg  string
	Err  error
	// data is the upstream's error data, for Refused.
	data json.RawMessage
}

// MissingCapability is the client capability the upstream refused the
// call for want of (a missing required client capability error), "" for
// another failure.
func (e *Error) MissingCapability() string {
	if e.Kind != Refused || e.Code != mcp.CodeMissingRequiredClientCapabilities {
		return ""
	}
	var d struct {
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	_ = json.Unmarshal(e.data, &d)
	if len(d.Required) == 0 {
		return ""
	}
	return slices.Sorted(maps.Keys(d.Required))[0]
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("mount %s: %s: %v", e.Mount, e.Msg, e.Err)
	}
	return fmt.Sprintf("mount %s: %s", e.Mount, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Request is one call of an upstream tool.
type Request struct {
	Name string
	// Arguments are sent as they are: the canonical bytes carmy checked.
	Arguments json.RawMessage
	// Meta joins the request's _meta (carmy/request_id).
	Meta map[string]any
	// Progress gets the upstream's progress on the call; nil drops it.
	Progress func(done, total float64, msg string)
	// Elicit asks the caller's person for a form's fields; nil declines.
	// It returns the action ("accept", "decline", "cancel") and, accepted,
	// the answer as JSON. key is the upstream's name of the question in an
	// input-required result, "" for a question sent in a session.
	Elicit func(ctx context.Context, key, message string, schema json.RawMessage) (action string, content json.RawMessage, err error)
	// ElicitURL sends the caller's person to a URL, the upstream's
	// elicitation id with it; nil declines.
	ElicitURL func(ctx context.Context, key, message, url, id string) (action string, err error)
	// Sample asks the caller to sample (sampling/createMessage's params
	// and result, as JSON); nil refuses.
	Sample func(ctx context.Context, key string, params json.RawMessage) (json.RawMessage, error)
	// Rounds is set for a caller of the sessionless protocol, which
	// answers questions in its next round: the call goes to the upstream's
	// connection of that protocol where there is one, so that the
	// upstream's own questions (its input-required results) reach Elicit
	// and Sample under the upstream's keys, and the upstream is told only
	// what the caller declared and the mount allows. A callback that
	// returns [ErrAnswerLater] ends the call once the round's other
	// questions are asked.
	Rounds *Caller
	// Log gets the upstream's log messages during the call; nil leaves
	// them to carmy's log.
	Log func(level slog.Level, logger string, data any)
	// Task calls the tool as a task of the upstream's, which the call
	// waits for (see [Client.TakesTasks]).
	Task bool
	// HandOff, with Task and Rounds, ends the call as soon as the
	// upstream makes its task, over a connection of the sessionless
	// protocol: [Client.Call] returns a [*HandOff] naming the task, left
	// running for a task of the caller's to adopt. There the upstream
	// decides, call by call, whether it answers at once, asks in rounds
	// first, or makes a task; the caller learns which without waiting.
	HandOff bool
	// Adopt is the upstream's task a [HandOff] named: the call waits for
	// it, as for a task it made itself, instead of being sent.
	Adopt string
}

// HandOff is the error of a call ([Request.HandOff]) whose upstream made
// a task: the caller adopts it ([Request.Adopt]) in a task of its own, or
// cancels it.
type HandOff struct {
	Task   string
	Cancel func() // cancels the task upstream, for a caller that cannot adopt it
}

func (h *HandOff) Error() string { return "the upstream made task " + h.Task }

// Caller is what the caller of a call declared it can answer.
type Caller struct {
	Elicit, ElicitURL, Sample bool
}

// ErrAnswerLater is returned by a callback of a [Request] whose caller
// answers in its next round: the call stops, asking the rest of the
// upstream's questions first, and [Client.Call] returns it.
var ErrAnswerLater = errors.New("the caller answers in its next round")

// maxRounds bounds the input-required results of one call, as the SDK's
// own loop does.
const maxRounds = 10

// Result is an upstream tool's answer, as the upstream wrote it.
type Result struct {
	Content    json.RawMessage // the content blocks, a JSON array
	Structured json.RawMessage // structuredContent; nil without
	IsError    bool
}

// Client is one connection to an upstream, kept open: it reconnects
// while it is not closed.
type Client struct {
	cfg    Config
	sdk    *mcp.Client
	logger *slog.Logger

	mu      sync.Mutex
	session *mcp.ClientSession
	// rounds is a connection of the sessionless protocol (the session
	// itself, when it is one), for callers of that protocol; nil where the
	// upstream has none.
	rounds  *mcp.ClientSession
	tools   []Tool
	raw     map[string]wireTool // the last definition of each tool seen on the wire
	calls   map[string]*call    // by progress token
	byID    map[string]*call    // by JSON-RPC id
	closed  bool
	stop    context.CancelFunc
	life    context.Context
	refresh chan struct{}
	done    sync.WaitGroup

	// What the calls of tasks need (tasks.go): whether the session runs
	// tool calls as tasks, the requests carmy sent itself by JSON-RPC id,
	// the calls by their upstream task, and how to send: the child's
	// input, or the HTTP client of the session.
	sessionTasks atomic.Bool
	rpcs         map[string]chan rpcAnswer
	byTask       map[string]*call
	stdin        *lineWriter
	httpc        *http.Client

	seq atomic.Uint64
}

// call is one call in flight.
type call struct {
	req  *Request
	sent atomic.Bool
	mu   sync.Mutex
	raw  json.RawMessage // the result as the upstream wrote it
	task string          // the upstream's task the call waits for; under Client.mu
	// done and total are the last progress the upstream reported, which
	// a status message of its task goes with.
	done, total float64
}

func (c *call) markSent() { c.sent.Store(true) }

// report hands the upstream's progress on, and keeps it.
func (c *call) report(done, total float64, msg string) {
	if c.req.Progress == nil {
		return
	}
	c.mu.Lock()
	c.done, c.total = done, total
	c.mu.Unlock()
	c.req.Progress(done, total, msg)
}

// status hands a status message of the upstream's task on as progress,
// with the last progress reported.
func (c *call) status(msg string) {
	if c.req.Progress == nil {
		return
	}
	c.mu.Lock()
	done, total := c.done, c.total
	c.mu.Unlock()
	c.req.Progress(done, total, msg)
}

type callKey struct{}

// Connect connects to the upstream and lists its tools. The client
// reconnects by itself until Close.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = 16 << 20
	}
	if (len(cfg.Command) == 0) == (cfg.URL == "") {
		return nil, &Error{Mount: cfg.Name, Kind: NotSent, Msg: "needs a command or a URL, not both"}
	}
	c := &Client{cfg: cfg, logger: cfg.Logger.With("mount", cfg.Name), raw: map[string]wireTool{},
		calls: map[string]*call{}, byID: map[string]*call{}, refresh: make(chan struct{}, 1),
		rpcs: map[string]chan rpcAnswer{}, byTask: map[string]*call{}}
	c.life, c.stop = context.WithCancel(context.Background())
	c.sdk = mcp.NewClient(&mcp.Implementation{Name: "carmy", Version: "mount"}, c.options())
	for _, r := range cfg.Roots {
		c.sdk.AddRoots(&mcp.Root{URI: r})
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	cs, err := c.connect(cctx)
	if err != nil {
		c.stop()
		return nil, err
	}
	tools, err := c.list(cctx, cs)
	if err != nil {
		_ = cs.Close()
		c.stop()
		return nil, err
	}
	rounds := c.openRounds(cctx, cs)
	c.mu.Lock()
	c.session, c.tools, c.rounds = cs, tools, rounds
	c.mu.Unlock()
	c.done.Add(2)
	go c.watch(cs)
	go c.refresher()
	return c, nil
}

// options are the SDK client's: carmy declares only what the mount
// configures.
func (c *Client) options() *mcp.ClientOptions {
	caps := &mcp.ClientCapabilities{}
	if len(c.cfg.Roots) > 0 {
		caps.RootsV2 = &mcp.RootCapabilities{}
	}
	caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
	if c.cfg.URLElicitation {
		caps.Elicitation.URL = &mcp.URLElicitationCapabilities{}
	}
	if c.cfg.Sampling {
		caps.Sampling = &mcp.SamplingCapabilities{}
	}
	o := &mcp.ClientOptions{
		Logger:             c.logger,
		Capabilities:       caps,
		ElicitationHandler: c.elicit,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.poke()
		},
		ProgressNotificationHandler: c.progress,
		// The upstream's input-required results are answered in Call, so
		// that each question keeps the upstream's key on its way to the
		// caller, not by the SDK, which hands its handlers the params only.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		// Log messages are read on the wire (logLine), in order with the
		// results they precede.
	}
	if c.cfg.Sampling {
		o.CreateMessageHandler = c.sample
	}
	if c.cfg.ResourceUpdated != nil {
		o.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.cfg.ResourceUpdated(req.Params.URI)
		}
	}
	if c.cfg.ResourcesChanged != nil {
		o.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { c.cfg.ResourcesChanged() }
	}
	if c.cfg.PromptsChanged != nil {
		o.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { c.cfg.PromptsChanged() }
	}
	return o
}

// connect opens one session.
func (c *Client) connect(ctx context.Context) (*mcp.ClientSession, error) {
	var t mcp.Transport
	if len(c.cfg.Command) > 0 {
		pt, err := c.startChild()
		if err != nil {
			return nil, &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "cannot start " + c.cfg.Command[0], Err: err}
		}
		t = pt
	} else {
		t = c.httpTransport()
	}
	// A session of the 2025-11-25 protocol, where the upstream offers one:
	// its tools may then ask the caller in the middle of a call (sampling,
	// elicitation), as a session's tools do, and those written for the
	// sessionless protocol's rounds still work, the upstream's SDK asking
	// for them.
	cs, err := c.sdk.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "cannot connect", Err: err}
	}
	// A session's server logs nothing until asked: carmy asks for every
	// level, and its callers' own levels filter what reaches them. A
	// sessionless request asks for itself (Call).
	if res := cs.InitializeResult(); !sessionless(cs) && res != nil && res.Capabilities != nil && res.Capabilities.Logging != nil {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			c.logger.Warn("carmy: the upstream refused a log level; its log messages may not reach carmy", "error", err)
		}
	}
	return cs, nil
}

// httpTransport reaches the upstream's endpoint, tapped, through the one
// HTTP client of every connection and of the requests of tasks.go.
func (c *Client) httpTransport() mcp.Transport {
	c.mu.Lock()
	if c.httpc == nil {
		h := http.Header{}
		for k, v := range c.cfg.Headers {
			h.Set(k, v)
		}
		c.httpc = &http.Client{Transport: &roundTripper{base: http.DefaultTransport, tap: tap{c}, headers: h, max: c.cfg.MaxResult}}
	}
	hc := c.httpc
	c.mu.Unlock()
	// A response stream the server closes is resumed (a GET with the
	// last event's id), never sent again: a couple of tries, so that a
	// call whose upstream went away is soon known lost.
	return &mcp.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc, MaxRetries: 2}
}

// SessionlessTasks reports whether calls of callers of the sessionless
// protocol reach the upstream over a connection of that protocol whose
// upstream declares the tasks extension: there a call of a tool that runs
// only as a task may be handed off ([Request.HandOff]).
func (c *Client) SessionlessTasks() bool {
	c.mu.Lock()
	rs := c.rounds
	c.mu.Unlock()
	return rs != nil && declaresTasks(rs)
}

// openRounds is the connection for callers of the sessionless protocol:
// cs when it is of that protocol, else a second one to an HTTP endpoint
// that speaks it, else nil. In a session the upstream's SDK asks carmy
// in the middle of a call under no name; over this connection its
// questions come back in the call's result, each under its key, which a
// sessionless caller then sees.
func (c *Client) openRounds(ctx context.Context, cs *mcp.ClientSession) *mcp.ClientSession {
	if sessionless(cs) {
		return cs
	}
	if c.cfg.URL == "" {
		return nil
	}
	rs, err := c.sdk.Connect(ctx, c.httpTransport(), &mcp.ClientSessionOptions{ProtocolVersion: sessionlessProtocol})
	if err != nil {
		return nil
	}
	if !sessionless(rs) {
		_ = rs.Close()
		return nil
	}
	return rs
}

// childTransport is a stdio server run as a child process, its output
// tapped. Closing it closes the child's input, then stops the child if it
// does not exit.
type childTransport struct {
	mcp.IOTransport
	cmd *exec.Cmd
}

func (c *Client) startChild() (*childTransport, error) {
	cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
	cmd.Env = c.environment()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(nil, 64<<10)
		for s.Scan() {
			c.logger.Info("carmy: upstream stderr", "line", s.Text())
		}
	}()
	t := &childTransport{cmd: cmd}
	t.Reader = &lineReader{r: stdout, tap: tap{c}, max: c.cfg.MaxResult}
	in := &childInput{lineWriter{w: stdin, tap: tap{c}}, cmd}
	t.Writer = in
	c.mu.Lock()
	c.stdin = &in.lineWriter
	c.mu.Unlock()
	t.MaxLineLength = c.cfg.MaxResult
	return t, nil
}

// childInput closes the child's input, then waits for it to exit, stopping
// it after a grace.
type childInput struct {
	lineWriter
	cmd *exec.Cmd
}

func (ci *childInput) Close() error {
	err := ci.w.Close()
	exited := make(chan struct{})
	go func() { _ = ci.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = ci.cmd.Process.Kill()
		<-exited
	}
	return err
}

// environment is the child's: PATH, HOME and LANG from carmy's, and what
// the mount names. Nothing else of carmy's environment (its secrets)
// reaches the child.
func (c *Client) environment() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, named := c.cfg.Env[k]; !named {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(c.cfg.Env))
	for k := range c.cfg.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+c.cfg.Env[k])
	}
	return env
}

// list lists every tool, page by page.
func (c *Client) list(ctx context.Context, cs *mcp.ClientSession) ([]Tool, error) {
	var tools []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "cannot list tools", Err: err}
		}
		tools = append(tools, c.tool(t))
	}
	return tools, nil
}

// tool is an SDK tool with the definition as the wire carried it.
func (c *Client) tool(t *mcp.Tool) Tool {
	c.mu.Lock()
	w, ok := c.raw[t.Name]
	c.mu.Unlock()
	if !ok { // not seen on the wire: the SDK's reading of it
		w = wireTool{Name: t.Name, Description: t.Description}
		w.InputSchema, _ = json.Marshal(t.InputSchema)
		if t.OutputSchema != nil {
			w.OutputSchema, _ = json.Marshal(t.OutputSchema)
		}
		if t.Annotations != nil {
			w.Annotations, _ = json.Marshal(t.Annotations)
		}
	}
	tool := Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: w.InputSchema}
	if len(w.OutputSchema) > 0 && string(w.OutputSchema) != "null" {
		tool.OutputSchema = w.OutputSchema
	}
	if len(w.Annotations) > 0 {
		var a struct {
			ReadOnly    *bool `json:"readOnlyHint"`
			Destructive *bool `json:"destructiveHint"`
			OpenWorld   *bool `json:"openWorldHint"`
			Idempotent  *bool `json:"idempotentHint"`
		}
		_ = json.Unmarshal(w.Annotations, &a)
		tool.ReadOnly, tool.Destructive, tool.OpenWorld, tool.Idempotent = a.ReadOnly, a.Destructive, a.OpenWorld, a.Idempotent
	}
	if len(w.Execution) > 0 {
		var e struct {
			TaskSupport string `json:"taskSupport"`
		}
		_ = json.Unmarshal(w.Execution, &e)
		tool.TaskSupport = e.TaskSupport
	}
	def, _ := json.Marshal(struct {
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  json.RawMessage `json:"annotations,omitempty"`
		Execution    json.RawMessage `json:"execution,omitempty"`
	}{w.Description, w.InputSchema, tool.OutputSchema, w.Annotations, w.Execution})
	if form, err := canon.Form(def, nil); err == nil {
		def = form
	}
	tool.Hash = canon.Sum(def)
	return tool
}

// rawTool keeps a tool's definition as the wire carried it.
func (c *Client) rawTool(w wireTool) {
	c.mu.Lock()
	c.raw[w.Name] = w
	c.mu.Unlock()
}

// Tools returns the upstream's tools as last listed.
func (c *Client) Tools() []Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tools)
}

// Connected reports whether a session is open now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil
}

// Call calls an upstream tool. A failure is an [*Error] that says whether
// the call left carmy, or [ErrAnswerLater].
//
// An input-required result of the upstream is answered here, each
// question under its key: forms and pages through Elicit and ElicitURL,
// sampling through Sample, roots from the mount's own (never a caller's);
// then the call is sent again with the answers and the upstream's state.
func (c *Client) Call(ctx context.Context, req *Request) (*Result, error) {
	c.mu.Lock()
	cs := c.session
	if req.Rounds != nil && c.rounds != nil {
		cs = c.rounds
	}
	if cs == nil {
		c.mu.Unlock()
		return nil, &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "not connected; reconnecting"}
	}
	token := "carmy-" + strconv.FormatUint(c.seq.Add(1), 10)
	cl := &call{req: req}
	c.calls[strconv.Quote(token)] = cl
	c.mu.Unlock()
	defer c.forget(strconv.Quote(token), cl)

	meta := mcp.Meta{}
	for k, v := range req.Meta {
		meta[k] = v
	}
	meta["progressToken"] = token
	if sessionless(cs) {
		meta[mcp.MetaKeyLogLevel] = "debug"
		if req.Rounds != nil {
			meta[mcp.MetaKeyClientCapabilities] = c.declared(*req.Rounds)
		}
	}
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if req.Task {
		raw, err := c.callTask(context.WithValue(ctx, callKey{}, cl), cs, cl, args, meta)
		if err != nil {
			return nil, err
		}
		return c.result(req.Name, raw)
	}
	params := &mcp.CallToolParams{Name: req.Name, Arguments: args, Meta: meta}
	var res *mcp.CallToolResult
	for round := 1; ; round++ {
		var err error
		res, err = cs.CallTool(context.WithValue(ctx, callKey{}, cl), params)
		if err != nil {
			return nil, c.callError(ctx, cl, err)
		}
		if !res.NeedsInput() {
			break
		}
		answers, err := c.answerRound(ctx, cl, round, res.InputRequests)
		if err != nil {
			return nil, err
		}
		next := *params
		next.InputResponses, next.RequestState = answers, res.RequestState
		params = &next
	}
	cl.mu.Lock()
	raw := cl.raw
	cl.mu.Unlock()
	if raw == nil { // not seen on the wire: the SDK's reading of it
		var err error
		if raw, err = json.Marshal(res); err != nil {
			return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: "cannot read the result of " + req.Name, Err: err}
		}
	}
	return c.result(req.Name, raw)
}

// result reads a call's result as the upstream wrote it.
func (c *Client) result(name string, raw json.RawMessage) (*Result, error) {
	if len(raw) > c.cfg.MaxResult {
		return nil, &Error{Mount: c.cfg.Name, Kind: TooLarge, Msg: fmt.Sprintf("the result of %s is %d bytes, over the bound of %d", name, len(raw), c.cfg.MaxResult)}
	}
	var out struct {
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: "cannot read the result of " + name, Err: err}
	}
	if len(out.Content) == 0 || string(out.Content) == "null" {
		out.Content = json.RawMessage(`[]`)
	}
	if string(out.Structured) == "null" {
		out.Structured = nil
	}
	return &Result{Content: out.Content, Structured: out.Structured, IsError: out.IsError}, nil
}

// declared is what carmy declares to the upstream for a caller of the
// sessionless protocol, in the request's _meta: what the caller declared
// and the mount allows, and roots when the mount has its own.
func (c *Client) declared(k Caller) map[string]any {
	caps := map[string]any{}
	elicitation := map[string]any{}
	if k.Elicit {
		elicitation["form"] = map[string]any{}
	}
	if k.ElicitURL && c.cfg.URLElicitation {
		elicitation["url"] = map[string]any{}
	}
	if len(elicitation) > 0 {
		caps["elicitation"] = elicitation
	}
	if k.Sample && c.cfg.Sampling {
		caps["sampling"] = map[string]any{}
	}
	if len(c.cfg.Roots) > 0 {
		caps["roots"] = map[string]any{}
	}
	return caps
}

// answerRound answers the questions of the upstream's round-th
// input-required result to cl, and readies cl to be sent again with the
// answers: the upstream has not acted on a call it asks about, so the
// next round is a call not yet sent.
func (c *Client) answerRound(ctx context.Context, cl *call, round int, questions mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if round == maxRounds {
		return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: fmt.Sprintf("%s asked for input %d times", cl.req.Name, maxRounds)}
	}
	answers, err := c.fulfil(ctx, cl.req, questions)
	if err != nil {
		return nil, err
	}
	cl.sent.Store(false)
	cl.mu.Lock()
	cl.raw = nil
	cl.mu.Unlock()
	return answers, nil
}

// fulfil answers the questions of an input-required result, in the order
// of their keys (so that each round asks them alike), through req's
// callbacks. A callback's ErrAnswerLater is returned once every question
// has been asked: they all go in the caller's one round.
func (c *Client) fulfil(ctx context.Context, req *Request, questions mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	keys := slices.Sorted(maps.Keys(questions))
	answers := mcp.InputResponseMap{}
	later := false
	for _, key := range keys {
		a, err := c.answer(ctx, req, key, questions[key])
		switch {
		case errors.Is(err, ErrAnswerLater):
			later = true
		case err != nil:
			return nil, err
		default:
			answers[key] = a
		}
	}
	if later {
		return nil, ErrAnswerLater
	}
	return answers, nil
}

// answer is the answer to one question of the upstream's, key its name.
func (c *Client) answer(ctx context.Context, req *Request, key string, q mcp.InputRequest) (mcp.InputResponse, error) {
	decline := &mcp.ElicitResult{Action: "decline"}
	switch p := q.(type) {
	case *mcp.ElicitParams:
		if p.Mode == "url" {
			if req.ElicitURL == nil || !c.cfg.URLElicitation {
				return decline, nil
			}
			action, err := req.ElicitURL(ctx, key, p.Message, p.URL, p.ElicitationID)
			if err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: action}, nil
		}
		if req.Elicit == nil {
			return decline, nil
		}
		schema, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return decline, nil
		}
		action, content, err := req.Elicit(ctx, key, p.Message, schema)
		if err != nil {
			return nil, err
		}
		res := &mcp.ElicitResult{Action: action}
		if action == "accept" && len(content) > 0 {
			if err := json.Unmarshal(content, &res.Content); err != nil {
				return nil, err
			}
		}
		return res, nil
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		if req.Sample == nil || !c.cfg.Sampling {
			return nil, &Error{Mount: c.cfg.Name, Kind: Refused, Code: mcp.CodeMissingRequiredClientCapabilities, Msg: "the upstream asked to sample, which the mount does not allow"}
		}
		params, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		raw, err := req.Sample(ctx, key, params)
		if err != nil {
			return nil, err
		}
		var m mcp.InputResponseMap
		if err := json.Unmarshal(fmt.Appendf(nil, `{"r":%s}`, raw), &m); err != nil || m["r"] == nil {
			return nil, fmt.Errorf("the caller's sampling result cannot be read: %w", err)
		}
		return m["r"], nil
	case *mcp.ListRootsParams:
		return c.roots(), nil
	}
	return nil, &Error{Mount: c.cfg.Name, Kind: Malformed, Msg: fmt.Sprintf("the upstream asked for input carmy does not know (%T)", q)}
}

// roots answers roots/list: the mount's own roots, never a caller's.
func (c *Client) roots() *mcp.ListRootsResult {
	res := &mcp.ListRootsResult{Roots: []*mcp.Root{}}
	for _, r := range c.cfg.Roots {
		res.Roots = append(res.Roots, &mcp.Root{URI: r})
	}
	return res
}

// codeRejected is the SDK's JSON-RPC code for a message its transport
// could not deliver, or whose answer it could not read: no answer of the
// upstream's.
const codeRejected = -32005

// callError says what a failed call's error means for its outcome.
func (c *Client) callError(ctx context.Context, cl *call, err error) error {
	e := &Error{Mount: c.cfg.Name, Err: err}
	var rpc *jsonrpc.Error
	switch {
	case errors.As(err, &rpc) && rpc.Code != codeRejected:
		e.Kind, e.Code, e.Msg, e.Err, e.data = Refused, rpc.Code, rpc.Message, nil, rpc.Data
	case !cl.sent.Load():
		e.Kind, e.Msg = NotSent, "the call was not sent"
	case ctx.Err() != nil:
		e.Kind, e.Msg, e.Err = OutcomeUnknown, "the call stopped after it was sent", ctx.Err()
	default:
		e.Kind, e.Msg = OutcomeUnknown, "the answer was lost"
	}
	return e
}

func (c *Client) forget(token string, cl *call) {
	c.mu.Lock()
	delete(c.calls, token)
	for id, x := range c.byID {
		if x == cl {
			delete(c.byID, id)
		}
	}
	c.mu.Unlock()
}

// bindCall ties the JSON-RPC id of a tools/call to the call whose progress
// token it carries.
func (c *Client) bindCall(token, id string) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.calls[token]
	if cl != nil {
		c.byID[id] = cl
	}
	return cl
}

// resultOf keeps the raw result of the call with JSON-RPC id; false when
// no call in flight has that id.
func (c *Client) resultOf(id string, result json.RawMessage) bool {
	c.mu.Lock()
	cl := c.byID[id]
	c.mu.Unlock()
	if cl == nil {
		return false
	}
	cl.mu.Lock()
	cl.raw = append(json.RawMessage(nil), result...)
	cl.mu.Unlock()
	return true
}

// progress hands the upstream's progress to the call it names.
func (c *Client) progress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, err := json.Marshal(req.Params.ProgressToken)
	if err != nil {
		return
	}
	c.mu.Lock()
	cl := c.calls[string(token)]
	c.mu.Unlock()
	if cl != nil {
		cl.report(req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}

// callOf is the call a question of the upstream belongs to: the one
// waiting for the task its _meta names (meta, nil for a message that has
// none), else the one whose request carries ctx, else the only call in
// flight (the calls waiting for an upstream's task do not count: their
// questions name their task). With several calls in flight a question
// that names none belongs to no one, and is declined.
func (c *Client) callOf(ctx context.Context, meta map[string]any) *call {
	if cl := c.taskCall(meta); cl != nil {
		return cl
	}
	if cl, ok := ctx.Value(callKey{}).(*call); ok {
		return cl
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var only *call
	for _, cl := range c.calls {
		switch {
		case cl.task != "":
		case only != nil:
			return nil
		default:
			only = cl
		}
	}
	return only
}

// elicit forwards the upstream's question to the person of the call it
// belongs to, as an input-required result's are; where nobody can be
// asked, or a page cannot be shown, it is declined.
func (c *Client) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	cl := c.callOf(ctx, req.Params.GetMeta())
	decline := &mcp.ElicitResult{Action: "decline"}
	if cl == nil {
		c.logger.Info("carmy: declined a question of the upstream tied to no call", "message", req.Params.Message)
		return decline, nil
	}
	res, err := c.answer(ctx, cl.req, "", req.Params)
	switch {
	case err != nil && req.Params.Mode == "url":
		c.logger.Info("carmy: declined a page the upstream would send the caller to: the caller cannot be sent", "error", err)
		return decline, nil
	case err != nil:
		return nil, err
	}
	return res.(*mcp.ElicitResult), nil
}

// poke asks the refresher to list the tools again.
func (c *Client) poke() {
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// refresher lists the tools again after each list change, and tells
// Changed.
func (c *Client) refresher() {
	defer c.done.Done()
	for {
		select {
		case <-c.life.Done():
			return
		case <-c.refresh:
		}
		c.mu.Lock()
		cs := c.session
		c.mu.Unlock()
		if cs == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(c.life, c.cfg.ConnectTimeout)
		tools, err := c.list(ctx, cs)
		cancel()
		if err != nil {
			c.logger.Warn("carmy: cannot list the upstream's tools again", "error", err)
			continue
		}
		c.mu.Lock()
		c.tools = tools
		c.mu.Unlock()
		if c.cfg.Changed != nil {
			c.cfg.Changed(tools)
		}
	}
}

// watch waits for the session to end, then reconnects with backoff, until
// Close.
func (c *Client) watch(cs *mcp.ClientSession) {
	defer c.done.Done()
	backoff := 100 * time.Millisecond
	for {
		_ = cs.Wait()
		c.mu.Lock()
		c.session = nil
		if c.rounds == cs {
			c.rounds = nil
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		c.logger.Warn("carmy: the upstream's connection ended; reconnecting")
		for {
			select {
			case <-c.life.Done():
				return
			case <-time.After(backoff):
			}
			ctx, cancel := context.WithTimeout(c.life, c.cfg.ConnectTimeout)
			next, err := c.connect(ctx)
			cancel()
			if err == nil {
				cs = next
				break
			}
			c.logger.Warn("carmy: cannot reconnect to the upstream", "error", err, "retry_in", backoff)
			backoff = min(2*backoff, 30*time.Second)
		}
		backoff = 100 * time.Millisecond
		c.mu.Lock()
		rounds := c.rounds
		c.mu.Unlock()
		if rounds == nil {
			ctx, cancel := context.WithTimeout(c.life, c.cfg.ConnectTimeout)
			rounds = c.openRounds(ctx, cs)
			cancel()
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			_ = cs.Close()
			if rounds != nil && rounds != cs {
				_ = rounds.Close()
			}
			return
		}
		c.session, c.rounds = cs, rounds
		c.mu.Unlock()
		c.logger.Info("carmy: reconnected to the upstream")
		c.poke()
		// An upstream that came back may be another process, with other
		// lists, and a change it announced while away was not heard.
		if c.cfg.ResourcesChanged != nil {
			c.cfg.ResourcesChanged()
		}
		if c.cfg.PromptsChanged != nil {
			c.cfg.PromptsChanged()
		}
	}
}

// Close ends the connection (and the child) and stops reconnecting.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cs, rounds := c.session, c.rounds
	c.mu.Unlock()
	c.stop()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	if rounds != nil && rounds != cs {
		_ = rounds.Close()
	}
	c.done.Wait()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}
