// Package mcpserve is carmy's MCP door: the official SDK's server made of
// a host's tools, served over streamable HTTP and over any transport of
// the SDK, with the paths that answer tools/call without the SDK's
// JSON-RPC machinery where the answer is the same. It knows the host only
// through [Host]: the tools' list, given once, and a call that runs the
// host's pipeline and returns its outcome. The door keeps what is MCP's:
// the client as a tool reaches it ([Peer]: progress, logs, questions),
// asking the person at the client to confirm a call ([Peer.Confirm]), the
// signed request state that carries the sessionless protocol's rounds
// ([State]), and the table of sessions over HTTP ([Sessions]).
package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
	"github.com/carmy-dev/carmy/internal/skills"
)

// Host is what the door needs of the registry that serves it. It must be
// safe for concurrent use.
type Host interface {
	// Authenticate returns the caller of an HTTP request, or writes the
	// refusal and returns false.
	Authenticate(w http.ResponseWriter, req *http.Request) (Identity, bool)
	// Call runs a call of one of the host's tools through its pipeline.
	// The error is for a result that cannot be written at all; a refused
	// or failed call is an Outcome with Err.
	Call(ctx context.Context, c *Call) (Outcome, error)
	// Visible returns which of the tools of the host's list id may see.
	Visible(ctx context.Context, id Identity) func(name string) bool
	// UnknownTool is the JSON-RPC error of a call of a tool that the host
	// does not have.
	UnknownTool(ctx context.Context, name string, id Identity) *jsonrpc.Error
}

// Identity is who calls, as the host authenticated them. It has the fields
// of the host's identity, for a plain conversion.
type Identity struct {
	Principal   string
	Session     string
	Permissions []string
	Metadata    map[string]string
}

// Call is one tools/call of a host's tool, as the door received it.
type Call struct {
	Tool string
	// Params are the call's params: its arguments and _meta.
	Params *mcp.CallToolParamsRaw
	// Caller is who calls; Authenticated is false for an HTTP request that
	// carries no identity of the endpoint's, which the host refuses.
	Caller        Identity
	Authenticated bool
	// Session is the caller's session: the identity's, else the MCP
	// session's id, if any.
	Session string
	// Header holds the headers of the HTTP request that carried the call,
	// and Request that request (its context ends when its client goes
	// away); both nil over other transports.
	Header  http.Header
	Request *http.Request
	// Peer is the client, for the tool to reach it (progress, logs,
	// questions) and for confirmation.
	Peer *Peer
	// Wire is what the request said about itself, for telemetry.
	Wire Wire
}

// Wire describes the JSON-RPC request that carried a call.
type Wire struct {
	ID              jsontext.Value // the request id as sent; nil where the SDK decoded the request
	ProtocolVersion string         // the version the request is served under
	SessionID       string         // the MCP session's id; "" without one
	Transport       string         // "tcp" over streamable HTTP, "pipe" over stdio
}

// Outcome is what a call gave, as the host reports it.
type Outcome struct {
	// Output is the tool's output as JSON; Content its MCP blocks, for a
	// tool whose output is content.
	Output      json.RawMessage
	Content     []mcp.Content
	ExecutionID string
	Replayed    bool
	// Err is the error the caller is shown, nil on success: the result's
	// error object is its JSON form (code, message, field paths).
	Err error
	// Task is the task the call became, for a [Tool] that HandsOff: what
	// its tool called made a task, which a task of the host's now waits
	// for. The caller is answered with it.
	Task *TaskState
}

