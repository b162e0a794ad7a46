package carmy

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/approve"
	"github.com/carmy-dev/carmy/store"
)

// maxApprovalWait bounds how long GET /approvals/{id}?wait= holds a
// request open.
const maxApprovalWait = time.Minute

// caller authenticates a request to the approvals or the console, and
// looks for the console secret on a server without an authenticator.
func (s *httpServer) caller(req *http.Request) (approve.Who, error) {
	if who, ok := req.Context().Value(personKey{}).(approve.Who); ok {
		return who, nil // the loopback console's person, who holds its secret
	}
	id, err := s.identify(req)
	if err != nil {
		return approve.Who{}, err
	}
	return approve.Who{Principal: id.Principal, Permissions: id.Permissions, Console: s.auth == nil && s.console.holds(req)}, nil
}

// wireSummary is an approval as GET /approvals lists it: without its
// input, which comes with the approval alone (GET /approvals/{id}).
type wireSummary struct {
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
}

// wireApproval is one approval as the HTTP API shows it, with its input.
type wireApproval struct {
	wireSummary `json:",inline"`
	Input       jsontextRaw `json:"input"`
	// Text is the input as a person is shown it, made by the server
	// ([approve.Text]): the console shows it as it is.
	Text string `json:"text"`
}

func (s *httpServer) wireSummary(ctx context.Context, a store.Approval, c approve.Who) wireSummary {
	return wireSummary{a.ID, a.Tool, a.Principal, a.Digest, a.RequestID, string(a.Status),
		a.Created.UTC(), a.Expires.UTC(), a.Decided.UTC(), a.Approver, s.r.approvalURL(ctx, a.ID),
		a.Status == store.ApprovalPending && c.MayDecide(a) == nil}
}

func (s *httpServer) wireApproval(ctx context.Context, a store.Approval, c approve.Who) wireApproval {
	input := jsontextRaw(a.Input)
	text, err := approve.Text(a.Input)
	switch {
	case a.Input == nil:
		input, text = jsontextRaw("null"), "" // given back when the approval expired
	case err != nil:
		text = string(a.Input) // a form the store kept is JSON; never shown raw but for a broken store
	}
	return wireApproval{s.wireSummary(ctx, a, c), input, text}
}

