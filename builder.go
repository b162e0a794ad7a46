package carmy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/guard"
	"github.com/carmy-dev/carmy/internal/mcpserve"
	"github.com/carmy-dev/carmy/store"
)

// DefaultTimeout is the deadline of an execution when neither the tool nor
// the builder sets one.
const DefaultTimeout = 60 * time.Second

// Builder collects tools, dependencies and settings, then builds a
// [Registry]. Its methods return the builder for chaining. A Builder is not
// safe for concurrent use.
type Builder struct {
	defs       []*ToolDef
	states     []any
	timeout    time.Duration
	logger     *slog.Logger
	middleware []Middleware
	authorize  func(Context, ToolMetadata) error
	store      store.IdempotencyStore
	locker     store.Locker
	storeURL   string
	ttl        time.Duration
	limit      int
	window     time.Duration // 0: the store's own
	rate       store.Rate    // Builder.RateLimit, or carmy.toml's default
	toolRates  map[string]toolRate
	publicURL  string
	audit      []auditSource
	mounts     []*mountSpec // Mount
	errs       []error

	approvalTimeout time.Duration
	stateKey        []byte
	healthGrace     *time.Duration // nil: DefaultHealthGrace
	taskTTL         time.Duration

	effectPerms     map[Effect]string // see EffectPermissions
	policy          policySource      // see Policies and PolicyFile
	effectPermsSite string

	toolSearch bool        // see ToolSearch
	deferred   config.List // carmy.toml's deferred_tools

	// Serving.
	auth           Authenticator
	oauth          *oauthSetting // from carmy.toml, resolved at Build
	allowAnonymous bool
	bodyLimit      int64
	allowHosts     []guard.Host
	allowOrigins   []string
	addr           string
	drain          time.Duration
	elicit         formConfirmation
	stdioIdentity  Identity
	sessionTimeout time.Duration
	maxSessions    int
	sessionEnded   []func(MCPSession)
	signals        bool // shut down on SIGINT and SIGTERM (App)
	mcpConfig      mcpConfig
	tuning         tuning // defaults in production; tests change them
}

// New returns an empty builder: no configuration file, no automatically
// registered tools.
func New() *Builder {
	return &Builder{timeout: DefaultTimeout, ttl: store.DefaultTTL, limit: store.DefaultLimit, bodyLimit: DefaultBodyLimit}
}

