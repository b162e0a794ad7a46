package carmy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmy-dev/carmy/internal/canon"
	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/mcpclient"
	"github.com/carmy-dev/carmy/store"
)

// Upstream is a third-party MCP server that a registry mounts with
// [Builder.Mount]: a stdio server run as a child process ([Command]) or a
// streamable HTTP endpoint ([Endpoint]).
type Upstream struct {
	command []string
	url     string
	headers map[string]string
}

// Command is a stdio MCP server that carmy starts as a child process: the
// program name and its arguments. The child gets a minimal environment
// (PATH, HOME, LANG and what [MountEnv] names: none of the host's secrets)
// and its standard error goes to the registry's log.
func Command(name string, args ...string) Upstream {
	return Upstream{command: append([]string{name}, args...)}
}

// Endpoint is a streamable HTTP MCP server at url, of either protocol
// generation (sessions, or the sessionless 2026-07-28 protocol).
func Endpoint(url string, opts ...EndpointOption) Upstream {
	u := Upstream{url: url}
	for _, o := range opts {
		if o != nil {
			o(&u)
		}
	}
	return u
}

// EndpointOption configures an [Endpoint].
type EndpointOption func(*Upstream)

// Header sends an HTTP header with every request to the endpoint: the
// upstream's credentials. A caller's own credentials never reach an
// upstream.
func Header(key, value string) EndpointOption {
	return func(u *Upstream) {
		if u.headers == nil {
			u.headers = map[string]string{}
		}
		u.headers[key] = value
	}
}

// MountOption configures a mount ([Builder.Mount]).
type MountOption func(*mountSpec)

// MountEnv sets an environment variable of a [Command] upstream's child.
func MountEnv(key, value string) MountOption {
	return func(s *mountSpec) {
		if s.env == nil {
			s.env = map[string]string{}
		}
		s.env[key] = value
	}
}

// MountRoots declares the roots the upstream may work in (file:// URIs).
// They are the mount's alone: no caller can widen them. Without them
// carmy declares no roots to the upstream.
func MountRoots(uris ...string) MountOption {
	return func(s *mountSpec) { s.roots = append(s.roots, uris...) }
}

// MountURLElicitation lets the upstream send the caller's person to a URL
// (URL elicitation); without it carmy declares forms only.
func MountURLElicitation() MountOption {
	return func(s *mountSpec) { s.urlElicitation = true }
}

// MountSampling lets the upstream ask the caller's client to sample (an
// LLM completion) during a call; without it carmy declares no sampling.
func MountSampling() MountOption {
	return func(s *mountSpec) { s.sampling = true }
}

// MountResources(false) leaves the upstream's resources unserved; by
// default carmy's MCP server serves them, their URIs unchanged, to the
// callers that hold the mount's [MountRequires].
func MountResources(serve bool) MountOption {
	return func(s *mountSpec) { s.noResources = !serve }
}

// MountPrompts(false) leaves the upstream's prompts unserved; by default
// carmy's MCP server serves them as <prefix>_<name>, to the callers that
// hold the mount's [MountRequires].
func MountPrompts(serve bool) MountOption {
	return func(s *mountSpec) { s.noPrompts = !serve }
}

// MountRequires lists permissions that every call of the mount's tools
// needs, and every list and read of its resources and prompts, beside
// what a [ToolOverride] requires.
func MountRequires(perms ...string) MountOption {
	return func(s *mountSpec) { s.requires = append(s.requires, perms...) }
}

// EffectFloor bounds how low the upstream's hints may take the effects of
// its tools: a tool that says it only reads is still at least floor.
func EffectFloor(floor Effect) MountOption {
	return func(s *mountSpec) { s.floor = floor }
}

// TrustAnnotations(false) ignores the upstream's hints: every tool is
// [Destructive] unless its [MountTool] override says otherwise. The
// default trusts them as the mapping of [Builder.Mount] reads them.
func TrustAnnotations(trust bool) MountOption {
	return func(s *mountSpec) { s.distrust = !trust }
}

// MountDeferred marks every tool of the mount [Deferred]: a model loads
// them on demand (the LLM exports and MCP tools/list say defer_loading).
// A [ToolOverride]'s Deferred decides for one tool.
func MountDeferred() MountOption {
	return func(s *mountSpec) { s.deferred = true }
}

// MountTool overrides what carmy takes from the upstream about one of its
// tools, named as the upstream names it.
func MountTool(name string, o ToolOverride) MountOption {
	return func(s *mountSpec) {
		if s.overrides == nil {
			s.overrides = map[string]ToolOverride{}
		}
		s.overrides[name] = o
	}
}

// ToolOverride is the operator's word on one upstream tool, over the
// upstream's. Zero fields leave the tool as the upstream and the mount
// make it.
type ToolOverride struct {
	// Effect replaces the effect read from the hints (and EffectFloor).
	Effect Effect
	// Requires lists permissions a call needs, as [Requires] does.
	Requires []string
	// RateLimit bounds each principal's calls, as [RateLimit] does.
	RateLimit store.Rate
	// Confirm: false lets a Destructive tool run without a person's
	// confirmation; true asks for one whatever the effect.
	Confirm *bool
	// Timeout is the deadline of one call, as [Timeout] is.
	Timeout time.Duration
	// Description replaces the upstream's.
	Description string
	// Deferred, when set, says whether a model loads the tool on demand
	// ([Deferred]), over [MountDeferred].
	Deferred *bool
}

