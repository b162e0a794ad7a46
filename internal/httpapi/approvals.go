package httpapi

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// caller authenticates a request to the approvals or the console, and
// looks for the console secret on a server without an authenticator.
func (s *Server) caller(req *http.Request) (approve.Who, error) {
	if who, ok := req.Context().Value(personKey{}).(approve.Who); ok {
		return who, nil // the loopback console's person, who holds its secret
	}
	id, err := s.identify(req)
	if err != nil {
		return approve.Who{}, err
	}
	return approve.Who{Principal: id.Principal, Permissions: id.Permissions, Console: !s.cfg.Authenticated && s.console.holds(req)}, nil
}

// ApprovalSummary is an approval as GET /approvals lists it: without its
// input, which comes with the approval alone (GET /approvals/{id}). It is
// the one type of the document, which the server writes and the command
// reads.
type ApprovalSummary struct {
	ID        string    `json:"id"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal"`
	Digest    string    `json:"digest"`
	RequestID string    `json:"request_id,omitempty"`
	Status    string    `json:"status"`
	Created   time.Time `json:"created"`
	Expires   time.Time `json:"expires"`
	Decided   time.Time `json:"decided,omitzero"`
	Approver  string    `json:"approver,omitempty"`
	URL       string    `json:"url"`
	// MayDecide: the caller may approve or deny it.
	MayDecide bool `json:"may_decide"`
	// TaskWaits: a task waits for it on this server, and resumes once it
	// is approved (no call needs to be made again).
	TaskWaits bool `json:"task_waits,omitempty"`
}

// Approval is one approval as the HTTP API shows it, with its input: the
// one type of the document, which the server writes and the command
// reads.
type Approval struct {
	ApprovalSummary `json:",inline"`
	Input           RawJSON `json:"input"`
	// Text is the input as a person is shown it, made by the server
	// ([approve.Text]): the console shows it as it is.
	Text string `json:"text"`
}

func (s *Server) summaryOf(req *http.Request, a store.Approval, c approve.Who) ApprovalSummary {
	link, waits := s.host.ApprovalLink(req, a.ID)
	return ApprovalSummary{a.ID, a.Tool, a.Principal, a.Digest, a.RequestID, string(a.Status),
		a.Created.UTC(), a.Expires.UTC(), a.Decided.UTC(), a.Approver, link,
		a.Status == store.ApprovalPending && c.MayDecide(a) == nil, waits}
}

func (s *Server) approvalOf(req *http.Request, a store.Approval, c approve.Who) Approval {
	input := RawJSON(a.Input)
	text, err := approve.Text(a.Input)
	switch {
	case a.Input == nil:
		input, text = RawJSON("null"), "" // given back when the approval expired
	case err != nil:
		text = string(a.Input) // a form the store kept is JSON; never shown raw but for a broken store
	}
	return Approval{s.summaryOf(req, a, c), input, text}
}

func (s *Server) mountApprovals(mux *http.ServeMux) {
	mux.HandleFunc("GET /approvals", authenticated(s, s.caller, s.serveApprovals))
	mux.HandleFunc("GET /approvals/{id}", authenticated(s, s.caller, s.serveApproval))
	mux.HandleFunc("POST /approvals/{id}/approve", authenticated(s, s.caller, s.serveDecision(true)))
	mux.HandleFunc("POST /approvals/{id}/deny", authenticated(s, s.caller, s.serveDecision(false)))
	mux.HandleFunc("/approvals", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}/approve", onlyMethod("POST"))
	mux.HandleFunc("/approvals/{id}/deny", onlyMethod("POST"))
}

// Pages of GET /approvals.
const (
	maxApprovalPage = 200
	// maxApprovalScan bounds the approvals one request reads from the
	// store, whatever few of them the caller may see.
	maxApprovalScan = 2_000
)

