package carmy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/carmy-dev/carmy/internal/guard"
	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// Version is carmy's version, as MCP clients see it.
const Version = "0.1.0"

// Defaults of the server.
const (
	DefaultAddr         = "127.0.0.1:3000"
	DefaultDrainTimeout = 30 * time.Second
)

// Authenticate sets how the HTTP API and the MCP endpoint learn who is
// calling. Without one every caller is the anonymous principal "", and
// [Builder.Listen] refuses addresses other than loopback.
func (b *Builder) Authenticate(a Authenticator) *Builder {
	b.auth = a
	return b
}

// AllowUnauthenticated lets [Builder.Listen] serve a non-loopback address
// without an [Authenticator]: anyone who can reach it can call every tool.
func (b *Builder) AllowUnauthenticated() *Builder {
	b.allowAnonymous = true
	return b
}

// BodyLimit sets the largest message carmy reads: a request body of the
// HTTP API or of /mcp (larger ones are refused with status 413), and each
// line of MCP over stdio (a longer one gets a JSON-RPC error and the
// server reads on). The default is [DefaultBodyLimit].
func (b *Builder) BodyLimit(n int64) *Builder {
	if n <= 0 {
		b.misuse("Builder.BodyLimit(%d) must be positive", n)
		return b
	}
	b.bodyLimit = n
	return b
}

// Addr sets the address [Builder.Run] listens on. The default is
// [DefaultAddr].
func (b *Builder) Addr(addr string) *Builder {
	b.addr = addr
	return b
}

// DrainTimeout sets how long a server that is shutting down lets running
// calls finish. The default is [DefaultDrainTimeout].
func (b *Builder) DrainTimeout(d time.Duration) *Builder {
	b.drain = d
	return b
}

// StdioIdentity sets who calls through [Builder.RunStdio]: the local user
// who started the server. The default is the anonymous principal "".
func (b *Builder) StdioIdentity(id Identity) *Builder {
	b.stdioIdentity = id
	return b
}

// Listen builds the registry and serves its [Registry.Handler] on addr
// until ctx is done, then shuts down gracefully: it stops accepting, lets
// running calls finish for the drain timeout, and closes the registry. A
// non-loopback address without an [Authenticator] is refused unless
// [Builder.AllowUnauthenticated] was called. Without an authenticator, it
// prints the console's URL with its secret ([Registry.ConsoleURL]) to
// standard error, for the person who decides approvals.
func (b *Builder) Listen(ctx context.Context, addr string) error {
	r, err := b.Build()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := b.checkExposure(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("carmy: %w", err)
	}
	r.logger.Info("carmy: serving", "addr", ln.Addr().String(), "tools", len(r.tab().names))
	r.http.announceConsole(ln.Addr())
	return r.http.serve(ctx, ln, b.drainTimeout(), true)
}

// Run is [Builder.Listen] on the configured address ([Builder.Addr],
// carmy.toml or CARMY_LISTEN for [App], else [DefaultAddr]). A builder from
// [App] also shuts down on SIGINT and SIGTERM.
func (b *Builder) Run(ctx context.Context) error {
	if b.signals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	addr := b.addr
	if addr == "" {
		addr = DefaultAddr
	}
	return b.Listen(ctx, addr)
}

// RunStdio builds the registry and serves MCP on standard input and
// output, for local agent clients that start the server themselves, until
// ctx is done, the client closes the connection, or the process gets
// SIGINT or SIGTERM. Logs must not go to standard output. A call that
// needs confirmation asks the person at the client by form, or sends them
// to a console served on a loopback port, as [Builder.NoFormConfirmation]
// tells; a client that can do neither is refused with what the person can
// do instead (`carmy approvals` in a terminal, which finds the console
// through a file only the user can read). That file is removed when
// RunStdio returns, the signals included.
func (b *Builder) RunStdio(ctx context.Context) error {
	r, err := b.Build()
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return r.ServeStdio(ctx, os.Stdin, os.Stdout)
}

// ServeStdio serves MCP over a pair of streams, as [Builder.RunStdio] does
// over standard input and output: one JSON-RPC message per line. A line
// that is not a message (malformed JSON, a member name twice, longer than
// the body limit) gets a JSON-RPC error and the server reads on. When the
// input ends, the requests already read are answered before it returns.
func (r *Registry) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return r.ServeMCP(ctx, mcpserve.Stdio(in, out, r.bodyLimit, r.logger))
}

// Serve serves the registry's [Registry.Handler] on ln until ctx is done,
// then shuts down gracefully within drain: no new connections, running
// calls finish, this server's MCP streams and ?wait= long polls end (a long
// poll answers with what it waits on as it stands). Only this server stops:
// the registry, its tasks, its MCP sessions and its other servers go on
// until [Registry.Close]. It returns nil after a shutdown that ctx asked
// for.
func (r *Registry) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	return r.http.serve(ctx, ln, drain, false)
}

