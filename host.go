package carmy

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// ElicitConfirmation lets MCP clients over HTTP, too, be asked to confirm
// a call that needs confirmation, with a form that shows the person at the
// client the call's input: accepted, the call runs once; declined, it is
// refused. Clients of a single-client transport (stdio, [Registry.ServeMCP])
// are asked by default, as their application is the person's own channel;
// over HTTP it is off by default, because a client there may answer forms
// on its own, which would hand the decision to the client instead of a
// person. [Builder.NoFormConfirmation] turns forms off on every transport;
// the two contradict each other.
func (b *Builder) ElicitConfirmation() *Builder {
	if b.elicit == formNever {
		b.misuse("Builder.ElicitConfirmation contradicts Builder.NoFormConfirmation")
		return b
	}
	b.elicit = formEverywhere
	return b
}

// NoFormConfirmation turns confirmation by form elicitation off on every
// transport, stdio included, for a host that cannot trust its clients to
// show a form to a person (a client that answers forms by itself could
// confirm anything it is shown). A call that needs confirmation then waits
// for a person's approval in the console: a client that can open a page for
// its user (URL elicitation) is sent there, and a host may still grant
// confirmation by permission. It contradicts [Builder.ElicitConfirmation].
func (b *Builder) NoFormConfirmation() *Builder {
	if b.elicit == formEverywhere {
		b.misuse("Builder.NoFormConfirmation contradicts Builder.ElicitConfirmation")
		return b
	}
	b.elicit = formNever
	return b
}

// formConfirmation is where calls are confirmed by form elicitation.
type formConfirmation int8

const (
	formSingleClient formConfirmation = iota // the default: stdio and other single-client transports
	formEverywhere                           // ElicitConfirmation: over HTTP too
	formNever                                // NoFormConfirmation
)

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
	r.logger.Info("carmy: serving", "addr", ln.Addr().String(), "tools", len(r.names))
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
// readHeaderTimeout to send a request's headers, and a kept-alive
// connection is closed after idleTimeout without a request.
const (
	readHeaderTimeout = 10 * time.Second
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
	// connection sends its client progress; 0 is personProgressEvery.
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
