package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpclient"
	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Mount is a mounted upstream whose resources and prompts the server
// serves beside the host's own: resources under their upstream URIs,
// prompts as <prefix>_<name>. The host decides who may see and read them.
type Mount struct {
	Prefix             string
	Client             *mcpclient.Client
	Resources, Prompts bool
	// May reports whether id may list and read the mount's resources and
	// prompts.
	May func(ctx context.Context, id Identity) bool
	// Read is told of each read of a resource (kind "resource", its URI)
	// or prompt (kind "prompt", its served name) before it is forwarded,
	// and of its refusal (allowed false): the host audits them.
	Read func(ctx context.Context, id Identity, kind, name string, allowed bool)
}

// resourceNotFound is the code of a read of a resource that does not
// exist (SEP-2164: invalid params).
const resourceNotFound = jsonrpc.CodeInvalidParams

// mounts is what the server forwards to its mounts.
type mounts struct {
	mu   sync.Mutex
	subs map[string]int // subscriptions of callers, by URI
	// resourcesChange and promptsChange: some mount's upstream says when
	// its resources or prompts change, and the server tells its clients.
	resourcesChange, promptsChange bool
}

// mountCapabilities declares what the mounts bring to the server. Their
// lists are declared to change (listChanged) only where an upstream says
// when its own change: carmy tells its clients then.
func (s *Server) mountCapabilities(opts *mcp.ServerOptions) {
	for _, m := range s.cfg.Mounts {
		up := m.Client.Serves()
		if m.Resources && up.Resources {
			if opts.Capabilities.Resources == nil {
				opts.Capabilities.Resources = &mcp.ResourceCapabilities{}
			}
			if up.ResourcesChange {
				opts.Capabilities.Resources.ListChanged, s.mounts.resourcesChange = true, true
			}
			if up.Subscribe && opts.SubscribeHandler == nil {
				opts.Capabilities.Resources.Subscribe = true
				opts.SubscribeHandler, opts.UnsubscribeHandler = s.subscribe, s.unsubscribe
			}
		}
		if m.Prompts && up.Prompts {
			if opts.Capabilities.Prompts == nil {
				opts.Capabilities.Prompts = &mcp.PromptCapabilities{}
			}
			if up.PromptsChange {
				opts.Capabilities.Prompts.ListChanged, s.mounts.promptsChange = true, true
			}
		}
		if (m.Prompts && up.Prompts || m.Resources && up.Resources) && up.Completions && opts.CompletionHandler == nil {
			opts.Capabilities.Completions = &mcp.CompletionCapabilities{}
			opts.CompletionHandler = s.complete
		}
	}
}

// ResourceUpdated tells the callers subscribed to uri that it changed.
func (s *Server) ResourceUpdated(uri string) {
	_ = s.sdk.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// changeMark names the placeholder by which the server has the SDK tell
// its clients that a mount's list changed: the SDK tells every session,
// and every listen stream of the sessionless protocol that asked, when
// its own list changes, and the mounts' lists are not its own. Lists
// leave the placeholder out.
const changeMark = "carmy-list-changed:///"

// ResourcesChanged tells every client that the resources it may list
// changed (notifications/resources/list_changed), when the server
// declared that they may.
func (s *Server) ResourcesChanged() {
	if !s.mounts.resourcesChange {
		return
	}
	s.sdk.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: changeMark, Name: changeMark},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		})
	s.sdk.RemoveResourceTemplates(changeMark)
}

// PromptsChanged tells every client that the prompts it may list changed
// (notifications/prompts/list_changed), when the server declared that
// they may.
func (s *Server) PromptsChanged() {
	if !s.mounts.promptsChange {
		return
	}
	s.sdk.AddPrompt(&mcp.Prompt{Name: changeMark}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt " + changeMark}
	})
	s.sdk.RemovePrompts(changeMark)
}