// Tool is one of the host's tools as the door lists and answers it.
type Tool struct {
	// Def is the tool as tools/list shows it, without its output schema.
	Def *mcp.Tool
	// Output is the output schema, nil for a tool with no output.
	Output json.RawMessage
	// Content marks a tool whose output is MCP content blocks.
	Content bool
	// Confirms marks a tool whose calls may ask for confirmation by form on
	// every transport: the sessionless fast path leaves them to the SDK.
	Confirms bool
	// Tasks is the tool's task support: TaskForbidden, TaskOptional or
	// TaskRequired ("" is optional).
	Tasks string
	// AskFirst marks a tool whose sessionless calls ask their questions in
	// rounds before their task starts: a call without answers is not a
	// task, and the call that brings them starts it.
	AskFirst bool
	// HandsOff marks an AskFirst tool whose first call may become a task
	// after all (its [Outcome].Task): carmy answers that call itself, not
	// the SDK, which has no result that is a task.
	HandsOff bool
	// Deferred marks a tool a model should load on demand: tools/list
	// says defer_loading.
	Deferred bool
}

// Config is what a [Server] is made of.
type Config struct {
	Host    Host
	Tools   []Tool
	Version string
	// Logger gets the SDK's warnings and errors.
	Logger *slog.Logger
	// Stdio is the identity of a client of a single-client transport.
	Stdio Identity
	// State keeps what the sessionless protocol carries across a call's
	// rounds (nil: nothing, the host seals its own states).
	State *State
	// Sessions is the table of sessions over HTTP, which HTTPHandler needs;
	// the host closes them. Its ended hook is also told of the sessions
	// that Serve served.
	Sessions *Sessions
	// FormConfirmation is where a call that needs confirmation is
	// confirmed by a form that the client shows its user.
	FormConfirmation FormConfirmation
	// WaitProgress is how often a request that waits for a person sends
	// its client progress ([Peer.KeepWaiting]); 0 is [WaitProgressEvery].
	WaitProgress time.Duration
	// BodyLimit bounds a message over HTTP.
	BodyLimit int64
	// Streams ends when the server shuts down: every GET stream ends then.
	Streams context.Context
	// Options and Configure are the host's additions to the SDK's server.
	// With any, every message goes through the SDK, whose middleware must
	// see them all.
	Options   []func(*mcp.ServerOptions)
	Configure []func(*mcp.Server)
	// Skills are the skills the server serves with MCP's skills extension
	// (SEP-2640), and Rules, when set, says the server's rules for a
	// caller, the generated skill it serves besides them. With either, the
	// server declares the extension.
	Skills []*skills.Skill
	Rules  func(ctx context.Context, id Identity) skills.Rules
	// ListChanged declares that the tool list may change (some tools come
	// from mounted servers): clients are told by ToolsChanged.
	ListChanged bool
	// Mounts are the mounted upstreams whose resources and prompts the
	// server serves.
	Mounts []Mount
}

// Server is the MCP server of a host's tools.
type Server struct {
	cfg  Config
	host Host
	sdk  *mcp.Server
	info *mcp.Implementation
	// tools is the door's table of tools by name. A published table never
	// changes: SetTools replaces it whole, so readers need no lock.
	tools   atomic.Pointer[map[string]*entry]
	toolsMu sync.Mutex // serializes SetTools
	// fast is false when the host added to the SDK's server: then every
	// message goes through the SDK.
	fast bool
	// answered counts the calls of a session answered past the SDK.
	answered atomic.Int64
	// mirrored is true when a tool has arguments mirrored in headers.
	mirrored atomic.Bool
	// taskStreams carry the status notifications of sessions' tasks.
	taskStreams taskStreams
	// skills are the host's skills by the URI of their SKILL.md.
	skills map[string]*skills.Skill
	// mounts keeps the callers' subscriptions to the mounts' resources.
	mounts mounts
}

// entry is a tool of the door's table, made when the server is.
type entry struct {
	Tool
	// wrap: MCP carries the output as {"result": …}.
	wrap bool
	// headers are the arguments mirrored in headers (x-mcp-header).
	headers []mcpwire.ParamHeader
	call    mcp.ToolHandler
	def     mcp.Tool // as tools/list shows it
}

