//lint:file-ignore SA1019 sampling and logging are deprecated from 2026-07-28 on, and still what servers of earlier versions use.

package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a mount forwards besides tools: the upstream's resources, prompts
// and completions, read on a caller's behalf (the mount decides who may),
// and the upstream's requests to carmy's caller during a call (sampling,
// log messages).

// open is the open session, or the error of a mount not connected now.
func (c *Client) open() (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil, &Error{Mount: c.cfg.Name, Kind: NotSent, Msg: "not connected; reconnecting"}
	}
	return c.session, nil
}

// sessionlessProtocol is the first version of the protocol without
// sessions.
const sessionlessProtocol = "2026-07-28"

// sessionless reports a session of the 2026-07-28 protocol, where each
// request carries what a session would have kept (its log level).
func sessionless(cs *mcp.ClientSession) bool {
	res := cs.InitializeResult()
	return res != nil && res.ProtocolVersion >= sessionlessProtocol
}

// forwarded is an upstream's failure as the caller sees it: a JSON-RPC
// error of the upstream's (a resource not found) as it is, anything else
// naming the mount.
func (c *Client) forwarded(what string, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code != codeRejected {
		return rpc
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mount %s: %s: %v", c.cfg.Name, what, err)}
}

// every collects every item of one of the upstream's paged lists.
func every[T any](c *Client, what string, list func(*mcp.ClientSession) iter.Seq2[T, error]) ([]T, error) {
	cs, err := c.open()
	if err != nil {
		return nil, err
	}
	var out []T
	for x, err := range list(cs) {
		if err != nil {
			return nil, c.forwarded("cannot list "+what, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// Resources lists every resource of the upstream, page by page.
func (c *Client) Resources(ctx context.Context) ([]*mcp.Resource, error) {
	return every(c, "resources", func(cs *mcp.ClientSession) iter.Seq2[*mcp.Resource, error] { return cs.Resources(ctx, nil) })
}

// ResourceTemplates lists every resource template of the upstream.
func (c *Client) ResourceTemplates(ctx context.Context) ([]*mcp.ResourceTemplate, error) {
	return every(c, "resource templates", func(cs *mcp.ClientSession) iter.Seq2[*mcp.ResourceTemplate, error] {
		return cs.ResourceTemplates(ctx, nil)
	})
}

// Prompts lists every prompt of the upstream, by its upstream name.
func (c *Client) Prompts(ctx context.Context) ([]*mcp.Prompt, error) {
	return every(c, "prompts", func(cs *mcp.ClientSession) iter.Seq2[*mcp.Prompt, error] { return cs.Prompts(ctx, nil) })
}

// ReadResource reads one resource of the upstream, in the round r of a
// caller of the sessionless protocol (nil for another caller), as
// [Client.GetPrompt] gets a prompt.
func (c *Client) ReadResource(ctx context.Context, uri string, r *Round) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	rest, err := c.read(r, "resource "+uri, func(cs *mcp.ClientSession, meta mcp.Meta, answers mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, error) {
		var err error
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, Meta: meta, InputResponses: answers, RequestState: state})
		if err != nil {
			return nil, "", c.forwarded("cannot read "+uri, err)
		}
		if !res.NeedsInput() {
			return nil, "", nil
		}
		return res.InputRequests, res.RequestState, nil
	})
	if err != nil {
		return nil, err
	}
	if rest != nil {
		res.InputRequests = rest
	}
	return res, nil
}

// GetPrompt gets one prompt of the upstream, by its upstream name. r is
// the round of a caller of the sessionless protocol, nil for another: the
// prompt is then got over the upstream's connection of that protocol,
// where there is one, and an input-required result of the upstream's is
// returned as it is (NeedsInput), but for its roots questions, which the
// mount answers itself, never the caller ([Round.Roots]). For another
// caller, such a result is an error: in a session, the upstream's SDK asks
// carmy in the middle of the request instead, and is declined.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string, r *Round) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	rest, err := c.read(r, "prompt "+name, func(cs *mcp.ClientSession, meta mcp.Meta, answers mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, error) {
		var err error
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args, Meta: meta, InputResponses: answers, RequestState: state})
		if err != nil {
			return nil, "", c.forwarded("cannot get prompt "+name, err)
		}
		if !res.NeedsInput() {
			return nil, "", nil
		}
		return res.InputRequests, res.RequestState, nil
	})
	if err != nil {
		return nil, err
	}
	if rest != nil {
		res.InputRequests = rest
	}
	return res, nil
}

// read sends a read (a prompt, a resource) in the round r: send sends it
// once, and returns the upstream's questions and state when it asks for
// input (nil questions when it does not). Roots questions alone are
// answered with the mount's roots and sent again; the others are returned
// for the caller, nil when the read completed.
func (c *Client) read(r *Round, what string, send func(cs *mcp.ClientSession, meta mcp.Meta, answers mcp.InputResponseMap, state string) (mcp.InputRequestMap, string, error)) (mcp.InputRequestMap, error) {
	cs, err := c.open()
	if err != nil {
		return nil, err
	}
	var meta mcp.Meta
	var answers mcp.InputResponseMap
	var state string
	if r != nil {
		c.mu.Lock()
		if c.rounds != nil {
			cs = c.rounds
		}
		c.mu.Unlock()
		meta = mcp.Meta{mcp.MetaKeyClientCapabilities: c.declared(r.Caller)}
		if r.State != "" || len(r.Answers) > 0 {
			answers, state = r.answers(c, r.Answers), r.State
		}
	}
	for round := 1; ; round++ {
		questions, next, err := send(cs, meta, answers, state)
		switch {
		case err != nil:
			return nil, err
		case questions == nil:
			return nil, nil
		case r == nil || round == maxRounds:
			return nil, c.asksInput(what)
		}
		if rest := r.keep(questions); len(rest) > 0 || len(questions) == 0 {
			return rest, nil
		}
		// Roots alone: the mount's answer needs no caller.
		answers, state = r.answers(c, nil), next
	}
}

