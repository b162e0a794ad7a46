package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/internal/policy"
	"github.com/carmy-dev/carmy/internal/skills"
	"github.com/carmy-dev/carmy/store"
)

// Keys of a tools/call request's _meta that carmy reads. Permissions and
// identity are never read from _meta: they are the host's.
const (
	// MetaRequestID carries the call's request id (its idempotency key).
	MetaRequestID = "carmy/request_id"
)

// mcpServer builds the registry's MCP door once, with its table of tools
// made from the registry's: the server that [Registry.Handler] serves at
// /mcp and [Registry.ServeMCP] over any transport.
func (r *Registry) mcpServer() *mcpserve.Server {
	r.mcpOnce.Do(func() {
		tab := r.tab()
		ts := make([]*tool, len(tab.names))
		for i, name := range tab.names {
			ts[i] = tab.tools[name]
		}
		cfg := mcpserve.Config{
			Host:     mcpDoor{r},
			Tools:    r.mcpTools(ts),
			Version:  Version,
			Logger:   r.logger,
			Stdio:    mcpserve.Identity(r.stdioIdentity),
			Sessions: r.sessions,
			State: &mcpserve.State{Signer: r.signer, TTL: r.approvals.timeout, Logger: r.logger,
				UseOnce: func(ctx context.Context, principal, tool, nonce string, ttl time.Duration) bool {
					return r.useOnce(ctx, Call{Principal: principal, Tool: tool}, nonce, ttl)
				}},
			FormConfirmation: formConfirmations[r.elicit],
			WaitProgress:     r.tuning.personProgress,
			BodyLimit:        r.bodyLimit,
			Streams:          r.life,
			Options:          r.mcpConfig.options,
			Configure:        r.mcpConfig.server,
			Skills:           r.mcpConfig.skills,
			ListChanged:      len(r.mounts) > 0, // a mount's tools come, change and go
			Mounts:           r.mcpMounts(),
		}
		if r.mcpConfig.skillsOn {
			cfg.Rules = mcpDoor{r}.skillRules
		}
		r.mcp = mcpserve.New(cfg)
	})
	return r.mcp
}

// mcpTools are tools as the MCP door lists and answers them.
func (r *Registry) mcpTools(ts []*tool) []mcpserve.Tool {
	tools := make([]mcpserve.Tool, len(ts))
	for i, t := range ts {
		meta := t.meta
		meta.Confirmation = r.confirmationFor(t)
		tools[i] = mcpserve.Tool{Def: mcpTool(meta), Content: t.content, Tasks: t.meta.Tasks.String(), AskFirst: t.askFirst, HandsOff: t.askFirst && t.def.mount != nil, Deferred: t.meta.Deferred,
			Confirms: r.elicit == formEverywhere && t.meta.Confirmation == ConfirmationRequired}
		if t.out != nil {
			tools[i].Output = t.meta.OutputSchema
		}
	}
	return tools
}

// mcpMounts are the mounts whose resources or prompts the MCP server
// serves, governed by each mount's permissions and audited when read.
func (r *Registry) mcpMounts() []mcpserve.Mount {
	var out []mcpserve.Mount
	for _, m := range r.mounts {
		if m.spec.noResources && m.spec.noPrompts {
			continue
		}
		out = append(out, mcpserve.Mount{Prefix: m.spec.prefix, Client: m.client, Resources: !m.spec.noResources, Prompts: !m.spec.noPrompts,
			May: func(_ context.Context, id mcpserve.Identity) bool { return m.mayRead(Identity(id)) },
			Read: func(ctx context.Context, id mcpserve.Identity, kind, name string, allowed bool) {
				m.auditRead(ctx, Identity(id), kind, name, allowed)
			}})
	}
	return out
}

// formConfirmations are the MCP server's names of where calls are
// confirmed by form.
var formConfirmations = [...]mcpserve.FormConfirmation{
	formSingleClient: mcpserve.FormOnSingle,
	formEverywhere:   mcpserve.FormEverywhere,
	formNever:        mcpserve.FormNever,
}

// mcpTool describes a tool for tools/list. MCP's annotation defaults are
// "destructive" and "open world", so every hint is set explicitly.
func mcpTool(m ToolMetadata) *mcp.Tool {
	ro, destructive, open := m.Effect.ReadOnly(), m.Effect == Destructive, m.Effect == ExternalWrite
	tool := &mcp.Tool{
		Name:        m.Name,
		Description: m.Description,
		InputSchema: json.RawMessage(m.InputSchema),
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    ro,
			DestructiveHint: &destructive,
			OpenWorldHint:   &open,
			IdempotentHint:  m.Idempotent,
		},
		Meta: mcp.Meta{
			"carmy/effect":        m.Effect.String(),
			"carmy/idempotent":    m.Idempotent,
			"carmy/parallel_safe": m.ParallelSafe,
			"carmy/confirmation":  m.Confirmation.String(),
			"carmy/timeout_ms":    m.Timeout.Milliseconds(),
		},
	}
	if len(m.Requires) > 0 {
		tool.Meta["carmy/requires"] = m.Requires
	}
	if m.Deferred {
		tool.Meta["carmy/defer_loading"] = true
	}
	return tool
}