// serveApprovals lists the approvals the caller may see, newest first, as
// summaries without their inputs: ?status=pending keeps those of one
// status, ?limit= (at most 200, 50 by default) bounds the page, and a
// Link header (rel="next") gives the next page's URL, whose ?after= names
// the last approval read.
func (s *Server) serveApprovals(w http.ResponseWriter, req *http.Request, c approve.Who) {
	var err error
	q := req.URL.Query()
	status, after, limit := q.Get("status"), q.Get("after"), store.DefaultApprovalPage
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxApprovalPage {
			s.writeError(w, errorf(codeInvalidInput, "limit=%q is not a number of approvals from 1 to %d", v, maxApprovalPage))
			return
		}
	}
	out := make([]ApprovalSummary, 0, limit)
	more := false
	for scanned := 0; len(out) < limit && scanned < maxApprovalScan; {
		page, err := s.host.Approvals(req.Context(), after, limit)
		if err != nil {
			s.writeError(w, err)
			return
		}
		read := 0
		for _, a := range page {
			if len(out) == limit {
				break
			}
			after, read = a.ID, read+1
			if c.MayView(a) && (status == "" || string(a.Status) == status) {
				out = append(out, s.summaryOf(req, a, c))
			}
		}
		scanned += read
		if more = read < len(page) || len(page) == limit; !more {
			break
		}
	}
	if more {
		next := url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}
		if status != "" {
			next.Set("status", status)
		}
		w.Header().Set("Link", "</approvals?"+next.Encode()+`>; rel="next"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// serveApproval shows one approval; ?wait=30s holds the request until it
// is no longer pending, for at most that long (and a minute), so that an
// agent learns of the decision at once, or until the server shuts down.
func (s *Server) serveApproval(w http.ResponseWriter, req *http.Request, c approve.Who) {
	a, err := s.host.Approval(req.Context(), req.PathValue("id"))
	if err == nil && !c.MayView(a) {
		err = store.ErrApprovalNotFound
	}
	if err != nil {
		s.writeApprovalError(w, req, err)
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" && a.Status == store.ApprovalPending {
		ctx, cancel, err := s.longPoll(req, v, s.cfg.ApprovalWait)
		if err != nil {
			s.writeError(w, err)
			return
		}
		defer cancel()
		got, err := s.host.AwaitDecision(ctx, a.ID)
		switch {
		case err == nil:
			a = got
		case ctx.Err() == nil:
			s.writeError(w, err)
			return
		case got.ID != "": // the approval as last seen when the wait ended
			a = got
		}
	}
	writeJSON(w, http.StatusOK, s.approvalOf(req, a, c))
}

// writeApprovalError answers a request for an approval that failed with
// err: 404 for one the caller may not see, as for one that does not
// exist.
func (s *Server) writeApprovalError(w http.ResponseWriter, req *http.Request, err error) {
	if errors.Is(err, store.ErrApprovalNotFound) {
		s.writeError(w, errorf(codeNotFound, "no approval %q is visible to you; see GET /approvals", req.PathValue("id")))
		return
	}
	s.writeError(w, err)
}

// serveDecision approves or denies a pending approval, for a caller who
// approves its tool, through the registry's one gate of a decision. The
// decision is logged and audited, with who made it; so is a refused
// attempt to decide.
func (s *Server) serveDecision(approved bool) func(http.ResponseWriter, *http.Request, approve.Who) {
	return func(w http.ResponseWriter, req *http.Request, c approve.Who) {
		if status, e := decisionRefused(req); e != nil {
			s.refuse(w, req, c.Principal, status, e)
			return
		}
		a, err := s.host.Approval(req.Context(), req.PathValue("id"))
		if err == nil {
			a, err = s.host.Decide(req, a, approved, c)
		}
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, s.approvalOf(req, a, c))
		case errors.Is(err, approve.ErrOwnCall):
			s.refuse(w, req, c.Principal, http.StatusForbidden, &Error{Code: codePermissionDenied,
				Message: "the principal that made a call never decides its approval, whatever it holds: a person decides it, through the console or their MCP client",
				Details: map[string]any{"approval_id": a.ID, "reason": "own_call"}})
		case errors.Is(err, approve.ErrNoRight) && !s.cfg.Authenticated:
			// No permission exists here: say how the person decides,
			// never where the secret is (an agent reads this).
			s.refuse(w, req, c.Principal, http.StatusForbidden, errorf(codePermissionDenied,
				"deciding approvals here needs the console secret: open the console link the server printed when it started, or run `carmy approvals` in a terminal"))
		case errors.Is(err, approve.ErrNoRight):
			s.refuse(w, req, c.Principal, http.StatusForbidden, errorf(codePermissionDenied,
				"deciding approvals of %s needs the permission %q or %q", a.Tool, "approve:"+a.Tool, "approve:*"))
		case errors.Is(err, store.ErrApprovalNotFound):
			s.writeApprovalError(w, req, err)
		default:
			if e := s.public(err); e.Code == codePermissionDenied { // the policies refused
				s.refuse(w, req, c.Principal, http.StatusForbidden, e)
				return
			}
			s.writeError(w, err)
		}
	}
}

// decisionOrigin refuses decisions from pages of other origins, those of
// AllowOrigins included: a decision comes from the console's own page, or
// from a program (which sends neither Origin nor Sec-Fetch-Site).
var decisionOrigin = http.NewCrossOriginProtection()

// decisionRefused refuses, with the status to answer, a decision that a
// browser could have sent without being asked: from another origin (a
// page of a neighbouring port is same-site, and SameSite cookies would go
// with it), or without a JSON body, which a page may send to another
// origin only after a preflight, which decisions never pass.
func decisionRefused(req *http.Request) (int, *Error) {
	if decisionOrigin.Check(req) != nil {
		return http.StatusForbidden, errorf(codePermissionDenied,
			"approvals are decided from the console's own page, or by a program; never from another origin's page")
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, errorf(codeInvalidInput, "send the decision with Content-Type: application/json, even with no body")
	}
	return 0, nil
}

// isDecision reports a path that decides an approval, or hands out the
// console secret, whose preflight requests the boundary never answers.
func isDecision(path string) bool {
	if path == "/console/exchange" {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/approvals/")
	return ok && (strings.HasSuffix(rest, "/approve") || strings.HasSuffix(rest, "/deny"))
}