// mountSpec is one Mount call, resolved at Build.
type mountSpec struct {
	prefix         string
	up             Upstream
	site           string
	env            map[string]string
	roots          []string
	urlElicitation bool
	sampling       bool
	noResources    bool
	noPrompts      bool
	requires       []string
	floor          Effect
	distrust       bool
	deferred       bool
	overrides      map[string]ToolOverride
}

// Mount puts the tools of a third-party MCP server into the registry,
// named <prefix>_<name> (the upstream's own name with an empty prefix,
// allowed for a single mount). A prefix is lower-case letters and digits.
// Build connects to the upstream and lists its tools; a failure is a
// Build error naming the mount, as is any name that collides with another
// tool.
//
// A mounted tool is a tool of the registry like any other: permissions,
// limits, confirmation, request ids, serialization, tasks and audit apply
// to it as to a compiled one. Its input is checked against the upstream's
// own schema (JSON Schema 2020-12) before anything is sent, and the
// upstream receives the canonical form of the input, the bytes a person
// approved; the request id travels in _meta as carmy/request_id. Its
// published schemas are the upstream's, byte for byte.
//
// Its effect comes from the upstream's hints, safe by default: readOnlyHint
// is [Read]; otherwise a tool is [Destructive] unless it says
// destructiveHint false, then [ExternalWrite] (openWorldHint, true by
// default) or [Write]. [EffectFloor] and [MountTool] overrides change
// that. A Destructive mounted tool needs a person's confirmation unless
// its override says Confirm false. An approval binds the tool's
// definition (description, schemas, annotations) as well as its input.
//
// The upstream's questions during a call (forms, pages, sampling) reach
// the caller labelled with the mount, only once carmy's own confirmation
// of the call was given; roots are the mount's ([MountRoots]), never a
// caller's. A caller of the sessionless MCP protocol gets the questions of
// an upstream's input-required results under the upstream's own keys, in
// carmy's own signed rounds: the caller's next round runs the tool again,
// which calls the upstream afresh and answers it under the same keys. The
// upstream is told only what that caller declared and the mount allows.
//
// An upstream tool that runs only as a task is a [TaskRequired] tool,
// called as the upstream's task (as is one that may be a task, when
// carmy's call is one): the upstream's task is cancelled with carmy's, and
// fails it when it fails. Where the upstream does not declare tasks, such
// a tool is left out, with a log line. Where it speaks the sessionless MCP
// protocol with tasks, it decides call by call whether such a call asks
// first or makes its task, and a sessionless caller that takes tasks sees
// what it decided ([TaskAfterInput]): the upstream's questions in rounds
// before carmy's task starts, or carmy's task at once, which takes over
// the task the upstream made without calling it again.
//
// The registry follows the upstream's changes while it serves. A tool the
// upstream adds is served at once when its name is free, its schemas
// compile and the policies in force validate against it (else refused,
// logged and audited). A tool whose definition changes is served with
// the new one: its description and schemas as the upstream now writes
// them, the overrides still applied, its effect risen where the new hints
// raise it and kept where they would lower it (a fall waits for the
// operator: configuration or a restart); an approval or grant of the old
// definition does not authorize a call of the new one, and a call made
// under the old one that has not reached the upstream yet answers
// unavailable (retryable). A new definition carmy cannot serve (a schema
// that does not compile, policies that do not validate against it) holds
// the tool: its calls answer unavailable, saying why, and the mount's
// other tools keep working. A tool whose task support changes is served
// with the new support, unless it now runs only as a task of an upstream
// that does not declare tasks: that holds it. A tool the upstream drops
// answers unavailable. Each change is audited ([AuditToolChanged]) with
// the new definition's hash, and carmy's MCP clients are told
// (notifications/tools/list_changed), as they are when the upstream's
// resources or prompts change.
func (b *Builder) Mount(prefix string, up Upstream, opts ...MountOption) *Builder {
	s := &mountSpec{prefix: prefix, up: up, site: callerSite(2)}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	b.mounts = append(b.mounts, s)
	return b
}

var mountPrefix = regexp.MustCompile(`^[a-z0-9]+$`)

// mount is one connected upstream of a built registry.
type mount struct {
	spec   *mountSpec
	client *mcpclient.Client
	r      *Registry
	tools  map[string]*mountedTool // by upstream name
	mu     sync.Mutex
	// refused are the upstream definitions carmy did not serve, by
	// upstream name: each is refused, logged and audited once.
	refused map[string]*mountHold
	// ready is closed once Build is over (built or failed): the upstream's
	// changes wait for it, as they read the registry's tools, and follow
	// them only when built.
	ready     chan struct{}
	readyOnce sync.Once
	built     bool
}

func (m *mount) start(built bool) {
	m.readyOnce.Do(func() {
		m.built = built
		close(m.ready)
	})
}