// New makes the server of cfg's tools: every tool, with the host's schemas
// and annotations, called through [Host.Call].
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, host: cfg.Host,
		info: &mcp.Implementation{Name: "carmy", Version: cfg.Version},
		fast: len(cfg.Options) == 0 && len(cfg.Configure) == 0}
	opts := &mcp.ServerOptions{
		Logger: s.logger(),
		// Only what carmy does: its tool list never changes, and tools
		// log through Context.Log. What a host adds with ConfigureMCP
		// adds its own capabilities.
		//lint:ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: cfg.ListChanged}, Logging: &mcp.LoggingCapabilities{}},
	}
	if _, ok := cfg.Host.(Tasks); ok {
		opts.Capabilities.Extensions = map[string]any{TasksExtension: map[string]any{}}
	}
	s.skillsExtension(opts)
	s.mountCapabilities(opts)
	for _, f := range cfg.Options {
		f(opts)
	}
	sdk := mcp.NewServer(s.info, opts)
	sdk.AddReceivingMiddleware(s.sessionMiddleware, s.unknownToolMiddleware, s.toolsListMiddleware)
	if len(cfg.Mounts) > 0 {
		sdk.AddReceivingMiddleware(s.mountsMiddleware)
	}
	sdk.AddSendingMiddleware(keepSentAnswer)
	tools := make(map[string]*entry, len(cfg.Tools))
	for _, t := range cfg.Tools {
		e := s.entry(t)
		tools[e.def.Name] = e
		sdk.AddTool(&e.def, e.call)
	}
	s.tools.Store(&tools)
	s.addSkills(sdk)
	for _, f := range cfg.Configure {
		f(sdk)
	}
	s.sdk = sdk
	return s
}

// entry makes the door's entry of one of the host's tools.
func (s *Server) entry(t Tool) *entry {
	e := &entry{Tool: t}
	def := *t.Def
	if t.Output != nil {
		def.OutputSchema, e.wrap = OutputSchema(t.Output)
	}
	e.call = s.handler(e)
	if schema, ok := def.InputSchema.(json.RawMessage); ok {
		e.headers = mcpwire.SchemaHeaders(schema)
	}
	if e.headers != nil {
		s.mirrored.Store(true)
	}
	e.def = def
	return e
}

// table is the door's tools in force, by name.
func (s *Server) table() map[string]*entry { return *s.tools.Load() }

// SetTools adds tools to the door, or replaces those of their names: the
// tools a host gains or changes while it serves. Calls already made keep
// the entry they found; clients are told by [Server.ToolsChanged].
func (s *Server) SetTools(tools ...Tool) {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	next := maps.Clone(s.table())
	for _, t := range tools {
		e := s.entry(t)
		next[e.def.Name] = e
		s.sdk.AddTool(&e.def, e.call)
	}
	s.tools.Store(&next)
}

// ToolsChanged tells every client that the tools it may call changed
// (notifications/tools/list_changed), so that it lists them again: the
// host's lists say which. It does nothing unless Config.ListChanged.
func (s *Server) ToolsChanged() {
	if !s.cfg.ListChanged {
		return
	}
	for _, e := range s.table() { // the SDK notifies every session when a tool is set again
		s.sdk.AddTool(&e.def, e.call)
		return
	}
}

// OutputSchema returns an output schema as MCP wants it, an object; a
// schema of anything else is wrapped as {"result": …}, its $defs moved to
// the root so that references still resolve.
func OutputSchema(schema json.RawMessage) (json.RawMessage, bool) {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(schema, &s); err == nil && string(s["type"]) == `"object"` {
		return schema, false
	}
	defs := s["$defs"]
	delete(s, "$defs")
	inner, _ := json.Marshal(s)
	wrapped := map[string]any{
		"type":                 "object",
		"properties":           map[string]json.RawMessage{"result": inner},
		"required":             []string{"result"},
		"additionalProperties": false,
	}
	if defs != nil {
		wrapped["$defs"] = defs
	}
	out, _ := json.Marshal(wrapped)
	return out, true
}

