package carmy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/internal/policy"
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
		tools := make([]mcpserve.Tool, len(r.names))
		for i, name := range r.names {
			t := r.tools[name]
			meta := t.meta
			meta.Confirmation = r.confirmationFor(t)
			tools[i] = mcpserve.Tool{Def: mcpTool(meta), Content: t.content, Tasks: t.meta.Tasks.String(), AskFirst: t.askFirst,
				Confirms: r.elicit == formEverywhere && t.meta.Confirmation == ConfirmationRequired}
			if t.out != nil {
				tools[i].Output = t.meta.OutputSchema
			}
		}
		r.mcp = mcpserve.New(mcpserve.Config{
			Host:     mcpDoor{r},
			Tools:    tools,
			Version:  Version,
			Logger:   r.logger,
			Stdio:    mcpserve.Identity(r.stdioIdentity),
			Sessions: r.sessions,
			State: &mcpserve.State{Signer: r.signer, TTL: r.approvals.timeout, Logger: r.logger,
				UseOnce: func(ctx context.Context, principal, tool, nonce string, ttl time.Duration) bool {
					return r.useOnce(ctx, Call{Principal: principal, Tool: tool}, nonce, ttl)
				}},
			FormConfirmation: formConfirmations[r.elicit],
			BodyLimit:        r.bodyLimit,
			Streams:          r.streams,
			Options:          r.mcpConfig.options,
			Configure:        r.mcpConfig.server,
		})
	})
	return r.mcp
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
	return tool
}

// mcpDoor is the registry as the MCP door sees it.
type mcpDoor struct{ r *Registry }

// Authenticate identifies the caller of a request to /mcp with the HTTP
// API's one login check, which writes the refusal.
func (d mcpDoor) Authenticate(w http.ResponseWriter, req *http.Request) (mcpserve.Identity, bool) {
	id, ok := login(d.r.http, w, req, d.r.http.identify)
	return mcpserve.Identity(id), ok
}

// Call runs a tools/call through the registry's pipeline, with the client
// as the tool's peer, and with the person at the client to ask, where the
// client can, to confirm a call that needs it: the pipeline asks them in
// the call's one pass.
func (d mcpDoor) Call(ctx context.Context, mc *mcpserve.Call) (mcpserve.Outcome, error) {
	r := d.r
	t := r.tools[mc.Tool]
	ctx, c, refused := d.callOf(ctx, mc)
	if refused != nil {
		return *refused, nil
	}
	v := via{peer: peerOf(mc.Peer)}
	if r.policies != nil {
		ctx = policy.WithDoor(ctx, "mcp") // tasks it starts keep it
	}
	if t.meta.Confirmation == ConfirmationRequired || r.policies != nil {
		v.asker = mcpAsker{r, mc.Peer} // only then: an interface value costs an allocation
	}
	if t.meta.Tasks == TaskRequired && t.askFirst {
		v.takesTasks = mc.Peer.TakesTasks()
	}
	res, err := r.dispatch(ctx, c, v, nil)
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
	return func(name string) bool { return visible(d.r.tools[name]) }
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

// Defaults of the MCP endpoint's sessions.
const (
	// DefaultSessionTimeout is how long an MCP session may stay idle before
	// the server closes it.
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxSessions is how many MCP sessions one principal may hold
	// open at once.
	DefaultMaxSessions = 64
)

// SessionTimeout sets how long an MCP session over HTTP may stay idle (no
// request of its client in progress, a GET stream counting as one) before
// the server closes it; the client then gets 404 and starts a new session,
// as MCP clients do. The default is [DefaultSessionTimeout].
func (b *Builder) SessionTimeout(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.SessionTimeout(%v) must be positive", d)
		return b
	}
	b.sessionTimeout = d
	return b
}

// MaxSessions sets how many MCP sessions over HTTP one principal may hold
// open at once: opening one more closes that principal's least recently
// used session. The default is [DefaultMaxSessions].
func (b *Builder) MaxSessions(n int) *Builder {
	if n <= 0 {
		b.misuse("Builder.MaxSessions(%d) must be positive", n)
		return b
	}
	b.maxSessions = n
	return b
}

// newSessionTable is the session table of a registry, with the defaults
// for what the builder left unset.
func newSessionTable(timeout time.Duration, max int) *mcpserve.Sessions {
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return mcpserve.NewSessions(timeout, max)
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

// mcpConfig is what the host adds to the MCP server.
type mcpConfig struct {
	options []func(*mcp.ServerOptions)
	server  []func(*mcp.Server)
}

func (c mcpConfig) clone() mcpConfig {
	return mcpConfig{options: slices.Clone(c.options), server: slices.Clone(c.server)}
}
