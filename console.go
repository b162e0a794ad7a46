package carmy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/console"
)

// consoleHeader carries the console secret from the console's page. Not a
// cookie: browsers send a host's cookies to every port of it, so another
// local server a person's browser visits would receive it, and with it
// the approver's rights. The page keeps the secret in its origin's
// storage, which no other origin reads, and a header is sent only by code
// that holds it; another origin's page would need a preflight to send it,
// which the server never grants.
const consoleHeader = console.Header

// consoleAuth is a console's secret: that of a server without an
// authenticator, made at Build, new with every registry, which alone
// grants the approver's rights there, and that of the console served on
// a loopback port for a single-client session's person. Its holder is the
// person who started the server and read the console URL it printed, or
// the person at the client; an agent that calls the tools never has it.
// Links sent to a client carry a one-time code for it instead (codes).
type consoleAuth struct {
	secret string // "" with an authenticator
	codes  console.Codes
}

func newConsoleAuth(authenticated bool) *consoleAuth {
	if authenticated {
		return &consoleAuth{}
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	return &consoleAuth{secret: hex.EncodeToString(b[:])}
}

// holds reports whether a request carries the console secret, in its
// header.
func (c *consoleAuth) holds(req *http.Request) bool {
	v := req.Header.Values(consoleHeader)
	return len(v) == 1 && c.matches(v[0])
}

func (c *consoleAuth) matches(s string) bool {
	return c.secret != "" && subtle.ConstantTimeCompare([]byte(s), []byte(c.secret)) == 1
}

// ConsoleURL returns the URL of the console on a server at base, such as
// "http://127.0.0.1:3000". On a registry without an [Authenticator] it
// carries the console secret, which alone grants the right to decide
// approvals there: give it only to the person who decides, never to an
// agent. [Builder.Listen] prints it at start when standard error is a
// terminal, and writes it to a file only the user can read, whose path it
// logs and which it removes when it returns (`carmy approvals` finds the
// server there). The console's page keeps the secret in its own origin and
// sends it in a header, never in a cookie. With an authenticator, the
// console asks for a token, whose permissions decide what it may do.
func (r *Registry) ConsoleURL(base string) string {
	if r.http.console.secret == "" {
		return base + "/console"
	}
	return base + "/console?token=" + r.http.console.secret
}

func (s *httpServer) mountConsole(mux *http.ServeMux) {
	mountPage(mux)
	mux.HandleFunc("POST /console/exchange", s.serveExchange(s.console))
	mux.HandleFunc("POST "+console.ChallengePath, serveChallenge(s.console))
	mux.HandleFunc("GET /console/session", authenticated(s, s.caller, s.serveConsoleSession))
	mux.HandleFunc("GET /console/executions", authenticated(s, s.caller, s.serveExecutions))
}

// mountPage serves the console's page and its assets: the same files in
// every binary, which hold no data.
func mountPage(mux *http.ServeMux) {
	mux.HandleFunc("GET /console", serveConsole)
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetsOnly(http.FileServerFS(console.Files))))
}

// assetsOnly serves the page's script and style sheet, never a directory's
// listing, nor the page itself, which /console serves with its headers.
func assetsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if p := req.URL.Path; !strings.HasSuffix(p, ".js") && !strings.HasSuffix(p, ".css") {
			writeError(w, Errorf(CodeNotFound, "no such asset"))
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, req)
	})
}

