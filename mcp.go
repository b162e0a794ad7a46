package carmy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Keys of a tools/call request's _meta that carmy reads. Permissions and
// identity are never read from _meta: they are the host's.
const (
	// MetaRequestID carries the call's request id (its idempotency key).
	MetaRequestID = "carmy/request_id"
)

// Keys of the auth.TokenInfo that the MCP endpoint hands the SDK with each
// HTTP request, which the SDK passes on to handlers: the identity the
// endpoint authenticated, and the request's context, which ends when the
// client goes away.
const (
	infoIdentity = "carmy/identity"
	infoRequest  = "carmy/request"
)

// mcpServer builds the registry's MCP server once: every tool, with
// carmy's schemas and explicit annotations, called through Execute.
func (r *Registry) mcpServer() *mcp.Server {
	r.mcpOnce.Do(func() {
		opts := &mcp.ServerOptions{
			Logger: r.sdkLogger(),
			// Only what carmy does: its tool list never changes, and tools
			// log through Context.Log. What a host adds with ConfigureMCP
			// adds its own capabilities.
			//lint:ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
		}
		r.mcpConfig.applyOptions(opts)
		s := mcp.NewServer(&mcp.Implementation{Name: "carmy", Version: Version}, opts)
		s.AddReceivingMiddleware(r.sessionMiddleware, r.unknownToolMiddleware, r.toolsListMiddleware)
		s.AddSendingMiddleware(keepSentAnswer)
		for _, name := range r.names {
			t := r.tools[name]
			s.AddTool(mcpTool(t), r.mcpCall(t))
		}
		r.mcpConfig.applyServer(s)
		r.mcp = s
	})
	return r.mcp
}

// mcpTool describes a tool for tools/list. MCP's annotation defaults are
// "destructive" and "open world", so every hint is set explicitly.
func mcpTool(t *tool) *mcp.Tool {
	m := t.meta
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
	if t.out != nil {
		tool.OutputSchema, t.mcpWrap = mcpOutputSchema(m.OutputSchema)
	}
	return tool
}

// mcpOutputSchema returns the output schema as MCP wants it, an object; a
// schema of anything else is wrapped as {"result": …}, its $defs moved to
// the root so that references still resolve.
func mcpOutputSchema(schema json.RawMessage) (json.RawMessage, bool) {
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

// mcpCall is the MCP handler of one tool.
func (r *Registry) mcpCall(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		extra := req.GetExtra()
		id, ok := r.stdioIdentity, true
		var gone context.Context
		if extra != nil && (extra.TokenInfo != nil || extra.Header != nil) {
			id, gone, ok = httpCaller(extra)
		}
		if !ok {
			return mcpError(Errorf(CodeUnauthenticated, "the request was not authenticated"), t.out != nil), nil
		}
		// The SDK detaches a call from its HTTP request; a client that went
		// away must not leave its tool running, or waiting for its turn.
		if gone != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(gone, cancel)()
			if hr := httpRequestOf(gone); hr != nil {
				ctx = withHTTPRequest(ctx, hr) // for the logs and approval URLs
			}
		}
		c := Call{
			Tool:        t.meta.Name,
			Input:       req.Params.Arguments,
			Session:     id.Session,
			Principal:   id.Principal,
			Permissions: id.Permissions,
			Metadata:    id.Metadata,
		}
		if c.Session == "" && req.Session != nil {
			c.Session = req.Session.ID()
		}
		if v, ok := req.Params.Meta[MetaRequestID]; ok {
			rid, ok := v.(string)
			if !ok {
				return mcpError(&Error{
					Code:    CodeInvalidInput,
					Message: "the request id must be a string",
					Fields:  []FieldError{{Path: `_meta["` + MetaRequestID + `"]`, Message: "send the request id as a JSON string"}},
				}, t.out != nil), nil
			}
			c.RequestID = rid
		}
		c.Metadata = withMCPTrace(c.Metadata, req)
		peer := newPeer(req)
		ctx = context.WithValue(ctx, peerKey{}, peer)
		res, err := r.Execute(ctx, c)
		if CodeOf(err) == CodeConfirmationRequired {
			res, err = r.confirmOverMCP(ctx, peer, c, err)
		}
		if ask := peer.inputRequired(); ask != nil {
			return ask, nil
		}
		if err != nil {
			return mcpError(err, t.out != nil), nil
		}
		if t.content {
			return contentResult(res)
		}
		var structured any = json.RawMessage(res.Output)
		if t.mcpWrap {
			structured = map[string]json.RawMessage{"result": res.Output}
		}
		if t.out == nil {
			structured = nil
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: outputText(res.Output)}},
			StructuredContent: structured,
			Meta:              mcp.Meta{"carmy/execution_id": res.ExecutionID, "carmy/replayed": res.Replayed},
		}, nil
	}
}