// mountsMiddleware answers the lists, reads and gets that concern the
// mounts: what the host serves itself first, then the mounts' that the
// caller may see.
func (s *Server) mountsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list", "resources/templates/list", "prompts/list", "resources/read", "prompts/get":
		default:
			return next(ctx, method, req)
		}
		id, ok := s.identity(req.GetExtra())
		if !ok {
			return next(ctx, method, req)
		}
		switch method {
		case "prompts/get":
			p := req.GetParams().(*mcp.GetPromptParams)
			if m, name := s.promptMount(p.Name); m != nil {
				if !m.May(ctx, id) {
					m.Read(ctx, id, "prompt", p.Name, false)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt " + p.Name}
				}
				m.Read(ctx, id, "prompt", p.Name, true)
				args, _ := json.Marshal(p.Arguments) // a map's keys marshal sorted
				what := "prompt " + p.Name + " " + inputDigest(args)
				r, err := s.readRound(ctx, id, req, what, p.RequestState, p.InputResponses)
				if err != nil {
					return nil, err
				}
				res, err := m.Client.GetPrompt(ctx, name, p.Arguments, r)
				if err == nil && res.NeedsInput() {
					res.RequestState, err = s.wrap(ctx, id, what, res.InputRequests, res.RequestState, r)
					return res, err
				}
				return completed(req, res, err)
			}
			return next(ctx, method, req)
		case "resources/read":
			res, err := next(ctx, method, req)
			var rpc *jsonrpc.Error
			if err == nil || !errors.As(err, &rpc) || rpc.Code != resourceNotFound {
				return res, err
			}
			p := req.GetParams().(*mcp.ReadResourceParams)
			uri, what := p.URI, "resource "+p.URI
			var r *mcpclient.Round
			opened := false
			for _, m := range s.cfg.Mounts {
				if !m.Resources || !m.Client.Serves().Resources {
					continue
				}
				if !m.May(ctx, id) {
					m.Read(ctx, id, "resource", uri, false)
					continue
				}
				m.Read(ctx, id, "resource", uri, true)
				if !opened {
					var rerr error
					if r, rerr = s.readRound(ctx, id, req, what, p.RequestState, p.InputResponses); rerr != nil {
						return nil, rerr
					}
					opened = true
				}
				got, rerr := m.Client.ReadResource(ctx, uri, r)
				if errors.As(rerr, &rpc) && rpc.Code == resourceNotFound {
					continue
				}
				if rerr == nil && got.NeedsInput() {
					got.RequestState, rerr = s.wrap(ctx, id, what, got.InputRequests, got.RequestState, r)
					return got, rerr
				}
				return completed(req, got, rerr)
			}
			return res, err
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		return s.listMounts(ctx, id, res)
	}
}

// completed is a mount's answer to a caller's request: a caller of the
// sessionless protocol needs its resultType, which the SDK sets on the
// answers of its own handlers only, and which the upstream's session did
// not send.
func completed[R any, P interface {
	*R
	mcp.Result
}](req mcp.Request, res P, err error) (mcp.Result, error) {
	if err != nil {
		return nil, err
	}
	if !sessionlessRequest(req) {
		return res, nil
	}
	return withResultType(res, "complete")
}

// sessionlessRequest reports a request of the sessionless protocol.
func sessionlessRequest(req mcp.Request) bool {
	v, ok := req.(interface{ ProtocolVersion() string })
	return ok && v.ProtocolVersion() >= mcpwire.SessionlessProtocol
}