// serving waits for Build to end, and reports whether the registry was
// built: then the upstream's changes are followed.
func (m *mount) serving() bool {
	<-m.ready
	return m.built
}

// served reports, without waiting, whether the registry is built and
// serves: before, no client has listed anything it should be told of.
func (m *mount) served() bool {
	select {
	case <-m.ready:
		return m.built
	default:
		return false
	}
}

// startMounts lets the mounts follow their upstreams' changes, once the
// registry is built.
func (r *Registry) startMounts() {
	for _, m := range r.mounts {
		m.start(true)
	}
}

// mountedTool is the part of a registry's tool that a mount adds: the
// policy's server attribute is its mount's prefix. A definition the
// upstream changes is a new mountedTool, in a new tool; the calls made
// under the old one keep it.
type mountedTool struct {
	m          *mount
	upstream   string         // the tool's name upstream
	def        mcpclient.Tool // the definition it serves
	hash       string         // the definition's hash
	structured bool           // the upstream declares an output schema
	redefined  bool           // the definition replaced another while the registry served
	// decides: the tool runs only as a task, and its upstream decides per
	// call whether it asks first (TaskAfterInput, where a first call of
	// carmy's may be handed off to a task).
	decides bool
	// hold is why its calls answer unavailable; nil while it is served.
	hold atomic.Pointer[mountHold]
}

// mountHold is why a mounted tool's calls answer unavailable, and the
// upstream definition that holds it (its hash; "" for none).
type mountHold struct {
	hash, reason, why string
	retryable         bool
	policies          bool // the policies in force refused the definition
}

var (
	vanished   = &mountHold{reason: "tool_vanished", why: "the upstream no longer lists it"}
	superseded = &mountHold{reason: "tool_changed", retryable: true,
		why: "its definition changed upstream after this call was checked against the old one; call again to use the new one"}
)

// prefix is the mount the tool comes from: the policy's server attribute.
func (mt *mountedTool) prefix() string { return mt.m.spec.prefix }

// server is the mount t comes from, by its prefix, "" for the registry's
// own tools: the Tool entity's server attribute for policies.
func (t *tool) server() string {
	if t.def.mount == nil {
		return ""
	}
	return t.def.mount.prefix()
}

// name is how the mount is named in messages and logs.
func (s *mountSpec) name() string {
	if s.prefix == "" {
		return `""`
	}
	return s.prefix
}

// where says what the mount reaches, for its Build errors.
func (s *mountSpec) where() string {
	if len(s.up.command) > 0 {
		return strings.Join(s.up.command, " ")
	}
	return s.up.url
}

// mountInput is a mounted tool's input: the JSON the upstream's schema
// admitted, kept as it came.
type mountInput struct{ raw json.RawMessage }

func (in *mountInput) UnmarshalJSON(b []byte) error {
	in.raw = append(in.raw[:0], b...)
	return nil
}

// mountOutput is a mounted tool's structured output, as the upstream wrote
// it.
type mountOutput json.RawMessage

func (o mountOutput) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	return o, nil
}

var (
	mountInputType  = reflect.TypeFor[mountInput]()
	mountOutputType = reflect.TypeFor[mountOutput]()
)

// mountTools connects every mount and declares its tools; the problems are
// Build errors naming the mount. The clients connected are closed with
// the registry.
func (b *Builder) mountTools(ctx context.Context, r *Registry) ([]*ToolDef, []error) {
	var defs []*ToolDef
	var errs []error
	for _, s := range b.mounts {
		fail := func(format string, args ...any) {
			errs = append(errs, &BuildError{Site: s.site, Err: fmt.Errorf("mount %s (%s): "+format, append([]any{s.name(), s.where()}, args...)...)})
		}
		switch {
		case s.prefix != "" && !mountPrefix.MatchString(s.prefix):
			fail("the prefix must be lower-case letters and digits")
			continue
		case s.prefix == "" && len(b.mounts) > 1:
			fail("an empty prefix is allowed for a single mount only; give each mount a prefix")
			continue
		case (len(s.up.command) == 0) == (s.up.url == ""):
			fail("needs an upstream: carmy.Command or carmy.Endpoint")
			continue
		case s.floor != 0 && !s.floor.valid():
			fail("has an unknown effect floor %d", s.floor)
			continue
		}
		m := &mount{spec: s, r: r, tools: map[string]*mountedTool{}, refused: map[string]*mountHold{}, ready: make(chan struct{})}
		c, err := mcpclient.Connect(ctx, mcpclient.Config{
			Name: s.name(), Command: s.up.command, Env: s.env, URL: s.up.url, Headers: s.up.headers,
			Roots: s.roots, URLElicitation: s.urlElicitation, Sampling: s.sampling, Logger: r.logger, Changed: m.changed,
			ResourceUpdated: func(uri string) { m.r.mcpServer().ResourceUpdated(uri) },
			ResourcesChanged: func() {
				if !s.noResources && m.served() {
					m.r.mcpServer().ResourcesChanged()
				}
			},
			PromptsChanged: func() {
				if !s.noPrompts && m.served() {
					m.r.mcpServer().PromptsChanged()
				}
			},
		})
		if err != nil {
			fail("%v", err)
			continue
		}
		m.client = c
		r.mounts = append(r.mounts, m)
		r.closers = append(r.closers, func() error { m.start(false); return c.Close() })
		upstream := map[string]bool{}
		for _, t := range c.Tools() {
			upstream[t.Name] = true
			if d := m.declare(t, nil); d != nil {
				m.tools[t.Name] = d.mount
				defs = append(defs, d)
			} else {
				m.refused[t.Name] = &mountHold{hash: t.Hash} // left out, and said so once
			}
		}
		for name := range s.overrides {
			if !upstream[name] {
				fail("overrides tool %q, which the upstream does not list", name)
			}
		}
	}
	return defs, errs
}