// httpCaller is the identity the MCP endpoint authenticated for the HTTP
// request a handler serves, and that request's context.
func httpCaller(extra *mcp.RequestExtra) (Identity, context.Context, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return Identity{}, nil, false
	}
	id, ok := extra.TokenInfo.Extra[infoIdentity].(Identity)
	gone, _ := extra.TokenInfo.Extra[infoRequest].(context.Context)
	return id, gone, ok
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

// mcpError is a tool failure as MCP reports it: a result with isError set
// whose text is the error object as JSON (code, message, field paths), so
// that a model can act on it, and whose _meta carries the same object. A
// tool without an output schema also gets it as structured content. A tool
// with one does not: the official TypeScript SDK's client checks
// structured content against the output schema even on errors
// (typescript-sdk#1943), and would turn carmy's error into a protocol error
// that hides the code and the field paths from the model.
func mcpError(err error, hasOutputSchema bool) *mcp.CallToolResult {
	e := publicError(err)
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

// promptInput is an input as a person confirms it: its canonical form (the
// document the confirmation digest is over), indented, with every character
// that could hide or disguise text (controls, bidirectional overrides,
// zero-width and other format characters, line separators) escaped.
func promptInput(form []byte) (string, error) { return approve.Text(form) }

// mcpHTTPHandler serves MCP over streamable HTTP. It authenticates every
// request and checks a message strictly before the SDK sees it, binds
// each session to the principal that opened it, and cancels a call when
// its client goes away.
func (r *Registry) mcpHTTPHandler() http.Handler {
	server := r.mcpServer()
	// Both serve the same server: sessions for the protocol versions that
	// have them, and the stateless path, the only one on which the SDK
	// serves the sessionless protocol.
	stateful, stateless := r.sdkHandler(server, false), r.sdkHandler(server, true)
	// What a host adds to the server (middleware, tools) must see every
	// request: then every request goes through the SDK.
	fast := r.mcpConfig.empty()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, err := r.identify(req)
		if err != nil {
			r.writeAuthError(w, req, err)
			return
		}
		// A body of another type is the SDK's to refuse (415), unread.
		var body []byte
		if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); req.Method == http.MethodPost && mt == "application/json" {
			var status int
			var rpcErr *jsonrpc.Error
			body, status, rpcErr = mcpwire.ReadMessage(http.MaxBytesReader(w, req.Body, r.bodyLimit), r.bodyLimit)
			if rpcErr != nil {
				mcpwire.WriteRPCError(w, status, rpcErr)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		info := &auth.TokenInfo{
			// Prefixed, so that the anonymous principal "" binds too.
			UserID: "principal:" + id.Principal,
			Extra:  map[string]any{infoIdentity: id, infoRequest: withHTTPRequest(req.Context(), req)},
		}
		ctx := context.WithValue(req.Context(), tokenInfoKey{}, info)
		if req.Method == http.MethodGet { // a stream that lasts until the client or the server ends it
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(r.streams, cancel)()
		}
		req = req.WithContext(ctx)
		req.Header.Set("Authorization", "Bearer carmy")
		if mcpwire.IsSessionlessRequest(req, body) {
			if fast && body != nil && r.fastCall(w, req, body) {
				return
			}
			paramsChecked(stateless, body).ServeHTTP(w, req)
			return
		}
		r.serveSession(w, req, id.Principal, r.sessionHandler(paramsChecked(stateful, body), body))
	})
}

// sdkHandler is the SDK's streamable HTTP handler of server, stateless or
// not, behind the checks of mcpHTTPHandler. The identity reaches handlers as
// the SDK's auth.TokenInfo, whose UserID the SDK also binds a session to.
// Its middleware insists on a bearer header, which it gets; the caller's
// own credential has already been checked and goes no further.
func (r *Registry) sdkHandler(server *mcp.Server, stateless bool) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless: stateless,
		Logger:    r.sdkLogger(),
		// Handler checks the Host itself, with the names the host allows,
		// and bounds the body by the builder's limit, on every route.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        -1,
	})
	return auth.RequireBearerToken(func(_ context.Context, _ string, req *http.Request) (*auth.TokenInfo, error) {
		if info, ok := req.Context().Value(tokenInfoKey{}).(*auth.TokenInfo); ok {
			return info, nil
		}
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
}

type tokenInfoKey struct{}

// sdkLogger is the registry's logger for the MCP SDK, which narrates every
// session at info level: only its warnings and errors get through.
func (r *Registry) sdkLogger() *slog.Logger {
	return slog.New(minLevel{r.logger.Handler(), slog.LevelWarn})
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

// unknownToolMiddleware answers a tools/call of a tool that does not exist
// as the SDK does (invalid params), with the message that carmy's other
// transports give: the closest tool name, or the list of tools.
func (r *Registry) unknownToolMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
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
		if _, known := r.tools[p.Name]; known {
			return res, err
		}
		id, _ := r.mcpIdentity(req.GetExtra())
		e := r.unknownTool(ctx, p.Name, id)
		data, _ := jsonv2.Marshal(publicError(e))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: data}
	}
}