// handler is the MCP handler of one tool, as the SDK calls it.
func (s *Server) handler(t *entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.serveCall(ctx, t, req, false, nil)
	}
}

// serveCall answers a call of t. attached reports a ctx that already ends
// when the call's HTTP request does: carmy's own answers on the request's
// goroutine pass it, and need no second cancel context. id is the request
// id as sent, when carmy decoded the request itself.
func (s *Server) serveCall(ctx context.Context, t *entry, req *mcp.CallToolRequest, attached bool, id jsontext.Value) (*mcp.CallToolResult, error) {
	extra := req.GetExtra()
	c := &Call{Tool: t.Def.Name, Params: req.Params, Caller: s.cfg.Stdio, Authenticated: true}
	if extra != nil && (extra.TokenInfo != nil || extra.Header != nil) {
		c.Caller, c.Request, c.Authenticated = httpCaller(extra)
		c.Header = extra.Header
	}
	// The SDK detaches a call from its HTTP request; a client that went
	// away must not leave its tool running, or waiting for its turn.
	if c.Request != nil && !attached {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(c.Request.Context(), cancel)()
	}
	c.Session = c.Caller.Session
	c.Wire = Wire{ID: id, ProtocolVersion: mcpwire.SessionlessProtocol, Transport: "pipe"}
	if c.Request != nil {
		c.Wire.Transport = "tcp"
	}
	if req.Session != nil {
		c.Wire.SessionID = req.Session.ID()
		if init := req.Session.InitializeParams(); init != nil {
			c.Wire.ProtocolVersion = init.ProtocolVersion
		}
		if c.Session == "" {
			c.Session = c.Wire.SessionID
		}
	}
	c.Peer = newPeer(req, &s.cfg)
	res, _, err := s.run(ctx, t, c)
	return res, err
}

// run runs call c of t, with the answers of its earlier rounds, and
// answers it: with the questions of its next round, with its result, or
// (HandsOff) with the task it became.
func (s *Server) run(ctx context.Context, t *entry, c *Call) (*mcp.CallToolResult, *TaskState, error) {
	if err := s.openRounds(ctx, c); err != nil {
		return nil, nil, err
	}
	out, err := s.host.Call(ctx, c)
	if c.Peer.rounds.state != nil {
		c.Peer.rounds.seal(ctx, c.Peer)
	}
	if ask := c.Peer.inputRequired(); ask != nil {
		return ask, nil, nil
	}
	if err != nil {
		return nil, nil, keepMessage(err)
	}
	if out.Task != nil {
		return nil, out.Task, nil
	}
	return s.result(t, out), nil, nil
}

// keepMessage returns err, or for a method-not-found error an error the
// SDK sends as it is: its connection replaces any error whose code is
// method not found with its own message, which names the method
// ("tools/call"), not why the call was refused.
func keepMessage(err error) error {
	var e *jsonrpc.Error
	if errors.As(err, &e) && e.Code == jsonrpc.CodeMethodNotFound {
		return keptMessage{e}
	}
	return err
}

// keptMessage is a method-not-found error that the SDK recognizes by its
// code ([errors.As]) and not as its own (no Unwrap, no Is).
type keptMessage struct{ e *jsonrpc.Error }

func (k keptMessage) Error() string { return k.e.Message }

func (k keptMessage) As(target any) bool {
	if p, ok := target.(**jsonrpc.Error); ok {
		*p = k.e
		return true
	}
	return false
}

// result is the MCP result of a call of t that gave out.
func (s *Server) result(t *entry, out Outcome) *mcp.CallToolResult {
	if out.Err != nil {
		return errorResult(out.Err, t.Output != nil)
	}
	meta := mcp.Meta{"carmy/execution_id": out.ExecutionID, "carmy/replayed": out.Replayed}
	if t.Content {
		return &mcp.CallToolResult{Content: out.Content, Meta: meta}
	}
	var structured any = out.Output
	if t.wrap {
		structured = map[string]json.RawMessage{"result": out.Output}
	}
	if t.Output == nil {
		structured = nil
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: outputText(out.Output)}},
		StructuredContent: structured,
		Meta:              meta,
	}
}