// declare makes the declaration of one upstream tool; nil for a tool
// carmy leaves out (one that runs only as a task of an upstream that does
// not declare tasks). was is the tool it replaces, nil for a new one: its
// effect never falls, nor does it become idempotent, without the operator.
func (m *mount) declare(t mcpclient.Tool, was *tool) *ToolDef {
	s := m.spec
	if t.TaskSupport == "required" && !m.client.TakesTasks() {
		m.r.logger.Warn("carmy: an upstream tool that runs only as a task is left out: the upstream does not declare tasks", "mount", s.name(), "tool", t.Name)
		return nil
	}
	o := s.overrides[t.Name]
	mt := &mountedTool{m: m, upstream: t.Name, def: t, hash: t.Hash, structured: t.OutputSchema != nil}
	meta := ToolMetadata{Name: m.nameOf(t.Name), Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
		Timeout: o.Timeout, Requires: union(s.requires, o.Requires)}
	meta.Effect = s.effect(t, o)
	switch t.TaskSupport {
	case "forbidden": // a caller's task would be the upstream's too
		meta.Tasks = TaskForbidden
	case "required": // called as the upstream's task, in a task of carmy's
		meta.Tasks = TaskRequired
	}
	meta.Idempotent = t.Idempotent != nil && *t.Idempotent && !s.distrust
	if was != nil {
		meta.Effect = max(meta.Effect, was.meta.Effect)
		meta.Idempotent = meta.Idempotent && was.meta.Idempotent
	}
	meta.ParallelSafe = meta.Effect.ReadOnly()
	if o.Description != "" {
		meta.Description = o.Description
	}
	meta.Deferred = s.deferred
	if o.Deferred != nil {
		meta.Deferred = *o.Deferred
	}
	if o.Confirm != nil && *o.Confirm || o.Confirm == nil && meta.Effect == Destructive {
		meta.Confirmation = ConfirmationRequired
	}
	d := &ToolDef{site: fmt.Sprintf("mount %s (%s)", s.name(), s.where()), ctxParam: -1, inParam: 0, inType: mountInputType,
		impl: &implTool{metadata: func() ToolMetadata { return meta }, invoke: mt.invoke}, mount: mt}
	d.outType = contentType
	if mt.structured {
		d.outType = mountOutputType
	}
	if o.RateLimit.Calls > 0 {
		d.opts.rate = o.RateLimit
	}
	// Where the upstream decides, call by call, whether a call of a tool
	// that runs only as a task asks first, or answers at once, or makes its
	// task (the sessionless protocol with tasks), a sessionless caller's
	// first call is a call, which becomes carmy's task once the upstream
	// makes its own: the upstream's rounds reach the caller before the
	// task, as they would without carmy.
	mt.decides = meta.Tasks == TaskRequired && m.client.SessionlessTasks()
	d.opts.taskAfterInput = mt.decides
	return d
}

// effect is a tool's effect: the operator's override, else the hints as
// MCP defines them, no lower than the mount's floor.
func (s *mountSpec) effect(t mcpclient.Tool, o ToolOverride) Effect {
	if o.Effect != 0 {
		return o.Effect
	}
	e := Destructive
	switch {
	case s.distrust:
	case t.ReadOnly != nil && *t.ReadOnly:
		e = Read
	case t.Destructive != nil && !*t.Destructive:
		e = ExternalWrite
		if t.OpenWorld != nil && !*t.OpenWorld {
			e = Write
		}
	}
	return max(e, s.floor)
}