// MCPRequest describes the MCP request that carried a call, for middleware
// that reports it, such as OpenTelemetry's MCP conventions; see
// [Request.MCP].
type MCPRequest struct {
	Method          string          // the JSON-RPC method, "tools/call"; "" for a call that did not come over MCP
	ID              json.RawMessage // the JSON-RPC request id as sent; nil when the MCP SDK decoded the request
	ProtocolVersion string          // the protocol version the request is served under
	SessionID       string          // the MCP session's id; "" without a session
	Transport       string          // "tcp" for streamable HTTP, "pipe" for stdio
}

// MCPSession is an MCP session that ended, as the functions given to
// [Builder.OnMCPSessionEnd] are told of it: from its initialization to
// its end, whatever ended it (its client, its idle timeout, its
// principal's bound of sessions, the host's shutdown).
type MCPSession struct {
	ID              string    // the session's id; "" over stdio
	Principal       string    // who initialized it
	ProtocolVersion string    // the protocol version it was initialized with
	Transport       string    // "tcp" for streamable HTTP, "pipe" for stdio
	Start, End      time.Time // its initialization and its end
}

// MCP describes the MCP request that carried the call; its Method is ""
// for a call that came another way (the HTTP API, Execute, a task's run).
func (req *Request) MCP() MCPRequest { return req.mcp }

// mcpDoor is the registry as the MCP door sees it.
type mcpDoor struct{ r *Registry }

// Authenticate identifies the caller of a request to /mcp with the HTTP
// API's one login check, which writes the refusal.
func (d mcpDoor) Authenticate(w http.ResponseWriter, req *http.Request) (mcpserve.Identity, bool) {
	id, ok := d.r.http.login(w, req)
	return mcpserve.Identity(id), ok
}

// Call runs a tools/call through the registry's pipeline, with the client
// as the tool's peer, and with the person at the client to ask, where the
// client can, to confirm a call that needs it: the pipeline asks them in
// the call's one pass.
func (d mcpDoor) Call(ctx context.Context, mc *mcpserve.Call) (mcpserve.Outcome, error) {
	r := d.r
	t := r.tab().tools[mc.Tool]
	ctx, c, refused := d.callOf(ctx, mc)
	if refused != nil {
		return *refused, nil
	}
	w := &mc.Wire
	v := via{peer: peerOf(mc.Peer), mcp: MCPRequest{Method: "tools/call", ID: json.RawMessage(w.ID), ProtocolVersion: w.ProtocolVersion, SessionID: w.SessionID, Transport: w.Transport}}
	if r.policies != nil {
		ctx = policy.WithDoor(ctx, "mcp") // tasks it starts keep it
	}
	if t.meta.Confirmation == ConfirmationRequired || r.policies != nil {
		v.asker = mcpAsker{r, mc.Peer} // only then: an interface value costs an allocation
	}
	if t.meta.Tasks == TaskRequired && t.askFirst {
		v.takesTasks = mc.Peer.TakesTasks()
		if st := d.handedOffBefore(ctx, t, c, v); st != nil {
			return mcpserve.Outcome{Task: st}, nil
		}
	}
	res, err := r.dispatch(ctx, c, v, nil)
	if h := handedOff(err); h != nil {
		// The upstream made its task: the caller gets carmy's, which
		// reads it.
		st, out := d.startTask(ctx, mc, h)
		out.Task = st
		return out, nil
	}
	if rpcErr, ok := missingCapability(mc.Peer, err); ok {
		return mcpserve.Outcome{}, rpcErr
	}
	if rpcErr, ok := taskRequired(mc.Peer, mc.Tool, err); ok {
		return mcpserve.Outcome{}, rpcErr
	}
	if err != nil {
		return mcpOutcome(err), nil
	}
	return d.outcome(t, res)
}

// handedOffBefore is the caller's task of t that an earlier call with
// c's request id and input became (a mounted tool's first call handed
// off), nil for none: a retry of that call gets the task at once, as the
// retry of any call that started a task does, rather than waiting for it
// to end. The caller's tasks are read newest first, within the store's
// bound of tasks a principal keeps.
func (d mcpDoor) handedOffBefore(ctx context.Context, t *tool, c Call, v via) *mcpserve.TaskState {
	if t.def.mount == nil || !v.takesTasks || c.RequestID == "" {
		return nil
	}
	form, err := t.canonicalInput(c.Input)
	if err != nil {
		return nil
	}
	digest := t.digestOf(form)
	for before := ""; ; {
		page, err := d.r.tasks.store.ListTasks(ctx, c.Principal, before, 100)
		if err != nil || len(page) == 0 {
			return nil
		}
		for _, rec := range page {
			if rec.Tool == t.meta.Name && rec.RequestID == c.RequestID && rec.Digest == digest {
				return d.taskState(ctx, rec)
			}
		}
		before = page[len(page)-1].ID
	}
}