// withResultType is res with its resultType set, which the SDK sets on
// the answers of its own handlers only.
func withResultType[R any, P interface {
	*R
	mcp.Result
}](res P, resultType string) (P, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	fields["resultType"], _ = json.Marshal(resultType)
	if b, err = json.Marshal(fields); err != nil {
		return nil, err
	}
	out := P(new(R))
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// listMounts adds the mounts' resources, templates or prompts that id may
// see to the host's own list, on its last page.
func (s *Server) listMounts(ctx context.Context, id Identity, res mcp.Result) (mcp.Result, error) {
	switch list := res.(type) {
	case *mcp.ListResourceTemplatesResult:
		list.ResourceTemplates = slices.DeleteFunc(list.ResourceTemplates, func(t *mcp.ResourceTemplate) bool { return t.URITemplate == changeMark })
	case *mcp.ListPromptsResult:
		list.Prompts = slices.DeleteFunc(list.Prompts, func(p *mcp.Prompt) bool { return p.Name == changeMark })
	}
	for _, m := range s.cfg.Mounts {
		if !m.May(ctx, id) {
			continue
		}
		up := m.Client.Serves()
		switch list := res.(type) {
		case *mcp.ListResourcesResult:
			if m.Resources && up.Resources && list.NextCursor == "" {
				got, err := m.Client.Resources(ctx)
				if err != nil {
					return nil, err
				}
				list.Resources = append(list.Resources, got...)
			}
		case *mcp.ListResourceTemplatesResult:
			if m.Resources && up.Resources && list.NextCursor == "" {
				got, err := m.Client.ResourceTemplates(ctx)
				if err != nil {
					return nil, err
				}
				list.ResourceTemplates = append(list.ResourceTemplates, got...)
			}
		case *mcp.ListPromptsResult:
			if m.Prompts && up.Prompts && list.NextCursor == "" {
				got, err := m.Client.Prompts(ctx)
				if err != nil {
					return nil, err
				}
				for _, p := range got {
					q := *p
					q.Name = served(m.Prefix, p.Name)
					list.Prompts = append(list.Prompts, &q)
				}
			}
		}
	}
	return res, nil
}

// served is the name a mount's prompt is served by.
func served(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "_" + name
}

// promptMount is the mount that serves the prompt by name, and the
// prompt's upstream name; nil for none.
func (s *Server) promptMount(name string) (*Mount, string) {
	for i := range s.cfg.Mounts {
		m := &s.cfg.Mounts[i]
		if !m.Prompts || !m.Client.Serves().Prompts {
			continue
		}
		if m.Prefix == "" {
			return m, name
		}
		if rest, ok := strings.CutPrefix(name, m.Prefix+"_"); ok {
			return m, rest
		}
	}
	return nil, ""
}

// complete forwards a completion of a mount's prompt or resource template.
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	id, _ := s.identity(req.GetExtra())
	empty := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	p := req.Params
	if p == nil || p.Ref == nil {
		return empty, nil
	}
	if p.Ref.Type == "ref/prompt" {
		m, name := s.promptMount(p.Ref.Name)
		if m == nil || !m.May(ctx, id) {
			return empty, nil
		}
		q := *p
		q.Ref = &mcp.CompleteReference{Type: p.Ref.Type, Name: name}
		return m.Client.Complete(ctx, &q)
	}
	for _, m := range s.cfg.Mounts {
		if m.Resources && m.Client.Serves().Completions && m.May(ctx, id) {
			return m.Client.Complete(ctx, p)
		}
	}
	return empty, nil
}

// subscribe forwards a caller's subscription to the mounts that serve
// resources; the upstream's subscription lasts while any caller's does.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	id, _ := s.identity(req.GetExtra())
	uri := req.Params.URI
	s.mounts.mu.Lock()
	defer s.mounts.mu.Unlock()
	for _, m := range s.cfg.Mounts {
		if !m.Resources || !m.Client.Serves().Subscribe || !m.May(ctx, id) {
			continue
		}
		if s.mounts.subs[uri] == 0 {
			if err := m.Client.Subscribe(ctx, uri); err != nil {
				return err
			}
		}
	}
	if s.mounts.subs == nil {
		s.mounts.subs = map[string]int{}
	}
	s.mounts.subs[uri]++
	return nil
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	s.mounts.mu.Lock()
	defer s.mounts.mu.Unlock()
	if s.mounts.subs[uri] == 0 {
		return nil
	}
	if s.mounts.subs[uri]--; s.mounts.subs[uri] > 0 {
		return nil
	}
	delete(s.mounts.subs, uri)
	for _, m := range s.cfg.Mounts {
		if m.Resources && m.Client.Serves().Subscribe {
			_ = m.Client.Unsubscribe(ctx, uri)
		}
	}
	return nil
}
