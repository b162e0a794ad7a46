package carmy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Keys of a tools/call request's _meta that carmy reads. Permissions and
// identity are never read from _meta: they are the host's.
const (
	// MetaRequestID carries the call's request id (its idempotency key).
	MetaRequestID = "carmy/request_id"
)

// identityRef is the header through which the MCP HTTP endpoint hands the
// identity it authenticated to the tool handler: the SDK passes handlers a
// request's headers, not its context. Whatever a client sends in it is
// replaced.
const identityRef = "X-Carmy-Identity-Ref"

// mcpServer builds the registry's MCP server once: every tool, with
// carmy's schemas and explicit annotations, called through Execute.
func (r *Registry) mcpServer() *mcp.Server {
	r.mcpOnce.Do(func() {
		s := mcp.NewServer(&mcp.Implementation{Name: "carmy", Version: Version}, &mcp.ServerOptions{Logger: r.sdkLogger()})
		for _, name := range r.names {
			t := r.tools[name]
			s.AddTool(mcpTool(t), r.mcpCall(t))
		}
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
			IdempotentHint:  ro || m.Idempotent,
		},
		Meta: mcp.Meta{
			"carmy/effect":        m.Effect.String(),
			"carmy/idempotent":    m.Idempotent,
			"carmy/parallel_safe": m.ParallelSafe,
			"carmy/confirmation":  m.Confirmation.String(),
			"carmy/timeout_ms":    m.Timeout.Milliseconds(),
		},
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
		id := r.stdioIdentity
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			v, ok := r.identities.Load(extra.Header.Get(identityRef))
			if !ok {
				return mcpError(Errorf(CodeUnauthenticated, "the request was not authenticated"), t.out != nil), nil
			}
			id = v.(Identity)
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
		if rid, ok := req.Params.Meta[MetaRequestID].(string); ok {
			c.RequestID = rid
		}
		c.Metadata = withMCPTrace(c.Metadata, req)
		res, err := r.Execute(ctx, c)
		if r.elicit && CodeOf(err) == CodeConfirmationRequired && req.Session != nil {
			res, err = r.confirmByElicitation(ctx, req.Session, c, err)
		}
		if err != nil {
			return mcpError(err, t.out != nil), nil
		}
		var structured any = json.RawMessage(res.Output)
		if t.mcpWrap {
			structured = map[string]json.RawMessage{"result": res.Output}
		}
		if t.out == nil {
			structured = nil
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(res.Output)}},
			StructuredContent: structured,
			Meta:              mcp.Meta{"carmy/execution_id": res.ExecutionID, "carmy/replayed": res.Replayed},
		}, nil
	}
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

// confirmByElicitation asks the user, through the client, to confirm a
// call, and runs it with a grant bound to its input when they accept. Only
// a host that opted in with [Builder.ElicitConfirmation] gets here.
func (r *Registry) confirmByElicitation(ctx context.Context, s *mcp.ServerSession, c Call, refusal error) (Result, error) {
	var e *Error
	if !errors.As(refusal, &e) {
		return Result{}, refusal
	}
	grant, _ := e.Details["permission"].(string)
	res, err := s.Elicit(ctx, &mcp.ElicitParams{
		Message: fmt.Sprintf("Allow %s to run with this input?\n%s", c.Tool, c.Input),
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "description": "true to run the tool"}},
			"required":   []string{"confirm"},
		},
	})
	if err != nil || res.Action != "accept" || res.Content["confirm"] != true || grant == "" {
		return Result{}, refusal
	}
	c.Permissions = append(slices.Clip(c.Permissions), grant)
	return r.Execute(ctx, c)
}

// mcpHTTPHandler serves MCP over streamable HTTP, authenticating every
// request before the SDK sees it.
func (r *Registry) mcpHTTPHandler() http.Handler {
	server := r.mcpServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Logger: r.sdkLogger()})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Header.Del(identityRef)
		id, err := r.identify(req)
		if err != nil {
			writeError(w, err)
			return
		}
		var b [16]byte
		_, _ = rand.Read(b[:])
		ref := hex.EncodeToString(b[:])
		r.identities.Store(ref, id)
		defer r.identities.Delete(ref)
		req.Header.Set(identityRef, ref)
		if req.Method == http.MethodGet { // a stream that lasts until the client or the server ends it
			ctx, cancel := context.WithCancel(req.Context())
			defer cancel()
			stop := context.AfterFunc(r.streams, cancel)
			defer stop()
			req = req.WithContext(ctx)
		}
		h.ServeHTTP(w, req)
	})
}

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