func (s *httpServer) mountApprovals(mux *http.ServeMux) {
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
func (s *httpServer) serveApprovals(w http.ResponseWriter, req *http.Request, c approve.Who) {
	var err error
	q := req.URL.Query()
	status, after, limit := q.Get("status"), q.Get("after"), store.DefaultApprovalPage
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxApprovalPage {
			writeError(w, Errorf(CodeInvalidInput, "limit=%q is not a number of approvals from 1 to %d", v, maxApprovalPage))
			return
		}
	}
	ctx := withHTTPRequest(req.Context(), req)
	out := make([]wireSummary, 0, limit)
	more := false
	for scanned := 0; len(out) < limit && scanned < maxApprovalScan; {
		page, err := s.r.approvals.store.List(req.Context(), after, limit)
		if err != nil {
			writeError(w, s.r.approvalStoreError(err))
			return
		}
		read := 0
		for _, a := range page {
			if len(out) == limit {
				break
			}
			after, read = a.ID, read+1
			if c.MayView(a) && (status == "" || string(a.Status) == status) {
				out = append(out, s.wireSummary(ctx, a, c))
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
func (s *httpServer) serveApproval(w http.ResponseWriter, req *http.Request, c approve.Who) {
	a, ok := s.visibleApproval(w, req, c)
	if !ok {
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" && a.Status == store.ApprovalPending {
		ctx, cancel, err := s.longPoll(req, v, maxApprovalWait)
		if err != nil {
			writeError(w, err)
			return
		}
		defer cancel()
		got, err := s.r.awaitDecision(ctx, a.ID)
		switch {
		case err == nil:
			a = got
		case ctx.Err() == nil:
			writeError(w, s.r.approvalStoreError(err))
			return
		case got.ID != "": // the approval as last seen when the wait ended
			a = got
		}
	}
	writeJSON(w, http.StatusOK, s.wireApproval(withHTTPRequest(req.Context(), req), a, c))
}

// visibleApproval finds the approval a request names, answering 404 for
// one the caller may not see, as for one that does not exist.
func (s *httpServer) visibleApproval(w http.ResponseWriter, req *http.Request, c approve.Who) (store.Approval, bool) {
	id := req.PathValue("id")
	a, err := s.r.approvals.store.Get(req.Context(), id)
	if err == nil && !c.MayView(a) {
		err = store.ErrApprovalNotFound
	}
	if errors.Is(err, store.ErrApprovalNotFound) {
		writeError(w, Errorf(CodeNotFound, "no approval %q is visible to you; see GET /approvals", id))
		return a, false
	}
	if err != nil {
		writeError(w, s.r.approvalStoreError(err))
		return a, false
	}
	return a, true
}

// serveDecision approves or denies a pending approval, for a caller who
// approves its tool. The decision is logged and audited, with who made
// it; so is a refused attempt to decide.
func (s *httpServer) serveDecision(approved bool) func(http.ResponseWriter, *http.Request, approve.Who) {
	return func(w http.ResponseWriter, req *http.Request, c approve.Who) {
		if e := s.decisionRefused(req); e != nil {
			s.refuse(w, req, c.Principal, e.status, e.Error)
			return
		}
		a, ok := s.visibleApproval(w, req, c)
		refused := a
		refused.Approver = ""
		if !ok {
			if a.ID != "" { // one the caller may not see: 404, as for none
				s.r.auditApproval(req.Context(), refused, AuditRefused, c.Principal, CodePermissionDenied)
			}
			return
		}
		if why := c.MayDecide(a); why != nil {
			s.r.auditApproval(req.Context(), refused, AuditRefused, c.Principal, CodePermissionDenied)
			switch {
			case why == approve.ErrOwnCall:
				s.refuse(w, req, c.Principal, http.StatusForbidden, &Error{Code: CodePermissionDenied,
					Message: "the principal that made a call never decides its approval, whatever it holds: a person decides it, through the console or their MCP client",
					Details: map[string]any{"approval_id": a.ID, "reason": "own_call"}})
			case s.auth == nil:
				// No permission exists here: say where the approver's link is.
				s.refuse(w, req, c.Principal, http.StatusForbidden, Errorf(CodePermissionDenied,
					"deciding approvals here needs the console secret: open the console link the server printed when it started, or run `carmy approvals` in a terminal%s", linkIn(s.console.fileName())))
			default:
				s.refuse(w, req, c.Principal, http.StatusForbidden, Errorf(CodePermissionDenied,
					"deciding approvals of %s needs the permission %q or %q", a.Tool, "approve:"+a.Tool, "approve:*"))
			}
			return
		}
		if e := s.r.policyApprove(req.Context(), a, Identity{Principal: c.Name(), Permissions: c.Permissions}, "http"); e != nil {
			s.refuse(w, req, c.Principal, http.StatusForbidden, e)
			return
		}
		id := a.ID
		a, err := s.r.decide(req.Context(), id, approved, c.Name(), slog.String("remote", req.RemoteAddr))
		if err != nil {
			writeError(w, s.r.decisionError(id, a, err))
			return
		}
		writeJSON(w, http.StatusOK, s.wireApproval(withHTTPRequest(req.Context(), req), a, c))
	}
}

// approvalStoreError explains a failure of the approval store.
func (r *Registry) approvalStoreError(err error) *Error {
	r.logger.Error("carmy: approval store failed", "error", err)
	return &Error{Code: CodeUnavailable, Message: "approvals are unavailable now; try again", Retryable: true, Err: err}
}

// decisionOrigin refuses decisions from pages of other origins, those of
// AllowOrigins included: a decision comes from the console's own page, or
// from a program (which sends neither Origin nor Sec-Fetch-Site).
var decisionOrigin = http.NewCrossOriginProtection()

// decisionRefusal is why a request may not carry a decision.
type decisionRefusal struct {
	status int
	*Error
}

// decisionRefused refuses a decision that a browser could have sent
// without being asked: from another origin (a page of a neighbouring port
// is same-site, and SameSite cookies would go with it), or without a JSON
// body, which a page may send to another origin only after a preflight,
// which decisions never pass.
func (s *httpServer) decisionRefused(req *http.Request) *decisionRefusal {
	if decisionOrigin.Check(req) != nil {
		return &decisionRefusal{http.StatusForbidden, Errorf(CodePermissionDenied,
			"approvals are decided from the console's own page, or by a program; never from another origin's page")}
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &decisionRefusal{http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the decision with Content-Type: application/json, even with no body")}
	}
	return nil
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