// asksInput is the error of a read whose upstream asks for input that
// carmy cannot pass on: to a caller of a session, or past maxRounds.
func (c *Client) asksInput(what string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mount %s: the %s asks for input, which carmy cannot pass on to this caller", c.cfg.Name, what)}
}

// Round is a round of a caller of the sessionless protocol with the
// upstream's prompts or resources: what the caller declared, the answers and state its
// request carries (the upstream's own, which the host unwrapped having
// checked it), and the keys of the upstream's roots questions of the
// round before, which the mount answers itself.
type Round struct {
	Caller  Caller
	Answers mcp.InputResponseMap
	State   string
	Roots   []string
}

// answers are the caller's answers with the mount's roots under the keys
// of r.Roots.
func (r *Round) answers(c *Client, caller mcp.InputResponseMap) mcp.InputResponseMap {
	out := maps.Clone(caller)
	if out == nil {
		out = mcp.InputResponseMap{}
	}
	for _, k := range r.Roots {
		out[k] = c.roots()
	}
	return out
}

// keep sets r.Roots to the keys of the roots questions among questions,
// and returns the others, for the caller.
func (r *Round) keep(questions mcp.InputRequestMap) mcp.InputRequestMap {
	r.Roots = nil
	rest := mcp.InputRequestMap{}
	for k, q := range questions {
		if _, ok := q.(*mcp.ListRootsParams); ok {
			r.Roots = append(r.Roots, k)
			continue
		}
		rest[k] = q
	}
	slices.Sort(r.Roots)
	return rest
}

// Complete asks the upstream for completions; a prompt's reference names
// it as the upstream does.
func (c *Client) Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	cs, err := c.open()
	if err != nil {
		return nil, err
	}
	q := *p
	q.Meta = nil
	res, err := cs.Complete(ctx, &q)
	if err != nil {
		return nil, c.forwarded("cannot complete", err)
	}
	return res, nil
}

// Subscribe asks the upstream for updates of a resource, told to
// Config.ResourceUpdated. In the 2026-07-28 protocol the subscription is
// a stream the session keeps open.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	cs, err := c.open()
	if err != nil {
		return err
	}
	if sessionless(cs) {
		go func() { _ = cs.Subscribe(c.life, &mcp.SubscribeParams{URI: uri}) }()
		return nil
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		return c.forwarded("cannot subscribe to "+uri, err)
	}
	return nil
}

// Unsubscribe ends a subscription of Subscribe.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	cs, err := c.open()
	if err != nil {
		return err
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		return c.forwarded("cannot unsubscribe from "+uri, err)
	}
	return nil
}

// Capabilities are what the upstream declared it serves besides tools.
type Capabilities struct {
	Resources, Subscribe, Prompts, Completions bool
	// ResourcesChange and PromptsChange: the upstream says when its
	// resource or prompt list changes (listChanged).
	ResourcesChange, PromptsChange bool
}

// Serves returns what the upstream declared.
func (c *Client) Serves() Capabilities {
	cs, err := c.open()
	if err != nil {
		return Capabilities{}
	}
	res := cs.InitializeResult()
	if res == nil || res.Capabilities == nil {
		return Capabilities{}
	}
	caps := res.Capabilities
	return Capabilities{Resources: caps.Resources != nil, Subscribe: caps.Resources != nil && caps.Resources.Subscribe,
		Prompts: caps.Prompts != nil, Completions: caps.Completions != nil,
		ResourcesChange: caps.Resources != nil && caps.Resources.ListChanged, PromptsChange: caps.Prompts != nil && caps.Prompts.ListChanged}
}

// sample forwards the upstream's sampling request to the caller of the
// call it belongs to; with none, or a call that cannot sample, it is
// refused.
func (c *Client) sample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	cl := c.callOf(ctx, req.Params.GetMeta())
	if cl == nil || cl.req.Sample == nil {
		c.logger.Info("carmy: refused a sampling request of the upstream tied to no call")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "carmy: sampling is only forwarded during a call"}
	}
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, err
	}
	raw, err := cl.req.Sample(ctx, "", params)
	if err != nil {
		return nil, err
	}
	var res mcp.CreateMessageResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the caller's sampling result cannot be read: %w", err)
	}
	return &res, nil
}

// logLine hands the upstream's log message to the call it belongs to:
// on, the one whose response carried it, else the only call in flight;
// one that belongs to no call goes to carmy's log.
func (c *Client) logLine(line []byte, on *call) {
	var m struct {
		Method string                   `json:"method"`
		Params mcp.LoggingMessageParams `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "notifications/message" {
		return
	}
	level := slog.LevelInfo
	switch m.Params.Level {
	case "debug":
		level = slog.LevelDebug
	case "notice", "info":
	case "warning":
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	cl := on
	if cl == nil {
		cl = c.callOf(context.Background(), nil)
	}
	if cl != nil && cl.req.Log != nil {
		cl.req.Log(level, m.Params.Logger, m.Params.Data)
		return
	}
	c.logger.Log(context.Background(), level, "carmy: upstream log", "logger", m.Params.Logger, "data", m.Params.Data)
}