// outcome is the outcome of a call of t that gave res.
func (d mcpDoor) outcome(t *tool, res Result) (mcpserve.Outcome, error) {
	out := mcpserve.Outcome{Output: res.Output, ExecutionID: res.ExecutionID, Replayed: res.Replayed}
	if t.content {
		var err error
		if out.Content, err = contentBlocks(res.Output); err != nil {
			return mcpserve.Outcome{}, err
		}
	}
	return out, nil
}

// callOf is the call of a tools/call, and its context; or the outcome of a
// call refused before it is one (unauthenticated, a request id that is
// not a string).
func (d mcpDoor) callOf(ctx context.Context, mc *mcpserve.Call) (context.Context, Call, *mcpserve.Outcome) {
	refuse := func(err error) (context.Context, Call, *mcpserve.Outcome) {
		out := mcpOutcome(err)
		return ctx, Call{}, &out
	}
	if !mc.Authenticated {
		return refuse(Errorf(CodeUnauthenticated, "the request was not authenticated"))
	}
	if mc.Request != nil {
		ctx = withHTTPRequest(ctx, mc.Request) // for the logs and approval URLs
	}
	id := mc.Caller
	c := Call{
		Tool:        mc.Tool,
		Input:       mc.Params.Arguments,
		Session:     mc.Session,
		Principal:   id.Principal,
		Permissions: id.Permissions,
		Metadata:    id.Metadata,
	}
	if v, ok := mc.Params.Meta[MetaRequestID]; ok {
		rid, ok := v.(string)
		if !ok {
			return refuse(&Error{
				Code:    CodeInvalidInput,
				Message: "the request id must be a string",
				Fields:  []FieldError{{Path: `_meta["` + MetaRequestID + `"]`, Message: "send the request id as a JSON string"}},
			})
		}
		c.RequestID = rid
	}
	c.Metadata = withMCPTrace(c.Metadata, mc.Params.Meta, mc.Header)
	return ctx, c, nil
}

// mcpOutcome is the outcome of a call that err refused or failed.
func mcpOutcome(err error) mcpserve.Outcome { return mcpserve.Outcome{Err: publicError(err)} }

// Visible tells which tools id may see in tools/list.
func (d mcpDoor) Visible(ctx context.Context, id mcpserve.Identity) func(string) bool {
	if d.r.policies != nil {
		ctx = policy.WithDoor(ctx, "mcp")
	}
	visible := d.r.visibility(ctx, Identity(id))
	return func(name string) bool { return visible(d.r.tab().tools[name]) }
}

// UnknownTool answers a call of a tool that does not exist as the SDK does
// (invalid params), with the message that carmy's other transports give.
func (d mcpDoor) UnknownTool(ctx context.Context, name string, id mcpserve.Identity) *jsonrpc.Error {
	e := d.r.unknownTool(ctx, name, Identity(id))
	data, _ := jsonv2.Marshal(publicError(e))
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: data}
}

// contentBlocks is the output of a tool whose output is [Content] as MCP
// content blocks.
func contentBlocks(output json.RawMessage) ([]mcp.Content, error) {
	var c Content
	if err := c.UnmarshalJSON(output); err != nil {
		return nil, err
	}
	blocks := make([]mcp.Content, len(c))
	for i, b := range c {
		blocks[i] = mcpBlock(b)
	}
	return blocks, nil
}

// mcpBlock is a block as the SDK writes it.
func mcpBlock(b Block) mcp.Content {
	switch b := b.(type) {
	case Text:
		return &mcp.TextContent{Text: b.Text}
	case Image:
		return &mcp.ImageContent{Data: b.Data, MIMEType: b.MIMEType}
	case Audio:
		return &mcp.AudioContent{Data: b.Data, MIMEType: b.MIMEType}
	case ResourceLink:
		l := &mcp.ResourceLink{URI: b.URI, Name: b.Name, Title: b.Title, Description: b.Description, MIMEType: b.MIMEType}
		if b.Size > 0 {
			l.Size = &b.Size
		}
		return l
	case Resource:
		return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: b.URI, MIMEType: b.MIMEType, Text: b.Text, Blob: b.Blob}}
	}
	return nil // Block's method is unexported: no other type implements it
}