// App returns a builder holding every tool declared with [Tool] and not
// Register(false), configured by carmy.toml and CARMY_* environment
// variables; its [Builder.Run] also stops on SIGINT and SIGTERM. A bad
// configuration is reported by Build, Listen and Run, every problem at
// once, each a [*BuildError] whose Site is the file and line
// ("carmy.toml:7") or the variable's name: App().Build() is also how a
// deploy step checks a configuration. Settings made on the builder
// afterwards override the configuration.
//
// The file is the one CARMY_CONFIG names, else ./carmy.toml when it
// exists. Unknown keys and bad values are errors. A carmy.toml with every
// key:
//
//	listen = "127.0.0.1:3000"          # Builder.Run's address
//	body_limit = "1MiB"                # bytes: an integer, or with B, KB, KiB, MB, MiB, GB, GiB
//	timeout = "60s"                    # default deadline of an execution
//	drain_timeout = "30s"              # how long a shutdown lets running calls finish
//	log_level = "info"                 # debug, info, warn or error: log to standard error
//	allow_unauthenticated = false      # serve a non-loopback address without authentication
//	store_url = "redis://redis:6379/0" # shared idempotency store and locker (see store.Register); redis_url is the same
//	allowed_hosts = ["tools.example.com"]         # see Builder.AllowHosts
//	allowed_origins = ["https://app.example.com"] # see Builder.AllowOrigins
//	session_timeout = "10m"            # see Builder.SessionTimeout
//	max_sessions = 64                  # see Builder.MaxSessions
//	idempotency_window = "10m"         # see Builder.IdempotencyWindow
//	task_ttl = "1h"                    # see Builder.TaskTTL
//	public_url = "https://tools.example.com" # see Builder.PublicURL
//	audit_file = "/var/log/carmy/audit.jsonl" # audit records as JSON lines (see Builder.AuditFile)
//	audit_url = "postgres://carmy@db/carmy"   # audit records in a sink registered with RegisterAuditor
//	tool_search = true                 # serve search_tools (see Builder.ToolSearch)
//	deferred_tools = ["export_orders"] # tools a model loads on demand (see Deferred)
//	policy_file = "policies.cedar"     # Cedar policies, reloaded when the file changes (see Builder.PolicyFile)
//	policy_mode = "enforce"            # or "shadow": evaluate and audit without enforcing (see Builder.PolicyMode)
//	policy_poll = "2s"                 # how often the policy file is read (see Builder.PolicyPoll)
//
//	[[tokens]]                         # a bearer token, known by its hash (see HashToken)
//	sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//	principal = "alice"
//	permissions = ["confirm:cancel_order"]
//
//	[effect_permissions]               # the permission a call needs by its tool's effect (see Builder.EffectPermissions)
//	read = "tools:read"                # keys: none, read, write, external_write, destructive
//	write = "tools:write"
//
//	[rate_limits]                      # calls per principal and tool (see RateLimit)
//	default = "120/min"                # every tool, as Builder.RateLimit: N/second, min, hour, day or a duration
//	create_order = "10/min"            # one tool, replacing its own RateLimit; "unlimited" exempts it
//
//	# [oauth]                          # instead of [[tokens]]: accept an issuer's access tokens (see OAuth)
//	# issuer = "https://auth.example.com"
//	# audience = "https://tools.example.com/mcp"
//	# scopes = ["tools"]
//
// CARMY_LISTEN, CARMY_BODY_LIMIT, CARMY_TIMEOUT, CARMY_DRAIN_TIMEOUT,
// CARMY_LOG_LEVEL, CARMY_ALLOW_UNAUTHENTICATED, CARMY_STORE_URL,
// CARMY_OAUTH_ISSUER, CARMY_OAUTH_AUDIENCE, CARMY_OAUTH_SCOPES,
// CARMY_ALLOWED_HOSTS, CARMY_ALLOWED_ORIGINS (lists comma-separated),
// CARMY_SESSION_TIMEOUT, CARMY_MAX_SESSIONS, CARMY_IDEMPOTENCY_WINDOW,
// CARMY_TASK_TTL, CARMY_PUBLIC_URL, CARMY_AUDIT_FILE, CARMY_AUDIT_URL and
// CARMY_POLICY_FILE, when set and not empty, override the file's values;
// the tokens authenticate with [BearerTokens], [oauth] with [OAuth],
// resolved at Build, which then reaches the issuer.
func App() *Builder {
	b := New()
	b.signals = true
	b.configure()
	return b.Tool(Registered()...)
}

// Registered returns the tools [App] serves: every tool declared with
// [Tool] or [Impl] without Register(false), in the order they were
// declared. Unlike App it reads no configuration, so a test can check that
// a program's tools build without the developer's carmy.toml or CARMY_*
// variables:
//
//	reg, err := carmy.New().Tool(carmy.Registered()...).Build()
func Registered() []*ToolDef {
	autoRegistry.Lock()
	defer autoRegistry.Unlock()
	return slices.Clone(autoRegistry.defs)
}

// Tool adds tools. The same *ToolDef added twice counts once; two different
// tools with one name are a Build error.
func (b *Builder) Tool(defs ...*ToolDef) *Builder {
	for _, d := range defs {
		if d == nil {
			b.misuse("Builder.Tool was given a nil *ToolDef")
			continue
		}
		if !slices.Contains(b.defs, d) {
			b.defs = append(b.defs, d)
		}
	}
	return b
}

// State provides dependencies. A parameter State[T] receives the provided
// value of type T; for an interface T, the one provided value that
// implements it.
func (b *Builder) State(values ...any) *Builder {
	for _, v := range values {
		if v == nil {
			b.misuse("Builder.State was given nil; provide a typed value")
			continue
		}
		b.states = append(b.states, v)
	}
	return b
}

// Timeout sets the default deadline of an execution, for tools that do not
// set their own. The default is [DefaultTimeout].
func (b *Builder) Timeout(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.Timeout(%v) must be positive", d)
		return b
	}
	b.timeout = d
	return b
}

// Logger sets where the registry logs internal errors, panics, refusals
// (at warn) and executions that outlive their deadline. The default is
// [slog.Default].
func (b *Builder) Logger(l *slog.Logger) *Builder {
	b.logger = l
	return b
}

// misuse records a wrong argument to a builder method, reported by Build
// with the file:line of the call.
func (b *Builder) misuse(format string, args ...any) {
	b.errs = append(b.errs, &BuildError{Site: callerSite(3), Err: fmt.Errorf(format, args...)})
}