// serveConsole serves the console's page. Opened with the console secret
// (?token=), or with a one-time code (?code=) that it exchanges for the
// secret at POST /console/exchange, the page keeps the secret in its
// origin's storage and takes it out of the address bar; the server sets
// no cookie.
func serveConsole(w http.ResponseWriter, req *http.Request) {
	page, err := console.Files.ReadFile("index.html")
	if err != nil {
		writeError(w, Errorf(CodeInternal, "the console is missing"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	// Nothing but its own files: no inline script, no other origin.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(page)
}

// serveExchange exchanges a one-time code of c, which a link sent to a
// client carries, for c's secret: once, within the code's time to live,
// from the console's own page (or a program), with a JSON body. A link
// read later from a process list, a log or a browser's history grants
// nothing.
func (s *httpServer) serveExchange(c *consoleAuth) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if e := s.decisionRefused(req); e != nil {
			s.refuse(w, req, "", e.status, e.Error)
			return
		}
		var body struct {
			Code string `json:"code"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || body.Code == "" {
			writeError(w, Errorf(CodeInvalidInput, `send {"code": "..."}: the one-time code of the console link`))
			return
		}
		if c.secret == "" || !c.codes.Redeem(body.Code) {
			s.refuse(w, req, "", http.StatusForbidden, &Error{Code: CodePermissionDenied,
				Message: fmt.Sprintf("this console link was used before or has expired: a link works once, within %v; run `carmy approvals` in a terminal, or make the call again for a new link", console.CodeTTL),
				Details: map[string]any{"reason": "code_used_or_expired"}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"secret": c.secret})
	}
}

// serveChallenge answers the challenge of `carmy approvals`, which makes
// sure that the server behind a console file is the one that wrote it
// before it sends that file's secret anywhere: the proof (an HMAC of the
// nonce, keyed by c's secret) shows that the server knows the secret, and
// never reveals it.
func serveChallenge(c *consoleAuth) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c.secret == "" {
			writeError(w, Errorf(CodeNotFound, "this server has no console secret"))
			return
		}
		var body struct {
			Nonce string `json:"nonce"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || len(body.Nonce) < console.MinNonce || len(body.Nonce) > console.MaxNonce {
			writeError(w, Errorf(CodeInvalidInput, `send {"nonce": "..."}: %d to %d random characters`, console.MinNonce, console.MaxNonce))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]string{"proof": console.Proof(c.secret, body.Nonce)})
	}
}

// linkWithCode is the console link at base that a client is sent, with a
// one-time code of c instead of its secret, and the query q.
func linkWithCode(base string, c *consoleAuth, q url.Values) string {
	if c.secret != "" {
		q.Set("code", c.codes.Mint())
	}
	return base + "/console?" + q.Encode()
}

// consoleSession is what the console learns about its caller.
type consoleSession struct {
	Principal string `json:"principal"`
	// Approver: the caller decides approvals of some tool.
	Approver bool `json:"approver"`
	// Authenticated: the server has an authenticator, so the page sends a
	// token; without one, the console secret makes an approver.
	Authenticated bool `json:"authenticated"`
	// Console: the server has a console secret, which alone makes an
	// approver there.
	Console bool `json:"console"`
	// ApprovalsOnly: this console serves a person's approvals and nothing
	// else (the console of a single-client session).
	ApprovalsOnly bool `json:"approvals_only"`
}

func (s *httpServer) serveConsoleSession(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, consoleSession{Principal: c.Principal, Approver: c.DecidesSome(), Authenticated: s.auth != nil,
		Console: s.console.secret != ""})
}

// recentSize is how many executions the console shows.
const recentSize = 100

