package carmy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/guard"
)

// httpServer is a registry's HTTP surface: its routes (each group in its
// own file), the one login check of every route that needs its caller,
// /mcp included ([authenticated], [login]), the limits of a request, and the shutdown of the
// servers that serve it. The registry keeps the runtime: a route calls
// it, and nothing of the registry's lifetime ends with a server.
type httpServer struct {
	r      *Registry
	auth   Authenticator // nil: every caller is the anonymous principal ""
	limits httpLimits
	// hosts and origins are what the boundary lets in besides its own.
	hosts   []guard.Host
	origins []string
	health  *health
	// console is the console of these routes, with its secret; loopback
	// the one served for a stdio client's user; consoleFiles hold their
	// links, removed when the registry closes.
	console      *consoleAuth
	loopback     loopbackConsole
	consoleFiles consoleFiles

	once    sync.Once
	handler http.Handler
}

// httpLimits bound what one request may take of a server.
type httpLimits struct {
	body       int64         // bytes of a body, every route
	bodyRead   time.Duration // for a body to arrive after its headers
	readHeader time.Duration // for the headers to arrive
	idle       time.Duration // a kept-alive connection without a request
}

// maxHeaderBytes bounds a request's headers.
const maxHeaderBytes = 64 << 10

func newHTTPServer(b *Builder, r *Registry) *httpServer {
	s := &httpServer{r: r, auth: b.auth, hosts: slices.Clone(b.allowHosts), origins: slices.Clone(b.allowOrigins),
		limits:  httpLimits{body: b.bodyLimit, bodyRead: b.tuning.bodyRead(), readHeader: b.tuning.readHeader(), idle: b.tuning.idle()},
		console: newConsoleAuth(b.auth != nil)}
	s.console.codes.TTL = b.tuning.codeTTL
	return s
}

// routes is the handler of [Registry.Handler], built on its first use.
func (s *httpServer) routes() http.Handler {
	s.once.Do(func() {
		mux := http.NewServeMux()
		s.mountTools(mux)
		s.mountHealth(mux)
		mux.Handle("/mcp", s.mcp())
		s.mountApprovals(mux)
		s.mountTasks(mux)
		s.mountConsole(mux)
		s.mountWellKnown(mux) // OAuth: protected resource metadata
		mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
			writeError(w, Errorf(CodeNotFound, "no such endpoint %s %s; see GET /tools, POST /tools/{name}, /mcp, GET /healthz, /approvals, /tasks, GET /console", req.Method, req.URL.Path))
		})
		s.handler = s.protect(mux, s.hosts, s.origins)
	})
	return s.handler
}

// mcp is the MCP door at /mcp, which asks the one login check of the
// routes ([login]) for each request. A GET is a stream that only its
// client or the server ends, so the server's shutdown ends it.
func (s *httpServer) mcp() http.Handler {
	door := s.r.mcpServer().HTTPHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet {
			ctx, end := s.streaming(req.Context())
			defer end()
			req = req.WithContext(ctx)
		}
		door.ServeHTTP(w, req)
	})
}

// streamsKey is the context key, in the requests of a server that
// [httpServer.serve] runs, of the context that ends when that server
// shuts down.
type streamsKey struct{}

// streaming returns ctx, a request's, ended also when the server serving
// it shuts down (or, outside such a server, when the registry closes):
// for answers that wait (an MCP stream, a ?wait= long poll), which never
// end on their own as calls do, and which a shutdown must not wait for.
// The registry and the other servers of it go on.
func (s *httpServer) streaming(ctx context.Context) (context.Context, context.CancelFunc) {
	ends, ok := ctx.Value(streamsKey{}).(context.Context)
	if !ok {
		ends = s.r.streams
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ends, cancel)
	return ctx, func() { stop(); cancel() }
}

// longPoll is the context of a ?wait= long poll of req (wait, as sent):
// done after that long, at most limit, or at this server's shutdown,
// which answers it at once. A wait that is not a duration is invalid
// input, nothing waits, and err says why.
func (s *httpServer) longPoll(req *http.Request, wait string, limit time.Duration) (context.Context, context.CancelFunc, error) {
	d, err := time.ParseDuration(wait)
	if err != nil || d < 0 {
		return nil, nil, Errorf(CodeInvalidInput, "wait=%q is not a duration such as 30s", wait)
	}
	stream, end := s.streaming(req.Context())
	ctx, cancel := context.WithTimeout(stream, min(d, limit))
	return ctx, func() { cancel(); end() }, nil
}

// serve serves the routes on ln until ctx is done, then shuts down
// gracefully within drain: it stops accepting, ends this server's streams
// and long polls, and lets running calls finish. Only this server stops:
// the registry's tasks, its MCP sessions and its other servers go on until
// [Registry.Close].
func (s *httpServer) serve(ctx context.Context, ln net.Listener, drain time.Duration, host bool) error {
	// Ended by this server's shutdown, and by the registry's closing.
	streams, endStreams := context.WithCancel(s.r.streams)
	defer endStreams()
	srv := &http.Server{
		Handler: s.routes(),
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), streamsKey{}, streams)
		},
		ReadHeaderTimeout: s.limits.readHeader, // against clients that trickle headers
		IdleTimeout:       s.limits.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.r.logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(endStreams)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("carmy: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if host {
		// The host goes away with this server: its tasks get the same
		// time, and none is left for its lease to lapse.
		s.r.drainTasks(sctx)
	}
	<-served
	if err != nil {
		srv.Close()
		return fmt.Errorf("carmy: calls still running after the drain timeout of %v were cut off: %w", drain, err)
	}
	return nil
}