// newSessionTable is the session table of a registry, with the defaults
// for what the builder left unset, which tells ended of each session that
// ends.
func newSessionTable(timeout time.Duration, max int, ended []func(MCPSession)) *mcpserve.Sessions {
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	var tell func(mcpserve.SessionSpan)
	if len(ended) > 0 {
		tell = func(s mcpserve.SessionSpan) {
			m := MCPSession(s)
			for _, f := range ended {
				f(m)
			}
		}
	}
	return mcpserve.NewSessions(timeout, max, tell)
}

// ConfigureMCP lets the host add to the MCP server that carmy builds, the
// one that [Registry.Handler] serves at /mcp (to clients of every
// protocol version) and [Registry.ServeStdio] over streams: resources,
// resource templates, prompts and middleware, with the official SDK's own
// API (github.com/modelcontextprotocol/go-sdk/mcp). carmy does not
// re-implement them. configure runs once, when the server is first
// needed, after carmy's tools are added; calls accumulate, in order.
//
//	b.ConfigureMCP(func(s *mcp.Server) {
//		s.AddResource(&mcp.Resource{URI: "docs://readme", Name: "readme", MIMEType: "text/markdown"}, readReadme)
//		s.AddPrompt(&mcp.Prompt{Name: "summarize"}, summarizePrompt)
//	})
//
// Tools added here are the SDK's, outside carmy's runtime: no validation,
// confirmation, idempotency or middleware of carmy's applies to them.
func (b *Builder) ConfigureMCP(configure func(*mcp.Server)) *Builder {
	if configure == nil {
		b.misuse("Builder.ConfigureMCP(nil)")
		return b
	}
	b.mcpConfig.server = append(b.mcpConfig.server, configure)
	return b
}

// ConfigureMCPOptions lets the host set what the official SDK takes only
// when a server is made, in [mcp.ServerOptions]: the completion handler
// (completion/complete), the resource subscription handlers, the
// instructions. configure gets the options carmy chose (its logger, and
// capabilities that advertise only what carmy does; the SDK adds those of
// what the host configures) and may change them. Calls accumulate, in
// order.
func (b *Builder) ConfigureMCPOptions(configure func(*mcp.ServerOptions)) *Builder {
	if configure == nil {
		b.misuse("Builder.ConfigureMCPOptions(nil)")
		return b
	}
	b.mcpConfig.options = append(b.mcpConfig.options, configure)
	return b
}

// mcpConfig is what the host adds to the MCP server: the SDK's additions,
// and the skills of [Builder.Skills], read at Build.
type mcpConfig struct {
	options  []func(*mcp.ServerOptions)
	server   []func(*mcp.Server)
	skillsOn bool
	skillsFS fs.FS
	skills   []*skills.Skill
}

func (c mcpConfig) clone() mcpConfig {
	c.options, c.server = slices.Clone(c.options), slices.Clone(c.server)
	return c
}

// loadSkills reads the skills folder, when there is one, and returns its
// problems, each naming its file.
func (c *mcpConfig) loadSkills() []error {
	if c.skillsFS == nil {
		return nil
	}
	loaded, problems := skills.Load(c.skillsFS)
	errs := make([]error, 0, len(problems))
	for _, p := range problems {
		var e *skills.Error
		if errors.As(p, &e) {
			errs = append(errs, &BuildError{Site: e.File, Err: fmt.Errorf("skills folder: %w", e.Err)})
			continue
		}
		errs = append(errs, &BuildError{Err: fmt.Errorf("skills folder: %w", p)})
	}
	for _, s := range loaded {
		if s.Path == skills.RulesPath {
			errs = append(errs, &BuildError{Site: s.Path + "/" + skills.Manifest, Err: errors.New("skills folder: this is where carmy serves its generated skill of the server's rules: move the skill")})
		}
	}
	c.skills = loaded
	return errs
}

// skillRules are the rules of the generated skill for id: the tools id
// may list, with what each asks of a caller.
func (d mcpDoor) skillRules(ctx context.Context, id mcpserve.Identity) skills.Rules {
	r := d.r
	visible := r.visibility(ctx, Identity(id))
	rules := skills.Rules{RequestIDMeta: MetaRequestID, ApprovalTimeout: r.approvals.timeout}
	tab := r.tab()
	for _, name := range tab.names {
		t := tab.tools[name]
		if !visible(t) {
			continue
		}
		st := skills.Tool{Name: name, Effect: t.meta.Effect.String(), Idempotent: t.meta.Idempotent, Confirmation: r.confirmationFor(t).String(),
			Tasks: t.meta.Tasks.String(), MaxInFlight: t.maxInFlight, Timeout: t.meta.Timeout}
		if t.rate.Calls > 0 {
			st.Rate = describeRate(t.rate)
		}
		rules.Tools = append(rules.Tools, st)
	}
	return rules
}