// Use adds middleware around every call of a found tool. The first
// middleware given is the outermost.
func (b *Builder) Use(mw ...Middleware) *Builder {
	for _, m := range mw {
		if m == nil {
			b.misuse("Builder.Use was given a nil Middleware")
			continue
		}
		b.middleware = append(b.middleware, m)
	}
	return b
}

// Authorize sets the host's policy hook. It runs for every call once the
// caller holds the permissions the tool requires, before the input is read
// (the policy never sees it) and before confirmation; an error refuses the
// call with [CodePermissionDenied] (or the error's own code, for an
// [*Error]). It also decides what each caller sees listed: a tool it
// refuses is left out of GET /tools, MCP tools/list and the console (see
// [Registry.ToolsFor]), so it should depend on the caller and the tool
// alone. It may, for example, give a session only read tools:
//
//	b.Authorize(func(c carmy.Context, t carmy.ToolMetadata) error {
//		if !t.Effect.ReadOnly() && !c.Permissions.Has("write") {
//			return errors.New("this session may only read")
//		}
//		return nil
//	})
func (b *Builder) Authorize(policy func(Context, ToolMetadata) error) *Builder {
	b.authorize = policy
	return b
}

// Store sets where idempotency records are kept. The default is an
// in-memory store for this process ([store.NewMemoryStore]); use a shared
// one when several hosts serve the same tools.
func (b *Builder) Store(s store.IdempotencyStore) *Builder {
	b.store = s
	return b
}

// Locker sets the lock service that serializes tools that are not
// parallel-safe. The default serves this process; use a shared one when
// several hosts serve the same tools.
func (b *Builder) Locker(l store.Locker) *Builder {
	b.locker = l
	return b
}

// IdempotencyTTL sets how long an outcome is kept for replay. The default
// is [store.DefaultTTL].
func (b *Builder) IdempotencyTTL(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.IdempotencyTTL(%v) must be positive", d)
		return b
	}
	b.ttl = d
	return b
}

// IdempotencyWindow sets the age below which no idempotency record is
// evicted to make room, whatever the store's bounds: a retry within it
// gets the recorded outcome. A caller whose records fill its bound
// ([Builder.IdempotencyLimit], or the shared store's own) and are all
// younger gets [CodeUnavailable], retryable, with details.reason
// "capacity", for calls with a new request id, until its oldest record
// ages past the window; other callers are not affected. The default is
// [store.DefaultWindow]; it applies to the default store and to any store
// that implements [store.Windowed] (redisstore does), whose own setting it
// replaces when set here.
func (b *Builder) IdempotencyWindow(d time.Duration) *Builder {
	if d <= 0 {
		b.misuse("Builder.IdempotencyWindow(%v) must be positive", d)
		return b
	}
	b.window = d
	return b
}

// StoreURL sets the shared idempotency store and locker by URL, opened at
// Build by the package registered for its scheme with [store.Register].
func (b *Builder) StoreURL(url string) *Builder {
	b.storeURL = url
	return b
}

// IdempotencyLimit bounds the records the default in-memory store keeps per
// principal: a principal beyond it loses its own oldest record once older
// than the window ([Builder.IdempotencyWindow]), never another principal's,
// so that one caller flooding the registry with fresh request ids cannot
// make another caller's retry run twice. In-flight
// reservations are never evicted. The default is [store.DefaultLimit]; the
// store also holds at most the larger of [store.DefaultGlobalLimit] and n
// records in all, evicting from the principal that holds the most (to
// choose that cap, give the builder [store.NewMemoryStore] with
// [Builder.Store]).
func (b *Builder) IdempotencyLimit(n int) *Builder {
	if n <= 0 {
		b.misuse("Builder.IdempotencyLimit(%d) must be positive", n)
		return b
	}
	b.limit = n
	return b
}