// invoke calls the upstream tool with the canonical form of the validated
// input: the bytes a person approved.
func (mt *mountedTool) invoke(cc *Context, in reflect.Value) (any, error) {
	m := mt.m
	if h := mt.hold.Load(); h != nil {
		return nil, mt.unavailable(h.why, h.reason, h.retryable)
	}
	form, err := canon.Form(in.Interface().(*mountInput).raw, nil)
	if err != nil {
		return nil, err
	}
	// What the upstream's requests met at the caller, set on the client's
	// goroutines: a question that waits for the caller's next round, a
	// sampling the caller cannot do.
	var round, unsampled atomic.Pointer[error]
	// later is what a question that waits for the caller's next round
	// answers the upstream: in a session, the upstream is told the person
	// cancelled, and its call ends; a question of the upstream's
	// input-required result (a key) is not answered at all.
	later := func(key string, err error) (string, error) {
		round.Store(&err)
		if key != "" {
			return "", mcpclient.ErrAnswerLater
		}
		return "cancel", nil
	}
	req := &mcpclient.Request{Name: mt.upstream, Arguments: form, Progress: cc.Progress,
		Elicit: func(_ context.Context, key, message string, schema json.RawMessage) (string, json.RawMessage, error) {
			answer, ok, err := cc.elicitSchema(questionKey(key), m.label()+message, schema)
			switch {
			case waitsForRound(err):
				// The caller of the sessionless protocol answers in its next
				// round, which calls the upstream again from the start: this
				// call of it stops here, and ends as the round's.
				action, err := later(key, err)
				return action, nil, err
			case err != nil:
				cc.Log(slog.LevelWarn, "carmy: a question of the upstream was declined: the caller cannot be asked", "mount", m.spec.name(), "error", err)
				return "decline", nil, nil
			case !ok:
				return "decline", nil, nil
			}
			return "accept", answer, nil
		}}
	if m.spec.urlElicitation {
		req.ElicitURL = func(_ context.Context, key, message, url, id string) (string, error) {
			action, err := cc.elicitURL(questionKey(key), m.label()+message, url, id)
			if waitsForRound(err) {
				return later(key, err)
			}
			return action, err
		}
	}
	// A sampling the caller cannot do ends the call with why, not with the
	// upstream's reading of the refusal.
	if m.spec.sampling {
		req.Sample = func(_ context.Context, key string, params json.RawMessage) (json.RawMessage, error) {
			res, err := sample(cc, questionKey(key), params)
			switch {
			case waitsForRound(err):
				round.Store(&err)
				return nil, mcpclient.ErrAnswerLater
			case err != nil:
				unsampled.Store(&err)
			}
			return res, err
		}
	}
	// A caller of the sessionless protocol answers the upstream's own
	// questions under the upstream's keys, and the upstream is told what
	// that caller can answer. A task's questions wait on the task, as a
	// session's do.
	//
	// A task of a tool whose upstream decides goes the same way: the task
	// finds the answers of the rounds before it under the upstream's keys,
	// and reads the upstream's task that a first call handed off.
	p, ok := cc.peer.(mcpPeer)
	if ok && p.Sessionless() && (cc.task == nil || mt.decides) {
		caller := p.Caller()
		req.Rounds = &caller
	}
	switch {
	case cc.task != nil:
		if cc.task.adopt != nil {
			req.Adopt = cc.task.adopt.task
		}
	case req.Rounds != nil && mt.decides:
		req.HandOff = p.TakesTasks()
	}
	// The caller gets the upstream's message as it is; carmy's log ties
	// it to the call by its execution id.
	req.Log = func(level slog.Level, _ string, data any) {
		text, ok := data.(string)
		if !ok {
			b, _ := json.Marshal(data)
			text = string(b)
		}
		cc.Log(level, text)
	}
	if cc.RequestID != "" {
		req.Meta = map[string]any{MetaRequestID: cc.RequestID}
	}
	// A tool that runs only as the upstream's task is called as one; so is
	// one that may, when carmy's call is a task itself: the upstream's task
	// is then cancelled with carmy's, and its failure fails carmy's.
	req.Task = mt.def.TaskSupport == "required" ||
		mt.def.TaskSupport == "optional" && cc.task != nil && m.client.TakesTasks()
	res, err := m.client.Call(cc, req)
	if p := round.Load(); p != nil {
		return nil, *p
	}
	if p := unsampled.Load(); p != nil {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("mount %s: %s asked the client to sample, and it cannot: %v", m.spec.name(), mt.upstream, *p), Err: *p}
	}
	if err != nil {
		var h *mcpclient.HandOff
		if errors.As(err, &h) {
			return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: &handOff{task: h.Task, cancel: sync.OnceFunc(h.Cancel)},
				Message: fmt.Sprintf("mount %s: %s made a task upstream; the call goes on as a task", m.spec.name(), mt.upstream)}
		}
		return nil, mt.fault(err, cc.task != nil)
	}
	if res.IsError {
		return nil, mt.toolError(res.Content)
	}
	if mt.structured {
		return mountOutput(res.Structured), nil
	}
	var c Content
	if err := c.UnmarshalJSON(res.Content); err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("mount %s answered %s with content carmy cannot read", m.spec.name(), mt.upstream),
			Details: map[string]any{"mount": m.spec.prefix, "reason": "malformed"}, Err: err}
	}
	return c, nil
}

// handOff is the end of a first call whose upstream made its task: the
// MCP door starts carmy's task, which adopts it, and answers with that
// task. It is retryable, as a round's end is, so that no idempotency
// record keeps it. The call's turn of a tool that is not parallel-safe
// passes to the task with it, so that no other call of the tool runs
// while the upstream's task does.
type handOff struct {
	task   string // the upstream's
	cancel func() // cancels it upstream

	mu   sync.Mutex
	turn store.Lock // the call's turn of the tool, until the task takes it
}

func (h *handOff) Error() string { return "the upstream made task " + h.task }

// keepTurn keeps the call's turn of the tool for the task.
func (h *handOff) keepTurn(l store.Lock) {
	h.mu.Lock()
	h.turn = l
	h.mu.Unlock()
}

