package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/console"
)

// Announce gives the person who started the server at addr the console
// URL with its secret: printed when the console output is a terminal,
// and written to a file only the user can read, where `carmy approvals`
// finds it and whose path (never the secret) is logged. The file is
// removed when the registry closes ([Server.Close]). It returns the base
// URL of the server, for approval links of calls that came by no HTTP
// request.
func (s *Server) Announce(addr net.Addr) string {
	base := "http://" + addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		base = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	if s.console.secret == "" {
		return base
	}
	link := s.ConsoleURL(base)
	if s.cfg.ConsoleTerminal {
		fmt.Fprintf(s.cfg.ConsoleOut, "carmy: to see the tools and approve calls, open %s\n", link)
	}
	path, err := s.writeConsoleFile(link)
	if err != nil {
		if !s.cfg.ConsoleTerminal {
			s.cfg.Logger.Error("carmy: cannot write the console URL to a file: the console cannot decide approvals", "error", err)
		}
		return base
	}
	s.cfg.Logger.Info("carmy: the console URL, with the secret that approves calls, is in a file only this user can read", "path", path, "console", base+"/console")
	return base
}

// writeConsoleFile writes a console's link with its secret to a file only
// the user can read, which the registry removes when it closes.
func (s *Server) writeConsoleFile(link string) (string, error) {
	path, err := console.WriteFile(link)
	if err != nil {
		return "", err
	}
	s.consoleFiles.add(path)
	return path, nil
}

// Close removes the files holding console links, and any written after:
// the registry closes.
func (s *Server) Close() error { return s.consoleFiles.remove() }

// consoleFiles are the files holding console links that the registry
// wrote, removed when it closes: a link must not outlive its server, and
// `carmy approvals` must not list a server that is gone.
type consoleFiles struct {
	mu     sync.Mutex
	paths  []string
	closed bool
}

func (f *consoleFiles) add(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = os.Remove(path)
		return
	}
	f.paths = append(f.paths, path)
}

// remove removes the files, and any written after.
func (f *consoleFiles) remove() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var errs []error
	for _, p := range f.paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	f.paths = nil
	return errors.Join(errs...)
}

// loopbackConsole is the console carmy serves on a loopback port that the
// system picks, for the person at the client of a single-client transport
// (stdio) to decide approvals: opened the first time such a client needs
// it, closed with the registry. It serves the console's page, its assets
// and the approvals of the session's principal, those behind its own
// secret, and nothing else: no tool, no MCP, nothing that acts as the
// stdio principal, which any local program could otherwise do there.
type loopbackConsole struct {
	once sync.Once
	base string
	auth *Console
	err  error
	// open is base once the console serves, read without the once.
	open atomic.Pointer[string]
}

// LocalConsole returns the base URL and the secret of the registry's
// loopback console, opening it on the first call: it writes the link with
// the secret to a file only the user can read, where `carmy approvals`
// finds it.
func (s *Server) LocalConsole(ctx context.Context) (string, *Console, error) {
	lc := &s.loopback
	lc.once.Do(func() {
		if s.cfg.Life.Err() != nil {
			lc.err = errors.New("the registry is closed")
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lc.err = err
			return
		}
		lc.auth = newConsole(false)
		lc.auth.codes.TTL = s.cfg.CodeTTL
		srv := &http.Server{Handler: s.loopbackHandler(lc.auth), ReadHeaderTimeout: s.cfg.ReadHeader, IdleTimeout: s.cfg.Idle,
			MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}
		go func() { _ = srv.Serve(ln) }()
		context.AfterFunc(s.cfg.Life, func() { _ = srv.Close() })
		lc.base = "http://" + ln.Addr().String()
		lc.open.Store(&lc.base)
		path, err := s.writeConsoleFile(lc.base + "/console?token=" + lc.auth.secret)
		if err != nil {
			s.cfg.Logger.Error("carmy: cannot write the console's link to a file: carmy approvals cannot find this server", "error", err)
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "carmy: serving the console for approvals", slog.String("addr", ln.Addr().String()), slog.String("path", path))
	})
	return lc.base, lc.auth, lc.err
}

// PersonalLink is the page where the person at a single-client
// transport's client decides on approval id: the console of the server
// that link (the approval's URL, if any) is on, else the loopback console,
// opened on the first need. The URL carries a one-time code that the page
// exchanges for the console secret, if the console has one: the client
// hands it to its user, not to the model.
func (s *Server) PersonalLink(ctx context.Context, id, link string) (string, error) {
	c := s.console
	base, ok := strings.CutSuffix(link, "/console?approval="+url.QueryEscape(id))
	if !ok || base == "" {
		var err error
		if base, c, err = s.LocalConsole(ctx); err != nil {
			return "", err
		}
	}
	return linkWithCode(base, c, url.Values{"approval": {id}}), nil
}

// LoopbackLink is the link to approval id on the loopback console, if it
// serves: the page alone, with neither its secret nor a one-time code, so
// that a model that reads it (in a task's status message) gains nothing;
// the person opens it with the secret that `carmy approvals` and the
// server's own output give them. It is "" before the console opens.
func (s *Server) LoopbackLink(id string) string {
	base := s.loopback.open.Load()
	if base == nil {
		return ""
	}
	return *base + "/console?approval=" + url.QueryEscape(id)
}

// personKey is the context key of the person a loopback console's request
// comes from: the holder of its secret.
type personKey struct{}

// loopbackHandler is the loopback console's handler, behind the boundary
// every handler of the registry keeps.
func (s *Server) loopbackHandler(c *Console) http.Handler {
	who := approve.Who{Principal: s.cfg.StdioPrincipal, Console: true, Scoped: true}
	person := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if !c.holds(req) {
				s.refuse(w, req, "", http.StatusForbidden, &Error{Code: codePermissionDenied,
					Message: "this console is the person's at the MCP client: open the link their client showed (it works once), or run `carmy approvals` in a terminal",
					Details: map[string]any{"reason": "console_secret"}})
				return
			}
			h(w, req.WithContext(context.WithValue(req.Context(), personKey{}, who)))
		}
	}
	mux := http.NewServeMux()
	mountPage(mux)
	mux.HandleFunc("POST /console/exchange", s.serveExchange(c))
	mux.HandleFunc("POST "+console.ChallengePath, serveChallenge(c))
	mux.HandleFunc("GET /console/session", func(w http.ResponseWriter, req *http.Request) {
		s := consoleSession{Console: true, ApprovalsOnly: true}
		if c.holds(req) {
			s.Principal, s.Approver = who.Principal, true
		}
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("GET /approvals", person(authenticated(s, s.caller, s.serveApprovals)))
	mux.HandleFunc("GET /approvals/{id}", person(authenticated(s, s.caller, s.serveApproval)))
	mux.HandleFunc("POST /approvals/{id}/approve", person(authenticated(s, s.caller, s.serveDecision(true))))
	mux.HandleFunc("POST /approvals/{id}/deny", person(authenticated(s, s.caller, s.serveDecision(false))))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeOwnError(w, errorf(codeNotFound, "no such endpoint %s %s: this console serves a person's approvals only (GET /console, /approvals)", req.Method, req.URL.Path))
	})
	return s.protect(mux, nil, nil)
}