// execution is one call as the console lists it.
type execution struct {
	Time        time.Time `json:"time"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Tool        string    `json:"tool"`
	Principal   string    `json:"principal"`
	Code        string    `json:"code"`
	DurationMS  float64   `json:"duration_ms"`
	Replayed    bool      `json:"replayed"`
	ApprovalID  string    `json:"approval_id,omitempty"`
}

// recent keeps the last calls of found tools, newest last, in a ring.
type recent struct {
	mu   sync.Mutex
	ring [recentSize]execution
	n    int // calls recorded in all
}

// observe keeps a call that ended: refused, replayed or executed.
func (rc *recent) observe(_ context.Context, rec AuditRecord, took time.Duration) {
	e := execution{Time: rec.Time.Add(-took), ExecutionID: rec.ExecutionID, Tool: rec.Tool, Principal: rec.Principal,
		Code: string(rec.Code), DurationMS: float64(took.Microseconds()) / 1000, Replayed: rec.Decision == AuditReplayed,
		ApprovalID: rec.ApprovalID}
	rc.mu.Lock()
	rc.ring[rc.n%recentSize] = e
	rc.n++
	rc.mu.Unlock()
}

// list returns the executions that keep, newest first.
func (rc *recent) list(keep func(execution) bool) []execution {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := []execution{}
	for i := rc.n - 1; i >= 0 && i >= rc.n-recentSize; i-- {
		if e := rc.ring[i%recentSize]; keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// serveExecutions lists the last calls: every call for those who decide
// approvals, a caller's own calls for the others.
func (s *httpServer) serveExecutions(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, s.r.recent.list(func(e execution) bool {
		return c.MayViewCall(e.Tool, e.Principal)
	}))
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

// announceConsole makes the address a server listens on the base of its
// approval URLs, and gives the person who started the server the console
// URL with its secret: printed when standard error is a terminal, and
// written to a file only the user can read, where `carmy approvals` finds
// it and whose path (never the secret) is logged. The file is removed
// when the registry closes.
func (s *httpServer) announceConsole(addr net.Addr) {
	base := "http://" + addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		base = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	s.r.approvals.base.Store(&base)
	if s.console.secret == "" {
		return
	}
	link := s.r.ConsoleURL(base)
	out, terminal := s.r.tuning.console()
	if terminal {
		fmt.Fprintf(out, "carmy: to see the tools and approve calls, open %s\n", link)
	}
	path, err := s.writeConsoleFile(s.console, link)
	if err != nil {
		if !terminal {
			s.r.logger.Error("carmy: cannot write the console URL to a file: the console cannot decide approvals", "error", err)
		}
		return
	}
	s.r.logger.Info("carmy: the console URL, with the secret that approves calls, is in a file only this user can read", "path", path, "console", base+"/console")
}

// writeConsoleFile writes a console's link with its secret to a file only
// the user can read, which the registry removes when it closes.
func (s *httpServer) writeConsoleFile(c *consoleAuth, link string) (string, error) {
	path, err := console.WriteFile(link)
	if err != nil {
		return "", err
	}
	s.consoleFiles.add(path)
	return path, nil
}

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
	auth *consoleAuth
	err  error
	// open is base once the console serves, read without the once.
	open atomic.Pointer[string]
}

// localConsole returns the base URL and the secret of the registry's
// loopback console, opening it on the first call: it writes the link with
// the secret to a file only the user can read, where `carmy approvals`
// finds it.
func (s *httpServer) localConsole(ctx context.Context) (string, *consoleAuth, error) {
	r, lc := s.r, &s.loopback
	lc.once.Do(func() {
		if r.streams.Err() != nil {
			lc.err = errors.New("the registry is closed")
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lc.err = err
			return
		}
		lc.auth = newConsoleAuth(false)
		lc.auth.codes.TTL = r.tuning.codeTTL
		srv := &http.Server{Handler: s.loopbackHandler(lc.auth), ReadHeaderTimeout: s.limits.readHeader, IdleTimeout: s.limits.idle,
			MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(r.logger.Handler(), slog.LevelWarn)}
		go func() { _ = srv.Serve(ln) }()
		context.AfterFunc(r.streams, func() { _ = srv.Close() })
		lc.base = "http://" + ln.Addr().String()
		lc.open.Store(&lc.base)
		path, err := s.writeConsoleFile(lc.auth, lc.base+"/console?token="+lc.auth.secret)
		if err != nil {
			r.logger.Error("carmy: cannot write the console's link to a file: carmy approvals cannot find this server", "error", err)
		}
		r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: serving the console for approvals", slog.String("addr", ln.Addr().String()), slog.String("path", path))
	})
	return lc.base, lc.auth, lc.err
}

// loopbackLink is the link to approval id on the loopback console, if it
// serves: the page alone, with neither its secret nor a one-time code, so
// that a model that reads it (in a task's status message) gains nothing;
// the person opens it with the secret that `carmy approvals` and the
// server's own output give them. It is "" before the console opens.
func (s *httpServer) loopbackLink(id string) string {
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
func (s *httpServer) loopbackHandler(c *consoleAuth) http.Handler {
	who := approve.Who{Principal: s.r.stdioIdentity.Principal, Console: true, Scoped: true}
	person := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if !c.holds(req) {
				s.refuse(w, req, "", http.StatusForbidden, &Error{Code: CodePermissionDenied,
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
		writeError(w, Errorf(CodeNotFound, "no such endpoint %s %s: this console serves a person's approvals only (GET /console, /approvals)", req.Method, req.URL.Path))
	})
	return s.protect(mux, nil, nil)
}