// takeTurn hands the task the turn the call kept, nil for none.
func (h *handOff) takeTurn() store.Lock {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.turn
	h.turn = nil
	return l
}

// abandon cancels the upstream's task, which no task of carmy's will
// read, and frees the turn kept for one.
func (h *handOff) abandon(ctx context.Context) {
	h.cancel()
	if l := h.takeTurn(); l != nil {
		_ = l.Release(context.WithoutCancel(ctx))
	}
}

// handedOff is the hand-off that ended a call with err, nil for any other
// end: checked only for an error, so that a call that succeeded allocates
// nothing for it.
func handedOff(err error) *handOff {
	if err == nil {
		return nil
	}
	var h *handOff
	if !errors.As(err, &h) {
		return nil
	}
	return h
}

// sample asks the caller's client to sample for an upstream that may,
// where the client is one that can be asked (an MCP client's), the
// question going by name in the sessionless protocol.
func sample(cc *Context, name string, params json.RawMessage) (json.RawMessage, error) {
	p, ok := cc.peer.(mcpPeer)
	if cc.Context == nil || !ok {
		return nil, Errorf(CodeUnavailable, "the client cannot be asked to sample")
	}
	return p.Sample(cc.Context, name, params)
}

// questionKey is the name an upstream's question goes by at the caller:
// the upstream's own key when it is a plain name, else carmy's.
func questionKey(key string) string {
	if upstreamKey.MatchString(key) {
		return key
	}
	return "question"
}

var upstreamKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// label is how a question of the upstream is shown: as the mounted
// server's, not carmy's.
func (m *mount) label() string {
	if m.spec.prefix == "" {
		return "The mounted server asks: "
	}
	return "Server " + m.spec.prefix + " asks: "
}

// unavailable is the refusal of a call the upstream cannot take now.
func (mt *mountedTool) unavailable(why, reason string, retryable bool) *Error {
	return &Error{Code: CodeUnavailable, Retryable: retryable,
		Message: fmt.Sprintf("mount %s cannot call %s: %s", mt.m.spec.name(), mt.upstream, why),
		Details: map[string]any{"mount": mt.prefix(), "reason": reason}}
}

// reasonUpstreamFailed is the reason of a call whose upstream failed it
// the protocol's way (an error, not a result): a task of carmy's that
// meets one fails, as one whose own server fails does.
const reasonUpstreamFailed = "upstream_failed"

// fault is what a failed upstream call means to the caller: never sent,
// retryable; sent and lost, an outcome unknown that is recorded and never
// retried by carmy; refused by the upstream, or its task failed there,
// the tool's error, which fails carmy's task (task) rather than complete
// it with an error.
func (mt *mountedTool) fault(err error, task bool) error {
	var e *mcpclient.Error
	if !errors.As(err, &e) {
		return err
	}
	var out *Error
	switch e.Kind {
	case mcpclient.NotSent:
		out = mt.unavailable("the upstream cannot be reached; try again", "upstream_unreachable", true)
	case mcpclient.OutcomeUnknown:
		out = mt.unavailable("the call was sent and its answer lost: it may have run; check before calling again", "outcome_unknown", false)
	case mcpclient.Refused:
		if c := e.MissingCapability(); c != "" {
			// The caller did not declare what the upstream needs (carmy
			// declares only what the caller did): the caller's own error.
			return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("mount %s: %s needs the client capability %s, which the client did not declare", mt.m.spec.name(), mt.upstream, c),
				Details: map[string]any{"mount": mt.prefix()}, Err: capabilityMissing(c)}
		}
		out = &Error{Code: CodeToolError, Message: fmt.Sprintf("mount %s refused the call of %s: %s", mt.m.spec.name(), mt.upstream, e.Msg),
			Details: map[string]any{"mount": mt.prefix(), "upstream_code": e.Code}}
		if task {
			out.Details["reason"] = reasonUpstreamFailed
		}
	case mcpclient.TaskFailed:
		out = &Error{Code: CodeToolError, Message: fmt.Sprintf("mount %s: %s", mt.m.spec.name(), e.Msg),
			Details: map[string]any{"mount": mt.prefix(), "upstream_code": e.Code, "reason": reasonUpstreamFailed}}
	case mcpclient.TooLarge:
		out = mt.unavailable("its answer is larger than carmy takes", "output_too_large", false)
	default:
		out = mt.unavailable("its answer cannot be read", "malformed", false)
	}
	out.Err = err
	return out
}

// toolError is the upstream tool's own error: its text is the message.
func (mt *mountedTool) toolError(content json.RawMessage) *Error {
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(content, &blocks)
	var text []string
	for _, b := range blocks {
		if b.Type == "text" {
			text = append(text, b.Text)
		}
	}
	msg := strings.Join(text, "\n")
	if msg == "" {
		msg = "the tool reported an error"
	}
	return &Error{Code: CodeToolError, Message: fmt.Sprintf("%s (mount %s): %s", mt.upstream, mt.m.spec.name(), msg),
		Details: map[string]any{"mount": mt.prefix(), "content": content}}
}

