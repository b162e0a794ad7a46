package httpapi

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/internal/console"
	jsonv2 "github.com/go-json-experiment/json"
)

func (s *Server) mountConsole(mux *http.ServeMux) {
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
			writeOwnError(w, errorf(codeNotFound, "no such asset"))
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, req)
	})
}

// writeOwnError answers with an error the door made itself.
func writeOwnError(w http.ResponseWriter, e *Error) { writeErrorStatus(w, Status(e.Code), e) }

// serveConsole serves the console's page. Opened with the console secret
// (?token=), or with a one-time code (?code=) that it exchanges for the
// secret at POST /console/exchange, the page keeps the secret in its
// origin's storage and takes it out of the address bar; the server sets
// no cookie.
func serveConsole(w http.ResponseWriter, req *http.Request) {
	page, err := console.Files.ReadFile("index.html")
	if err != nil {
		writeOwnError(w, &Error{Code: codeInternal, Message: "the console is missing", Retryable: true})
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
func (s *Server) serveExchange(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if status, e := decisionRefused(req); e != nil {
			s.refuse(w, req, "", status, e)
			return
		}
		var body struct {
			Code string `json:"code"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || body.Code == "" {
			writeOwnError(w, errorf(codeInvalidInput, `send {"code": "..."}: the one-time code of the console link`))
			return
		}
		if c.secret == "" || !c.codes.Redeem(body.Code) {
			s.refuse(w, req, "", http.StatusForbidden, &Error{Code: codePermissionDenied,
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
func serveChallenge(c *Console) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c.secret == "" {
			writeOwnError(w, errorf(codeNotFound, "this server has no console secret"))
			return
		}
		var body struct {
			Nonce string `json:"nonce"`
		}
		raw, err := io.ReadAll(req.Body) // bounded by the body limit
		if err != nil || jsonv2.Unmarshal(raw, &body) != nil || len(body.Nonce) < console.MinNonce || len(body.Nonce) > console.MaxNonce {
			writeOwnError(w, errorf(codeInvalidInput, `send {"nonce": "..."}: %d to %d random characters`, console.MinNonce, console.MaxNonce))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]string{"proof": console.Proof(c.secret, body.Nonce)})
	}
}

// linkWithCode is the console link at base that a client is sent, with a
// one-time code of c instead of its secret, and the query q.
func linkWithCode(base string, c *Console, q url.Values) string {
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

func (s *Server) serveConsoleSession(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, consoleSession{Principal: c.Principal, Approver: c.DecidesSome(), Authenticated: s.cfg.Authenticated,
		Console: s.console.secret != ""})
}

// recentSize is how many executions the console shows.
const recentSize = 100

// Execution is one call as the console lists it.
type Execution struct {
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
	ring [recentSize]Execution
	n    int // calls recorded in all
}

// Observe keeps a call that ended, refused, replayed or executed, for the
// console's list of the last calls.
func (s *Server) Observe(e Execution) {
	rc := &s.recent
	rc.mu.Lock()
	rc.ring[rc.n%recentSize] = e
	rc.n++
	rc.mu.Unlock()
}

// list returns the executions that keep, newest first.
func (rc *recent) list(keep func(Execution) bool) []Execution {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := []Execution{}
	for i := rc.n - 1; i >= 0 && i >= rc.n-recentSize; i-- {
		if e := rc.ring[i%recentSize]; keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// serveExecutions lists the last calls: every call for those who decide
// approvals, a caller's own calls for the others.
func (s *Server) serveExecutions(w http.ResponseWriter, req *http.Request, c approve.Who) {
	writeJSON(w, http.StatusOK, s.recent.list(func(e Execution) bool {
		return c.MayViewCall(e.Tool, e.Principal)
	}))
}

// Console is a console's secret: that of a server without an
// authenticator, made with the registry, new with every registry, which
// alone grants the approver's rights there, and that of the console
// served on a loopback port for a single-client session's person. Its
// holder is the person who started the server and read the console URL
// it printed, or the person at the client; an agent that calls the tools
// never has it. Links sent to a client carry a one-time code for it
// instead (codes).
//
// The secret travels in a header ([console.Header]), never a cookie:
// browsers send a host's cookies to every port of it, so another local
// server a person's browser visits would receive it, and with it the
// approver's rights. The page keeps the secret in its origin's storage,
// which no other origin reads, and a header is sent only by code that
// holds it; another origin's page would need a preflight to send it,
// which the server never grants.
type Console struct {
	secret string // "" with an authenticator
	codes  console.Codes
}

func newConsole(authenticated bool) *Console {
	if authenticated {
		return &Console{}
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	return &Console{secret: hex.EncodeToString(b[:])}
}

// holds reports whether a request carries the console secret, in its
// header.
func (c *Console) holds(req *http.Request) bool {
	v := req.Header.Values(console.Header)
	return len(v) == 1 && c.matches(v[0])
}

func (c *Console) matches(s string) bool {
	return c.secret != "" && subtle.ConstantTimeCompare([]byte(s), []byte(c.secret)) == 1
}

// ConsoleURL returns the URL of the console on a server at base, with
// the console secret when there is one.
func (s *Server) ConsoleURL(base string) string {
	if s.console.secret == "" {
		return base + "/console"
	}
	return base + "/console?token=" + s.console.secret
}