// Build validates everything and returns the registry, or every problem
// found, joined with [errors.Join]; each is a [*BuildError] naming the tool
// and the file:line where it was declared.
func (b *Builder) Build() (*Registry, error) {
	errs := slices.Clone(b.errs)
	idem, locker := b.store, b.locker
	var storeClosers []func() error
	if b.storeURL != "" {
		s, l, err := store.Open(b.storeURL)
		if err != nil {
			errs = append(errs, &BuildError{Err: redactedError{err, b.storeURL}})
		} else {
			if idem == nil {
				idem = s
			}
			if locker == nil {
				locker = l
			}
			for _, v := range []any{s, l} {
				if c, ok := v.(io.Closer); ok {
					storeClosers = append(storeClosers, c.Close)
				}
			}
		}
	}
	if err := b.resolveOAuth(); err != nil {
		errs = append(errs, err)
	}
	if v, ok := b.auth.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			errs = append(errs, &BuildError{Err: err})
		}
	}
	auditors, auditErrs := b.openAuditors(&storeClosers)
	errs = append(errs, auditErrs...)
	errs = append(errs, b.checkEffectPermissions()...)
	r := &Registry{logger: b.logger, authorize: b.authorize, store: idem, locker: locker, ttl: b.ttl, workers: newWorkers()}
	r.table.Store(&toolTable{tools: map[string]*tool{}}) // filled here, before anyone reads it
	r.closers, r.auditors = storeClosers, auditors
	r.bodyLimit, r.elicit, r.stdioIdentity = b.bodyLimit, b.elicit, b.stdioIdentity
	r.life, r.end = context.WithCancel(context.Background())
	r.sessions = newSessionTable(b.sessionTimeout, b.maxSessions, b.sessionEnded)
	r.mcpConfig = b.mcpConfig.clone()
	r.tuning = b.tuning
	if r.logger == nil {
		r.logger = slog.Default()
	}
	mounted, mountErrs := b.mountTools(context.Background(), r)
	errs = append(errs, mountErrs...)
	sites := map[string]string{}
	for _, d := range append(b.defs[:len(b.defs):len(b.defs)], mounted...) {
		t, problems := b.prepare(d)
		for _, p := range problems {
			errs = append(errs, &BuildError{Tool: t.meta.Name, Site: d.site, Err: p})
		}
		if t.meta.Name == "" || len(problems) > 0 {
			continue
		}
		if other, dup := sites[t.meta.Name]; dup {
			errs = append(errs, &BuildError{Tool: t.meta.Name, Site: d.site, Err: fmt.Errorf("has the same name as the tool declared at %s; give one of them another Name", other)})
			continue
		}
		sites[t.meta.Name] = d.site
		b.setLimits(t)
		if len(t.meta.Requires) > 0 {
			r.requiring.Store(true)
		}
		r.tab().tools[t.meta.Name] = t
		r.tab().names = append(r.tab().names, t.meta.Name)
	}
	errs = append(errs, b.addSearchTool(r, sites)...)
	errs = append(errs, b.deferTools(r)...)
	errs = append(errs, b.checkToolRates(r)...)
	errs = append(errs, r.mcpConfig.loadSkills()...)
	errs = append(errs, b.buildPolicies(r)...)
	if err := errors.Join(errs...); err != nil {
		for _, c := range r.closers { // the store's and the mounts'
			_ = c()
		}
		return nil, err
	}
	slices.Sort(r.tab().names)
	if r.store == nil {
		r.store = store.NewMemoryStore(b.limit, 0)
		r.closers = append(r.closers, r.store.(io.Closer).Close)
	}
	if w, ok := r.store.(store.Windowed); ok && b.window > 0 {
		w.SetWindow(b.window)
	}
	r.publicURL = b.publicURL
	if o, ok := b.auth.(*oauthAuthenticator); ok && b.publicURL != "" {
		o.v.LocateAt(b.publicURL)
	}
	r.approvals = newApprovals(approvalStore(r.store), b.approvalTimeout)
	r.limiter, r.slots = limitersOf(r.store, b.tuning.limitClock)
	r.signer = mcpserve.NewSigner(b.stateKey, r.store)
	r.tasks = newTasks(taskStore(r.store), cmp.Or(b.taskTTL, DefaultTaskTTL), cmp.Or(b.tuning.taskLease, defaultTaskLease))
	if r.locker == nil {
		// A shared store that is also a locker serializes across hosts too;
		// keeping the in-memory locker would serialize per host only.
		if l, ok := r.store.(store.Locker); ok && b.store != nil {
			r.locker = l
		} else {
			r.locker = store.NewMemoryLocker()
		}
	}
	r.http = newHTTPDoor(b, r)
	r.observers = []observer{r.http}
	if len(auditors) > 0 {
		r.observers = append(r.observers, auditing{r})
	}
	for _, t := range r.tab().tools {
		t.handler = r.handlerFor(t, b.middleware)
	}
	// A tool a mount's upstream adds later is made with this Build's
	// settings: what the Builder is told after Build belongs to the
	// registries built after it.
	built := &Builder{timeout: b.timeout, effectPerms: maps.Clone(b.effectPerms), rate: b.rate, toolRates: maps.Clone(b.toolRates)}
	deferred, middleware := slices.Clone(b.deferred.Values), slices.Clone(b.middleware)
	r.prepare = func(d *ToolDef) (*tool, []error) {
		t, problems := built.prepare(d)
		if len(problems) > 0 {
			return nil, problems
		}
		built.setLimits(t)
		t.meta.Deferred = t.meta.Deferred || slices.Contains(deferred, t.meta.Name)
		t.handler = r.handlerFor(t, middleware)
		return t, nil
	}
	r.reindex()
	r.logUndescribed()
	r.startMounts()
	b.watchPolicies(r)
	return r, nil
}