// changed follows the upstream's new list. A tool gone answers
// unavailable; one back as it was is served again. A tool whose
// definition changed is served with the new one ([mount.redefine]); a new
// tool is served at once when it fits ([mount.add]). A definition refused
// once is not tried again while the upstream lists it, but for one the
// policies refused, which a reload of theirs tries again
// ([Registry.remount]). Every change is audited as tool_changed.
func (m *mount) changed(tools []mcpclient.Tool) {
	if !m.serving() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	moved := false
	hold := func(mt *mountedTool, h *mountHold) {
		moved = mt.hold.Swap(h) != h || moved
	}
	seen := map[string]bool{}
	for _, t := range tools {
		seen[t.Name] = true
		mt, ok := m.tools[t.Name]
		refused := m.refused[t.Name]
		switch {
		case ok && t.Hash == mt.hash:
			delete(m.refused, t.Name)
			hold(mt, nil)
		case refused != nil && refused.hash == t.Hash:
			if ok {
				hold(mt, refused)
			}
		case ok:
			m.redefine(mt, t)
		default:
			m.add(t)
		}
	}
	for name, mt := range m.tools {
		if !seen[name] && mt.hold.Load() != vanished {
			hold(mt, vanished)
			m.r.logger.Warn("carmy: an upstream tool vanished; its calls answer unavailable", "mount", m.spec.name(), "tool", name)
			m.audit(name, m.nameOf(name), AuditToolChanged, "", "vanished")
		}
	}
	if moved {
		m.r.toolSetChanged()
	}
}

// add serves a tool the upstream lists after Build, when it fits: its
// name is free and valid, its schemas compile, and the policies in force,
// if any, validate against it. Its effect comes from its hints, the
// mount's floor and overrides, as at Build. A tool that does not fit is
// refused, logged and audited; a restart serves it, if the operator makes
// it fit, as does a reload of the policies that refused it.
func (m *mount) add(t mcpclient.Tool) {
	name := m.nameOf(t.Name)
	if _, taken := m.r.tab().tools[name]; taken {
		m.refuse(nil, t, "", fmt.Errorf("its name %s is taken by another tool", name))
		return
	}
	nt, err := m.serve(t, nil)
	switch {
	case err != nil:
		m.refuse(nil, t, "", err)
	case nt == nil: // declare logged why
		m.refused[t.Name] = &mountHold{hash: t.Hash}
	default:
		m.tools[t.Name] = nt.def.mount
		m.r.logger.Info("carmy: the upstream lists a new tool; it is served", "mount", m.spec.name(), "tool", t.Name, "effect", nt.meta.Effect)
		m.audit(t.Name, name, AuditToolChanged, t.Hash, "new tool served")
	}
}

// redefine serves the new definition t of the tool mt: its description
// and schemas as the upstream wrote them, the overrides applied, its
// effect risen where the new hints raise it and kept where they would
// lower it. An approval of the old definition does not bind the new one
// (the digest holds the definition's hash), and a call made under the
// old one answers unavailable if it has not reached the upstream yet. A
// definition carmy cannot serve holds the tool, as does one that now runs
// only as a task of an upstream that does not declare tasks.
func (m *mount) redefine(mt *mountedTool, t mcpclient.Tool) {
	was := m.r.tab().tools[m.nameOf(t.Name)]
	nt, err := m.serve(t, was)
	switch {
	case err != nil:
		m.refuse(mt, t, "definition_refused", fmt.Errorf("its new definition upstream cannot be served: %w", err))
		return
	case nt == nil:
		m.refuse(mt, t, "task_support_changed", errors.New("it now runs only as a task upstream, and the upstream does not declare tasks"))
		return
	}
	m.tools[t.Name] = nt.def.mount
	delete(m.refused, t.Name)
	mt.hold.Store(superseded)
	m.r.logger.Info("carmy: an upstream tool's definition changed; it is served with the new one", "mount", m.spec.name(), "tool", t.Name,
		"effect", nt.meta.Effect, "was", was.meta.Effect)
	m.audit(t.Name, nt.meta.Name, AuditToolChanged, t.Hash, fmt.Sprintf("definition changed, the new one served; effect %s (was %s)", nt.meta.Effect, was.meta.Effect))
}

// serve makes the tool of the upstream definition t, which replaces the
// tool was (nil for a new one), with Build's code, and publishes it; nil
// for a tool carmy leaves out. An error says why it cannot be served:
// nothing changed.
func (m *mount) serve(t mcpclient.Tool, was *tool) (*tool, error) {
	d := m.declare(t, was)
	if d == nil {
		return nil, nil
	}
	d.mount.redefined = was != nil
	nt, problems := m.r.prepare(d)
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if err := m.r.putTools(nt); err != nil {
		return nil, err
	}
	return nt, nil
}

// refuse records that carmy does not serve the upstream definition t,
// logs and audits it once, and holds mt, the tool it would replace (nil
// for a new tool), so that its calls answer unavailable saying why.
func (m *mount) refuse(mt *mountedTool, t mcpclient.Tool, reason string, err error) {
	why := err.Error()
	h := &mountHold{hash: t.Hash, reason: reason, why: why, policies: errors.Is(err, errPoliciesRefuse)}
	m.refused[t.Name] = h
	detail := "new tool refused: " + why
	if mt != nil {
		detail = "held: " + why
		mt.hold.Store(h)
		m.r.toolSetChanged()
	}
	m.r.logger.Warn("carmy: the upstream lists a definition of a tool that carmy cannot serve", "mount", m.spec.name(), "tool", t.Name, "why", why)
	m.audit(t.Name, "", AuditToolChanged, t.Hash, detail)
}