// outputText is an output as an MCP text block shows it: a string is the
// text itself, anything else its JSON.
func outputText(out json.RawMessage) string {
	var s string
	if len(out) > 0 && out[0] == '"' && json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// errorResult is a tool failure as MCP reports it: a result with isError
// set whose text is the error object e as JSON (code, message, field
// paths), so that a model can act on it, and whose _meta carries the same
// object. A tool without an output schema also gets it as structured
// content. A tool with one does not: the official TypeScript SDK's client
// checks structured content against the output schema even on errors
// (typescript-sdk#1943), and would turn carmy's error into a protocol
// error that hides the code and the field paths from the model.
func errorResult(e error, hasOutputSchema bool) *mcp.CallToolResult {
	text, _ := json.Marshal(e)
	res := &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: string(text)}},
		Meta:    mcp.Meta{"carmy/error": e},
	}
	if !hasOutputSchema {
		res.StructuredContent = e
	}
	return res
}

// logger is the host's logger for the MCP SDK, which narrates every
// session at info level: only its warnings and errors get through.
func (s *Server) logger() *slog.Logger {
	l := s.cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(attrs), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}

// identity is the caller of an MCP request: the identity the HTTP
// endpoint authenticated, or over stdio and other single-client
// transports the configured stdio identity.
func (s *Server) identity(extra *mcp.RequestExtra) (Identity, bool) {
	if extra != nil && (extra.TokenInfo != nil || extra.Header != nil) {
		id, _, ok := httpCaller(extra)
		return id, ok
	}
	return s.cfg.Stdio, true
}

// sessionMiddleware records every session initialized over HTTP with the
// principal that initialized it. Sessions over other transports (stdio,
// in-memory) carry no HTTP identity and are not recorded.
func (s *Server) sessionMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		var version string
		if ir, ok := res.(*mcp.InitializeResult); ok {
			version = ir.ProtocolVersion
		}
		withoutTasks(res)
		res = s.withSessionTasks(res)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if id, _, ok := httpCaller(req.GetExtra()); ok && ss != nil && ss.ID() != "" {
			s.cfg.Sessions.Open(ss, id.Principal, version)
		}
		return res, err
	}
}

// unknownToolMiddleware answers a tools/call of a tool that does not exist
// as the SDK does (invalid params), with the message that carmy's other
// transports give: the closest tool name, or the list of tools.
func (s *Server) unknownToolMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil || method != "tools/call" {
			return res, err
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		var rpcErr *jsonrpc.Error
		if !ok || !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
			return res, err
		}
		if _, known := s.table()[p.Name]; known {
			return res, err
		}
		id, _ := s.identity(req.GetExtra())
		return nil, s.host.UnknownTool(ctx, p.Name, id)
	}
}

// toolsListMiddleware leaves out of an MCP tools/list answer the host's
// tools that the caller may not call; tools a host added with Configure
// are its own to guard. The list depends on who asks, so it says
// cacheScope "private" (the SDK says "public" by default): a shared cache
// never gives one caller's list to another.
func (s *Server) toolsListMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcp.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		list.CacheScope = "private"
		id, ok := s.identity(req.GetExtra())
		if !ok {
			list.Tools = []*mcp.Tool{}
			return list, nil
		}
		visible := s.host.Visible(ctx, id)
		kept := make([]*mcp.Tool, 0, len(list.Tools))
		for _, mt := range list.Tools {
			if _, ours := s.table()[mt.Name]; !ours || visible(mt.Name) {
				kept = append(kept, mt)
			}
		}
		list.Tools = kept
		return s.withExecution(list), nil
	}
}