// The server's timeouts against slow and idle clients: a client has
// readHeaderTimeout to send a request's headers, and bodyReadTimeout,
// counted from when its headers were read, to send its body; a
// kept-alive connection is closed after idleTimeout without a request.
const (
	readHeaderTimeout = 10 * time.Second
	bodyReadTimeout   = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

func (b *Builder) drainTimeout() time.Duration {
	if b.drain > 0 {
		return b.drain
	}
	return DefaultDrainTimeout
}

// checkExposure refuses to serve a non-loopback address to anonymous
// callers unless the host said so.
func (b *Builder) checkExposure(addr string) error {
	if b.auth != nil || b.allowAnonymous {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("carmy: bad listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("carmy: refusing to listen on %s without authentication: anyone who reaches it could call every tool; set an Authenticator (or tokens in carmy.toml), listen on 127.0.0.1, or call AllowUnauthenticated", addr)
}

// tuning holds the serving settings that no option sets, because their
// defaults suit every host: the server's timeouts against slow clients and
// where the console URL is announced. Tests shorten the timeouts and catch
// the announcement; the settings belong to each builder, and to the
// registry it builds, rather than to the package, so that those tests run
// in parallel with the others. The zero value is the defaults.
type tuning struct {
	bodyReadTimeout   time.Duration // 0: bodyReadTimeout
	readHeaderTimeout time.Duration // 0: readHeaderTimeout
	idleTimeout       time.Duration // 0: idleTimeout

	// consoleOut receives the console URL when consoleTerminal says a
	// person reads it; nil is standard error, a terminal when it is one.
	consoleOut      io.Writer
	consoleTerminal bool

	// limitClock is the clock of the in-process limiter; nil is time.Now.
	limitClock func() time.Time
	// codeTTL is how long a console link's one-time code waits for its
	// use; 0 is console.CodeTTL.
	codeTTL   time.Duration
	taskLease time.Duration // 0: defaultTaskLease
	// personProgress is how often a call that waits for a person over a
	// connection sends its client progress; 0 is every 5 seconds.
	personProgress time.Duration
}

func (t *tuning) bodyRead() time.Duration {
	if t.bodyReadTimeout > 0 {
		return t.bodyReadTimeout
	}
	return bodyReadTimeout
}

func (t *tuning) readHeader() time.Duration {
	if t.readHeaderTimeout > 0 {
		return t.readHeaderTimeout
	}
	return readHeaderTimeout
}

func (t *tuning) idle() time.Duration {
	if t.idleTimeout > 0 {
		return t.idleTimeout
	}
	return idleTimeout
}

// console returns where the console URL is announced, and whether a
// person reads it there.
func (t *tuning) console() (w io.Writer, terminal bool) {
	if t.consoleOut != nil {
		return t.consoleOut, t.consoleTerminal
	}
	return os.Stderr, isTerminal(os.Stderr)
}

// isTerminal reports whether w is a terminal, where a person reads. Under
// systemd, Docker or Kubernetes, standard error is a pipe or a file that a
// log collector reads, and whoever reads the logs would get the
// approver's rights.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// MinStateKeySize is the shortest key [Builder.StateKey] takes, in bytes.
const MinStateKeySize = 32

// The MCP door makes and takes signing keys of the size the builder takes
// (this index is out of range, and does not compile, otherwise).
var _ = [1]struct{}{}[MinStateKeySize-mcpserve.MinKeySize]

// StateKey sets the key that signs the request state the registry hands
// clients of the sessionless MCP protocol (2026-07-28): a confirmation a
// person gave in one round of a call, and the question asked of them, are
// honoured in the next round only when signed with this key. State signed
// by one registry never verifies in another, so a confirmation given to a
// staging registry is never taken by a production one in the same process.
//
// Without StateKey, a registry whose idempotency store keeps shared keys
// ([store.KeyStore]: the in-memory store, redisstore) takes the store's
// key, made at random once: the hosts of one deployment share it, and a
// call's next round verifies on whichever host it lands; registries that
// share no store share no key. Give every host of a deployment the same
// key here (or state_key in carmy.toml, CARMY_STATE_KEY) when their store
// keeps none. The key must be at least [MinStateKeySize] random bytes,
// kept secret; the builder keeps its own copy.
func (b *Builder) StateKey(key []byte) *Builder {
	if len(key) < MinStateKeySize {
		b.misuse("Builder.StateKey was given %d bytes; give at least %d random bytes", len(key), MinStateKeySize)
		return b
	}
	b.stateKey = slices.Clone(key)
	return b
}

// AllowHosts adds names that a request may carry in its Host header,
// besides localhost, 127.0.0.1 and [::1]: the names under which a reverse
// proxy forwards to the server, or under which its callers reach it. A
// server without an [Authenticator] checks the Host of every request,
// wherever it arrived (in a container, requests published on the host's
// 127.0.0.1 arrive on the container's own address); one with an
// authenticator checks requests that arrived on a loopback address. A
// name without a port, "tools.example.com", matches any port;
// "tools.example.com:8443" matches that port only. Every other Host is
// refused with 403 on every route but the health checks (/healthz,
// /readyz, /livez), so that a web page whose
// domain an attacker rebinds to the server's address cannot reach the
// tools.
func (b *Builder) AllowHosts(hosts ...string) *Builder {
	for _, h := range hosts {
		k, err := guard.ParseHost(h)
		if err != nil {
			b.misuse("Builder.AllowHosts(%q): %v", h, err)
			continue
		}
		b.allowHosts = append(b.allowHosts, k)
	}
	return b
}

// AllowOrigins adds browser origins, "scheme://host[:port]" exactly as a
// browser sends them in its Origin header, whose pages may call the
// server. Every other cross-origin request from a browser (an Origin that
// is not the server's own, or Sec-Fetch-Site other than same-origin or
// none) is refused with 403 on every route, /mcp included. Requests from
// programs, which send neither header, are not affected.
//
// The pages of an allowed origin get CORS: their preflight requests are
// answered, and they may send the Authorization, Content-Type,
// Idempotency-Key and MCP headers, and read the answers.
func (b *Builder) AllowOrigins(origins ...string) *Builder {
	for _, o := range origins {
		if err := guard.CheckOrigin(o); err != nil {
			b.misuse("Builder.AllowOrigins(%q): %v", o, err)
			continue
		}
		b.allowOrigins = append(b.allowOrigins, o)
	}
	return b
}

// DefaultBodyLimit is the largest message carmy reads by default: see
// [Builder.BodyLimit].
const DefaultBodyLimit = 1 << 20

// PublicURL names the address clients reach the server at, such as
// "https://tools.example.com", when it is not the one requests arrive
// with: behind a reverse proxy that rewrites Host or terminates TLS.
// Approval links (approval_url, and the page sent by MCP URL elicitation)
// and the OAuth protected-resource metadata, when [OAuthConfig].Audience
// is not a URL, are then built from it instead of the request's Host and
// scheme. Request headers such as X-Forwarded-Host are never trusted for
// this. It is public_url in carmy.toml and CARMY_PUBLIC_URL.
func (b *Builder) PublicURL(u string) *Builder {
	base, err := checkPublicURL(u)
	if err != nil {
		b.misuse("Builder.PublicURL: %v", err)
		return b
	}
	b.publicURL = base
	return b
}

// checkPublicURL returns an absolute http(s) URL with a host, without its
// trailing slash, or says why it is not one.
func checkPublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL with a host and no query, such as \"https://tools.example.com\"", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
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

// OnMCPSessionEnd adds f to the functions told of every MCP session that
// ends, over streamable HTTP or stdio, with when it started and ended (for
// a metric of session durations, as otelcarmy records). f runs on the
// goroutine that ended the session, never while a lock of carmy's is
// held; it must not block for long.
func (b *Builder) OnMCPSessionEnd(f func(MCPSession)) *Builder {
	if f == nil {
		b.misuse("Builder.OnMCPSessionEnd(nil)")
		return b
	}
	b.sessionEnded = append(b.sessionEnded, f)
	return b
}

// DefaultHealthGrace is how long a host may be unable to reach its store
// before its health and readiness checks fail, unless the host sets
// another ([Builder.HealthGrace]).
const DefaultHealthGrace = 5 * time.Second

// HealthGrace sets how long the store ([Builder.Store], [Builder.Locker],
// [Builder.StoreURL]) may be out of reach, as seen by the health checks,
// before GET /healthz and GET /readyz answer 503: a short blip does not
// drain the host, a partition does, so that the load balancer sends calls
// to the hosts that can keep their promises. The default is
// [DefaultHealthGrace]; 0 fails the checks at the first failed ping. A
// store reports its reachability by implementing [store.Pinger]; the
// in-memory default is always reachable.
func (b *Builder) HealthGrace(d time.Duration) *Builder {
	if d < 0 {
		b.misuse("Builder.HealthGrace(%v): the grace must not be negative", d)
		return b
	}
	b.healthGrace = &d
	return b
}

func (b *Builder) healthGraceOrDefault() time.Duration {
	if b.healthGrace == nil {
		return DefaultHealthGrace
	}
	return *b.healthGrace
}