// Skills serves the skills a host ships, with MCP's skills extension
// (SEP-2640, io.modelcontextprotocol/skills): each directory of fsys that
// holds a SKILL.md is a skill, named by its front matter's name (which
// must be its directory's name and follow the Agent Skills naming rules)
// and described by its description; every other file of fsys belongs to
// the skill whose directory holds it. MCP clients list them (skills/list),
// get one's entry (skills/get), and read each file as a resource at
// skill://<directory>/<file>, with its sha256 digest and size.
//
// carmy also serves a skill of its own, skill://carmy/tool-rules/SKILL.md,
// written for each caller from the tools that caller may list: which need
// a person and how to wait, limits and how to back off, tasks, and request
// ids for safe retries. fsys may be nil to serve that skill alone.
//
// Build checks the folder: a skill without a valid SKILL.md, a name the
// extension refuses, a skill over 512 files or 16 MiB, or a file that
// belongs to no skill is a [*BuildError] naming the file. The files are
// read once, at Build.
func (b *Builder) Skills(fsys fs.FS) *Builder {
	b.mcpConfig.skillsOn, b.mcpConfig.skillsFS = true, fsys
	return b
}

// logUndescribed logs, in one line, the tools that reach a model with no
// description: neither a Description nor a doc comment that carmy gen
// registered, as in a module where go generate was not run.
func (r *Registry) logUndescribed() {
	var names []string
	tab := r.tab()
	for _, n := range tab.names {
		if tab.tools[n].meta.Description == "" {
			names = append(names, n)
		}
	}
	if len(names) > 0 {
		r.logger.Warn("carmy: tools without a description reach the model with an empty one; run go generate (carmy gen registers their doc comments) or give them carmy.Description",
			"tools", strings.Join(names, ", "))
	}
}

// redactedError is an error of opening the store URL, which may hold a
// password: its text shows the URL with the password masked. The cause
// stays reachable with errors.As for the host's own handling.
type redactedError struct {
	err error
	url string
}

func (e redactedError) Error() string {
	return "store: " + strings.ReplaceAll(e.err.Error(), e.url, redactURL(e.url))
}

func (e redactedError) Unwrap() error { return e.err }

// redactURL masks the password of a URL, also in one that does not parse
// or has no scheme.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	prefix, userinfo := "", raw[:at]
	if i := strings.Index(userinfo, "://"); i >= 0 {
		prefix, userinfo = userinfo[:i+3], userinfo[i+3:]
	}
	user, _, hasPassword := strings.Cut(userinfo, ":")
	if !hasPassword {
		return raw
	}
	return prefix + user + ":xxxxx" + raw[at:]
}

// states resolves the value of State[T].
func (b *Builder) stateValue(t reflect.Type) (reflect.Value, error) {
	var found []any
	for _, v := range b.states {
		vt := reflect.TypeOf(v)
		if vt == t || (t.Kind() == reflect.Interface && vt.Implements(t)) {
			found = append(found, v)
		}
	}
	switch len(found) {
	case 0:
		return reflect.Value{}, fmt.Errorf("needs carmy.State[%s], but the builder has no value of that type: provide one with Builder.State", t)
	case 1:
		return reflect.ValueOf(found[0]), nil
	}
	types := make([]string, len(found))
	for i, v := range found {
		types[i] = reflect.TypeOf(v).String()
	}
	return reflect.Value{}, fmt.Errorf("needs carmy.State[%s], and %d provided values fit it (%v); provide exactly one", t, len(found), types)
}