// mcpAsker asks the person at an MCP client to confirm a call in-band
// (a [personAsker]), and translates the door's answer into carmy's
// (verdicts); the confirmation stage acts on it (answered). Where form
// confirmation applies (by default over a single-client transport;
// everywhere with [Builder.ElicitConfirmation], nowhere with
// [Builder.NoFormConfirmation]) a client that can show its user a form is
// asked to confirm with one that shows the call's canonical input.
// Otherwise a client that supports URL elicitation is sent the approval's
// page: once the user opened it, the call waits for a person's decision
// there (until the approval expires or the client gives up). Over a
// single-client transport that page is a console that carmy serves on a
// loopback port, and its URL carries a one-time code for that console's
// secret, for the person at the client; a refusal that stands there names
// what the person can use (standing).
//
// In the sessionless protocol the question goes back in the round's
// result, and the answer counts in the next round of the same call; a
// confirmation given holds, once each, for the rounds that the tool's own
// questions add, until the approval would have expired (confirmedBefore).
type mcpAsker struct {
	r *Registry
	p *mcpserve.Peer
}

// verdicts are carmy's words for the MCP door's answers: the table the
// adapter translates by, deciding nothing.
var verdicts = [...]verdict{
	mcpserve.NotAsked:  unsupported,
	mcpserve.Asking:    nextRound,
	mcpserve.Dismissed: unanswered,
	mcpserve.Confirmed: accepted,
	mcpserve.Declined:  declined,
	mcpserve.Broken:    broken,
	mcpserve.Failed:    failed,
	mcpserve.Opened:    unanswered, // until a person decides on the page (awaitPerson)
}

func (m mcpAsker) ask(ctx context.Context, q personQuestion) personAnswer {
	r, p := m.r, m.p
	c := mcpserve.Confirmation{Tool: q.tool, Approval: q.pending.ID, Form: p.ConfirmsByForm(), Input: q.input, URL: q.pending.URL}
	if !c.Form && p.Single() {
		c.URL = r.personalApprovalURL(ctx, c.Approval, c.URL)
	}
	defer p.KeepWaiting(ctx, "waiting for a person to decide on this call of "+q.tool)()
	got, err := p.Confirm(ctx, c)
	ans := personAnswer{verdict: verdicts[got], err: err}
	switch got {
	case mcpserve.Broken:
		var bad *mcpserve.BadAnswer
		errors.As(err, &bad)
		ans.field = FieldError{Path: bad.Field, Message: bad.Message}
	case mcpserve.Opened:
		// The person decides on the page the client opened.
		if ans = r.awaitPerson(ctx, c.Approval); ans.verdict == decided {
			p.ElicitationComplete(ctx, c.Approval)
		}
	}
	return ans
}

// accepted carries the person's confirmation to the next rounds of the
// call, in the sessionless protocol.
func (m mcpAsker) accepted(ctx context.Context, q personQuestion, a store.Approval) {
	m.p.Confirmed(ctx, q.pending.Digest, a.ID, time.Now().Add(m.r.approvals.timeout))
}

// standing is the refusal that stands: over a single-client transport,
// one that names what exists for the person there (the loopback console,
// opened for them, and `carmy approvals`), and says whether they were
// asked; else q's refusal, as it is without a console.
func (m mcpAsker) standing(ctx context.Context, q personQuestion, asked bool) error {
	if !m.p.Single() {
		return q.refusal
	}
	base, _, err := m.r.http.localConsole(ctx)
	if err != nil {
		return q.refusal
	}
	e, pending := q.refusal, q.pending
	w := mcpserve.PersonWaits{Tool: pending.Tool, Approval: pending.ID, Console: base + "/console", Expires: pending.Expires.UTC().Format(time.RFC3339),
		Permission: pending.Permission, ToolPermission: fmt.Sprint(e.Details["tool_permission"]), Asked: asked}
	details := maps.Clone(e.Details)
	details["console"], details["host_help"] = w.Console, w.HostHelp()
	out := *e
	out.Message, out.Details = w.Message(), details
	return &out
}

// confirmedBefore returns the approval of a confirmation that the server
// gave, in an earlier round of the sessionless protocol, this principal
// for this tool and input, when the call carries its state, not expired
// and not used before; it uses that state up, and hands the next round a
// new one.
func (m mcpAsker) confirmedBefore(ctx context.Context, digest string) (string, bool) {
	if !m.p.Sessionless() || !m.p.ConfirmsByForm() {
		return "", false
	}
	return m.p.ConfirmedBefore(ctx, digest)
}

// waitsForRound reports the error of a question that waits for the
// client's next round of the sessionless protocol.
func waitsForRound(err error) bool { return errors.Is(err, mcpserve.ErrNeedsInput) }

