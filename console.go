package carmy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/console"
)

// consoleHeader carries the console secret from the console's page. Not a
// cookie: browsers send a host's cookies to every port of it, so another
// local server a person's browser visits would receive it, and with it
// the approver's rights. The page keeps the secret in its origin's
// storage, which no other origin reads, and a header is sent only by code
// that holds it; another origin's page would need a preflight to send it,
// which the server never grants.
const consoleHeader = "X-Carmy-Console"

// consoleAuth is the console secret of a server without an authenticator:
// made at Build, new with every registry, it alone grants the approver's
// rights there. Its holder is the person who started the server and read
// the console URL it printed; an agent that calls the tools never has it.
type consoleAuth struct{ secret string } // "" with an authenticator

func newConsoleAuth(authenticated bool) consoleAuth {
	if authenticated {
		return consoleAuth{}
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	return consoleAuth{secret: hex.EncodeToString(b[:])}
}

// holds reports whether a request carries the console secret, in its
// header.
func (c consoleAuth) holds(req *http.Request) bool {
	v := req.Header.Values(consoleHeader)
	return len(v) == 1 && c.matches(v[0])
}

func (c consoleAuth) matches(s string) bool {
	return c.secret != "" && subtle.ConstantTimeCompare([]byte(s), []byte(c.secret)) == 1
}

// ConsoleURL returns the URL of the console on a server at base, such as
// "http://127.0.0.1:3000". On a registry without an [Authenticator] it
// carries the console secret, which alone grants the right to decide
// approvals there: give it only to the person who decides, never to an
// agent. [Builder.Listen] prints it at start when standard error is a
// terminal, and otherwise writes it to a file only the user can read, whose
// path it logs. The console's page keeps the secret in its own origin and
// sends it in a header, never in a cookie. With an authenticator, the
// console asks for a token, whose permissions decide what it may do.
func (r *Registry) ConsoleURL(base string) string {
	if r.console.secret == "" {
		return base + "/console"
	}
	return base + "/console?token=" + r.console.secret
}

func (r *Registry) mountConsole(mux *http.ServeMux) {
	files := http.FileServerFS(console.Files)
	mux.HandleFunc("GET /console", r.serveConsole)
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetsOnly(files)))
	mux.HandleFunc("GET /console/session", r.serveConsoleSession)
	mux.HandleFunc("GET /console/executions", r.serveExecutions)
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
// (?token=), the page keeps the secret in its origin's storage and takes
// it out of the address bar; the server sets no cookie.
func (r *Registry) serveConsole(w http.ResponseWriter, req *http.Request) {
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
}

func (r *Registry) serveConsoleSession(w http.ResponseWriter, req *http.Request) {
	c, err := r.caller(req)
	if err != nil {
		r.writeAuthError(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, consoleSession{c.Principal, c.DecidesSome(), r.auth != nil, r.console.secret != ""})
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
func (r *Registry) serveExecutions(w http.ResponseWriter, req *http.Request) {
	c, err := r.caller(req)
	if err != nil {
		r.writeAuthError(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, r.recent.list(func(e execution) bool {
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

// consoleDir is the directory of the file that holds the console URL when
// standard error is not a terminal: $XDG_RUNTIME_DIR, the user's own,
// else the temporary directory.
func consoleDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// announceConsole makes the address a server listens on the base of its
// approval URLs, and gives the person who started the server the console
// URL with its secret: printed when standard error is a terminal,
// otherwise written to a file only the user can read, whose path (never
// the secret) is logged.
func (r *Registry) announceConsole(addr net.Addr) {
	base := "http://" + addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		base = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	r.approvals.base.Store(&base)
	if r.console.secret == "" {
		return
	}
	link := r.ConsoleURL(base)
	if out, terminal := r.tuning.console(); terminal {
		fmt.Fprintf(out, "carmy: to see the tools and approve calls, open %s\n", link)
		return
	}
	f, err := os.CreateTemp(consoleDir(), "carmy-console-*.url") // mode 0600
	if err == nil {
		_, err = fmt.Fprintln(f, link)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		r.logger.Error("carmy: cannot write the console URL to a file: the console cannot decide approvals", "error", err)
		return
	}
	r.logger.Info("carmy: the console URL, with the secret that approves calls, is in a file only this user can read", "path", f.Name(), "console", base+"/console")
}