// remount tries again, under the policies now in force, the definitions
// of the mounts' tools that the policies in force before refused.
func (r *Registry) remount() {
	for _, m := range r.mounts {
		m.mu.Lock()
		maps.DeleteFunc(m.refused, func(_ string, h *mountHold) bool { return h.policies })
		m.mu.Unlock()
		m.changed(m.client.Tools())
	}
}

// live reports a tool whose calls may reach its code: every compiled
// tool, and a mounted one its upstream lists as carmy serves it. Lists
// show the live tools only.
func (t *tool) live() bool {
	return t.def.mount == nil || t.def.mount.hold.Load() == nil
}

// toolSetChanged is called whenever the set of tools callers may call
// changes (a mounted tool came, changed, vanished, was held or came
// back): what follows the tool set follows it here. MCP clients are told
// to list again.
func (r *Registry) toolSetChanged() {
	r.mcpServer().ToolsChanged()
}

// nameOf is the registry's name of an upstream tool.
func (m *mount) nameOf(upstream string) string {
	if m.spec.prefix == "" {
		return upstream
	}
	return m.spec.prefix + "_" + upstream
}

// audit writes a record of a change upstream; Digest holds the new
// definition's hash, "" for a tool that vanished, and Detail what carmy
// did.
func (m *mount) audit(upstream, name string, d AuditDecision, hash, detail string) {
	if name == "" {
		name = m.nameOf(upstream)
	}
	rec := AuditRecord{Time: time.Now(), Decision: d, Tool: name, Digest: hash, Detail: detail + " (mount " + m.spec.name() + ")"}
	if t := m.r.tab().tools[name]; t != nil {
		rec.Effect = t.meta.Effect
	}
	_ = m.r.writeAudit(context.Background(), rec)
}

// mayRead reports whether id may list and read the mount's resources and
// prompts: it holds the mount's permissions.
func (m *mount) mayRead(id Identity) bool {
	perms := NewPermissions(id.Permissions...)
	for _, p := range m.spec.requires {
		if !perms.Has(p) {
			return false
		}
	}
	return true
}

// auditRead records a read of the mount's resource (its URI) or prompt
// (its served name), or its refusal.
func (m *mount) auditRead(ctx context.Context, id Identity, kind, name string, allowed bool) {
	rec := AuditRecord{Time: time.Now(), Decision: AuditRead, Principal: id.Principal, Session: id.Session,
		Tool: name, Effect: Read, Code: "ok", Detail: kind + " of mount " + m.spec.name()}
	if !allowed {
		rec.Decision, rec.Code = AuditRefused, CodePermissionDenied
	}
	_ = m.r.writeAudit(ctx, rec)
}

// digestOf is the digest of a validated input's canonical form, the one a
// confirmation grant and an approval name; a mounted tool's also binds the
// tool's definition, so an approval never outlives the definition a
// person saw.
func (t *tool) digestOf(form []byte) string {
	if t.def.mount == nil {
		return canon.Sum(form)
	}
	return canon.Sum(append([]byte(t.def.mount.hash+"\n"), form...))
}

// redefinedNote is what the refusal of a call that waits for a person's
// approval adds when the upstream changed t's definition while the
// registry served: the approval a caller may hold names the old one.
func (t *tool) redefinedNote() string {
	if t.def.mount == nil || !t.def.mount.redefined {
		return ""
	}
	return " The upstream changed the definition of " + t.meta.Name + " while carmy served it: an approval given for an earlier definition does not authorize a call of this one."
}

// configureMounts adds the mounts of carmy.toml's [[mount]] tables, whose
// values the config package checked.
func (b *Builder) configureMounts(mounts []config.Mount) {
	for _, c := range mounts {
		s := &mountSpec{prefix: c.Prefix, up: Upstream{command: c.Command, url: c.URL, headers: c.Headers}, site: c.Site,
			env: c.Env, roots: c.Roots, urlElicitation: c.URLElicitation, distrust: c.TrustAnnotations != nil && !*c.TrustAnnotations,
			deferred: c.Deferred, sampling: c.Sampling, requires: c.Requires,
			noResources: c.Resources != nil && !*c.Resources, noPrompts: c.Prompts != nil && !*c.Prompts}
		s.floor, _ = ParseEffect(c.EffectFloor) // "" leaves no floor
		for name, o := range c.Tools {
			if s.overrides == nil {
				s.overrides = map[string]ToolOverride{}
			}
			effect, _ := ParseEffect(o.Effect)
			s.overrides[name] = ToolOverride{Effect: effect, Requires: o.Requires, Confirm: o.Confirm, Timeout: o.Timeout,
				Description: o.Description, RateLimit: store.Rate{Calls: o.RateLimit.Calls, Per: o.RateLimit.Per}, Deferred: o.Deferred}
		}
		b.mounts = append(b.mounts, s)
	}
}