// needsInput is the error that ends a run of a tool whose question the
// client of the sessionless protocol has not answered yet, as the tool and
// the runtime see it: retryable, so that an idempotency record never keeps
// it. The client gets the question and calls again with the answer, and
// the tool runs again from the start.
func needsInput() *Error {
	return &Error{
		Code:      CodeUnavailable,
		Message:   "the tool needs an answer from the user first; the client asks them and calls again with the answer",
		Retryable: true,
		Err:       mcpserve.ErrNeedsInput,
	}
}

// ServeMCP serves MCP over any transport of the official SDK
// (github.com/modelcontextprotocol/go-sdk/mcp): the registry's MCP server,
// the one that [Registry.Handler] serves at /mcp and [Registry.ServeStdio]
// over streams, connected to t. It serves one session, with the identity
// of a stdio client (the builder's stdio identity, if any), until ctx is
// done or the client closes the connection; it returns nil then.
//
// An in-memory pair (mcp.NewInMemoryTransports) connects a client in the
// same process, for tests and benchmarks:
//
//	serverT, clientT := mcp.NewInMemoryTransports()
//	go reg.ServeMCP(ctx, serverT)
//	session, err := mcp.NewClient(impl, nil).Connect(ctx, clientT, nil)
func (r *Registry) ServeMCP(ctx context.Context, t mcp.Transport) error {
	return r.mcpServer().Serve(ctx, t)
}

// withMCPTrace is withTrace for a tools/call request: the trace context
// comes from its _meta, else from the headers of the HTTP request that
// carried it (nil over other transports).
func withMCPTrace(md map[string]string, meta mcp.Meta, header http.Header) map[string]string {
	if p, ok := meta[MetaTraceparent].(string); ok {
		s, _ := meta[MetaTracestate].(string)
		return withTrace(md, p, s)
	}
	if header != nil {
		return withTrace(md, header.Get(MetaTraceparent), header.Get(MetaTracestate))
	}
	return md
}

// mcpPeer is an MCP client as the runtime sees it (a [taskPeer]): the
// door's answers (a client that cannot elicit, a question that waits for
// the next round of the sessionless protocol) are made here, as the
// errors the tool returns.
type mcpPeer struct{ *mcpserve.Peer } // one pointer: held in an interface without an allocation

// peerOf is client p as the runtime holds it: nil for none, never an
// interface holding a nil pointer.
func peerOf(p *mcpserve.Peer) taskPeer {
	if p == nil {
		return nil
	}
	return mcpPeer{p}
}

func (p mcpPeer) elicitable() error {
	if !p.CanElicit() {
		return &Error{Code: CodeUnavailable, Message: "the client cannot ask its user for input: it did not declare elicitation",
			Err: &mcpserve.MissingCapability{Capability: "elicitation"}}
	}
	return nil
}

// Elicit asks the client's user; a request that waits for the answer
// keeps the client waiting with progress (KeepWaiting).
func (p mcpPeer) Elicit(ctx context.Context, name string, q question) (answer, error) {
	if !p.Sessionless() {
		defer p.KeepWaiting(ctx, "waiting for the user's answer to a question of the tool")()
	}
	res, err := p.Peer.Elicit(ctx, name, &mcp.ElicitParams{Message: q.Message, RequestedSchema: q.Form, Mode: q.Mode, URL: q.URL, ElicitationID: q.ElicitationID})
	if errors.Is(err, mcpserve.ErrNeedsInput) {
		return answer{}, needsInput()
	}
	if err != nil {
		return answer{}, err
	}
	return answer{Action: res.Action, Content: res.Content}, nil
}

// Deliver hands the task's questions their answers.
func (p mcpPeer) Deliver(answers map[string]answer) {
	out := make(map[string]*mcp.ElicitResult, len(answers))
	for q, a := range answers {
		out[q] = &mcp.ElicitResult{Action: a.Action, Content: a.Content, Meta: a.Meta}
	}
	p.Peer.Deliver(out)
}

// inboxOf makes the peer of a task of no MCP client (over HTTP, in Go),
// started with ctx: its tool's questions wait on the task, kept in the
// store for any host to show and answer.
func inboxOf(ctx context.Context) func(*taskRun) taskPeer {
	return func(run *taskRun) taskPeer {
		return peerOf(mcpserve.InboxPeer(asking(ctx, run)))
	}
}

// asking tells run the questions its tool waits for (nil for none), as the
// task keeps them: the inputRequests of MCP's tasks, by question id.
func asking(ctx context.Context, run *taskRun) func(mcp.InputRequestMap) {
	return func(questions mcp.InputRequestMap) {
		if questions == nil {
			run.asking(ctx, nil)
			return
		}
		b := []byte("{}")
		if len(questions) > 0 {
			var err error
			if b, err = json.Marshal(questions); err != nil {
				run.r.logger.Warn("carmy: cannot record a task's questions", "task_id", run.id, "error", err)
				b = []byte("{}")
			}
		}
		run.asking(ctx, b)
	}
}

// capabilityMissing is the error of a question for a client capability
// the client did not declare, which [missingCapability] answers.
func capabilityMissing(capability string) error {
	return &mcpserve.MissingCapability{Capability: capability}
}

// missingCapability is the protocol error of a sessionless call that ended
// with a question its client cannot answer, if err is one.
func missingCapability(p *mcpserve.Peer, err error) (*jsonrpc.Error, bool) {
	var m *mcpserve.MissingCapability
	if !p.Sessionless() || !errors.As(err, &m) {
		return nil, false
	}
	return m.RPCError(), true
}

// Over MCP (the tasks extension of the sessionless protocol), a call of a
// tool that supports tasks, from a client that declared the extension, is
// answered at once with its task, which the client reads (tasks/get, the
// result inlined once it ended), answers (tasks/update) and cancels
// (tasks/cancel). A tool's failure is a completed task whose result is an
// error, as a call's is; a failed task is one that ran into a failure of
// the server's (a panic, a host lost). A question the tool asks with
// Context.Elicit makes the task input_required until tasks/update answers
// it; so does a pending approval, until a person decides.

// reasonTaskRequired is the reason of the refusal of a synchronous call of
// a tool that runs only as a task, which MCP answers with its own error.
const reasonTaskRequired = "task_required"

// taskRequired is the protocol error of a synchronous call that err
// refused because its tool runs only as a task, if it is one: in a
// session, whose tasks are asked for with params.task, method not found.
func taskRequired(p *mcpserve.Peer, tool string, err error) (*jsonrpc.Error, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Details["reason"] != reasonTaskRequired {
		return nil, false
	}
	if !p.Sessionless() {
		return mcpserve.SessionTaskSupportError(tool, true), true
	}
	return mcpserve.TaskRequiredError(tool), true
}

// StartTask starts the call of mc as a task: its checks run first, as
// [Registry.Start]'s do, and a call they refuse is answered as a call.
func (d mcpDoor) StartTask(ctx context.Context, mc *mcpserve.Call) (*mcpserve.TaskState, mcpserve.Outcome, error) {
	st, out := d.startTask(ctx, mc, nil)
	return st, out, nil
}

// startTask is StartTask, for a call handed off with the upstream's task
// it adopts.
func (d mcpDoor) startTask(ctx context.Context, mc *mcpserve.Call, adopt *handOff) (*mcpserve.TaskState, mcpserve.Outcome) {
	r := d.r
	t := r.tab().tools[mc.Tool]
	ctx, c, refused := d.callOf(ctx, mc)
	if refused != nil {
		if adopt != nil {
			adopt.abandon(ctx)
		}
		return nil, *refused
	}
	task, err := r.startTaskFor(ctx, t, c, func(run *taskRun) taskPeer {
		return peerOf(mcpserve.TaskPeer(mc.Peer, run.id, asking(ctx, run)))
	}, adopt)
	if err != nil {
		return nil, mcpOutcome(err)
	}
	return d.taskState(ctx, task.rec), mcpserve.Outcome{}
}

// GetTask reads id's task.
func (d mcpDoor) GetTask(ctx context.Context, id mcpserve.Identity, task string) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	if CodeOf(err) == CodeNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if req := mcpserve.RequestOf(ctx); req != nil {
		ctx = withHTTPRequest(ctx, req) // for the approval's link
	}
	return d.taskState(ctx, rec), true, nil
}

// UpdateTask hands id's task the answers to its questions, on any host:
// they reach the host that runs the task through the store.
func (d mcpDoor) UpdateTask(ctx context.Context, id mcpserve.Identity, task string, answers map[string]*mcp.ElicitResult) (bool, error) {
	raw := make(map[string]json.RawMessage, len(answers))
	for q, a := range answers {
		if a == nil {
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			return false, err
		}
		raw[q] = b
	}
	err := d.r.answerTask(ctx, task, id.Principal, raw)
	if CodeOf(err) == CodeNotFound {
		return false, nil
	}
	return err == nil, err
}

// CancelTask asks id's task to stop; one that ended is left as it is.
func (d mcpDoor) CancelTask(ctx context.Context, id mcpserve.Identity, task string) (bool, error) {
	_, err := d.r.cancelTask(ctx, task, id.Principal)
	switch CodeOf(err) {
	case "", CodeConflict: // a final task: nothing to cancel, which the protocol acknowledges all the same
		return true, nil
	case CodeNotFound:
		return false, nil
	}
	return false, err
}

// taskState is a task as the MCP door answers for it.
func (d mcpDoor) taskState(ctx context.Context, rec store.Task) *mcpserve.TaskState {
	r := d.r
	st := &mcpserve.TaskState{ID: rec.ID, Tool: rec.Tool, Status: string(rec.Status), Created: rec.Created, Updated: rec.Updated, TTL: rec.TTL, Version: rec.Version}
	t, known := r.tab().tools[rec.Tool]
	switch rec.Status {
	case store.TaskCompleted:
		if rec.Output == nil {
			break // a list's summary: the outcome comes with the task alone
		}
		res, _ := taskOutcome(rec)
		out, err := mcpserve.Outcome{Output: res.Output, ExecutionID: res.ExecutionID}, error(nil)
		if known {
			out, err = d.outcome(t, res)
		}
		if err != nil {
			st.Status, st.Error = string(store.TaskFailed), &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's output cannot be read"}
			break
		}
		st.Outcome = &out
	case store.TaskFailed:
		e := taskError(rec)
		st.Message = e.Message
		if !serverFailure(rec, e) {
			// The tool failed: a result, as a call's failure is.
			st.Status, st.Outcome = string(store.TaskCompleted), &mcpserve.Outcome{Err: e}
			break
		}
		data, _ := jsonv2.Marshal(e)
		st.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: e.Message, Data: data}
	case store.TaskCancelled:
		st.Message = "the task was cancelled"
	case store.TaskInputRequired:
		if len(rec.Questions) > 2 { // more than {}
			var q mcp.InputRequestMap
			if err := json.Unmarshal(rec.Questions, &q); err == nil && len(q) > 0 {
				st.Questions = q
			}
		}
		if rec.ApprovalID != "" {
			u := r.approvalURL(ctx, rec.ApprovalID)
			if u == "" {
				// The loopback console's page, if it serves.
				st.Message = mcpserve.TaskWaits(rec.ApprovalID, r.http.loopbackLink(rec.ApprovalID))
			} else {
				st.Message = mcpserve.TaskWaits(rec.ApprovalID, "")
				if st.Questions == nil {
					st.Questions = mcp.InputRequestMap{}
				}
				st.Questions["approval"] = &mcp.ElicitParams{Mode: "url", URL: u, ElicitationID: rec.ApprovalID,
					Message: "A person must approve this call of " + rec.Tool + " before it runs: open the link to decide."}
			}
		}
	}
	return st
}

// In a session (2025-11-25), MCP's tasks are experimental and take their
// own methods: a tools/call with params.task answers with the task,
// tasks/get reads it, tasks/result waits for its end and answers the
// call's result, tasks/list pages the caller's tasks and tasks/cancel
// stops one. A question the tool asks goes to the session as an
// elicitation, and the task is input_required until it is answered, as it
// is while its approval waits for a person.

// ListTasks returns a page of id's tasks, newest first, after the task
// whose id is cursor; an id that is none of the caller's tasks is no
// cursor.
func (d mcpDoor) ListTasks(ctx context.Context, id mcpserve.Identity, cursor string, limit int) ([]*mcpserve.TaskState, string, error) {
	if cursor != "" {
		if _, err := d.r.readTask(ctx, cursor, id.Principal); CodeOf(err) == CodeNotFound {
			return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: cursor " + cursor + " is not one this server gave"}
		} else if err != nil {
			return nil, "", err
		}
	}
	page, err := d.r.tasks.store.ListTasks(ctx, id.Principal, cursor, limit+1)
	if err != nil {
		return nil, "", d.r.taskStoreError(ctx, err)
	}
	next := ""
	if len(page) > limit {
		page, next = page[:limit], page[limit-1].ID
	}
	out := make([]*mcpserve.TaskState, len(page))
	for i, rec := range page {
		out[i] = d.taskState(ctx, rec)
	}
	return out, next, nil
}

// WaitTask waits for id's task to end, or for ctx.
func (d mcpDoor) WaitTask(ctx context.Context, id mcpserve.Identity, task string) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	for err == nil && !rec.Status.Final() {
		rec, err = d.r.awaitTask(ctx, rec)
	}
	return d.awaited(ctx, rec, err)
}

// AwaitTask returns id's task once it changed from its version, or ctx's
// error.
func (d mcpDoor) AwaitTask(ctx context.Context, id mcpserve.Identity, task string, version int64) (*mcpserve.TaskState, bool, error) {
	rec, err := d.r.readTask(ctx, task, id.Principal)
	if err == nil && rec.Version == version && !rec.Status.Final() {
		rec, err = d.r.awaitTask(ctx, rec)
	}
	return d.awaited(ctx, rec, err)
}

// awaited is the door's answer for a task read or awaited: its state, not
// found, or the error.
func (d mcpDoor) awaited(ctx context.Context, rec store.Task, err error) (*mcpserve.TaskState, bool, error) {
	switch CodeOf(err) {
	case "":
		return d.taskState(ctx, rec), true, nil
	case CodeNotFound:
		return nil, false, nil
	}
	return nil, false, err
}

var _ mcpserve.SessionTasks = mcpDoor{}
