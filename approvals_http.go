package carmy

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// maxApprovalWait bounds how long GET /approvals/{id}?wait= holds a
// request open.
const maxApprovalWait = time.Minute

// caller is who a request to the approvals or the console comes from.
type caller struct {
	id Identity
	// console: the request carries the console secret of a server without
	// an authenticator, which alone grants the approver's rights there.
	console bool
}

// approves reports whether the caller may decide approvals of tool.
func (c caller) approves(tool string) bool {
	return c.console || slices.Contains(c.id.Permissions, "approve:*") || slices.Contains(c.id.Permissions, "approve:"+tool)
}

// approvesAny reports whether the caller may decide approvals of some tool.
func (c caller) approvesAny() bool {
	if c.console {
		return true
	}
	for _, p := range c.id.Permissions {
		if len(p) > len("approve:") && p[:len("approve:")] == "approve:" {
			return true
		}
	}
	return false
}

// sees reports whether the caller may read an approval: one of a tool it
// approves, or one of its own calls.
func (c caller) sees(a store.Approval) bool {
	return c.approves(a.Tool) || a.Principal == c.id.Principal
}

// name is how a decision names its maker.
func (c caller) name() string {
	if c.console {
		return "console"
	}
	return c.id.Principal
}

// caller authenticates a request, and looks for the console secret on a
// server without an authenticator.
func (r *Registry) caller(req *http.Request) (caller, error) {
	id, err := r.identify(req)
	if err != nil {
		return caller{}, err
	}
	return caller{id: id, console: r.auth == nil && r.console.holds(req)}, nil
}

// wireApproval is an approval as the HTTP API shows it.
type wireApproval struct {
	ID        string      `json:"id"`
	Tool      string      `json:"tool"`
	Principal string      `json:"principal"`
	Input     jsontextRaw `json:"input"`
	Digest    string      `json:"digest"`
	RequestID string      `json:"request_id,omitempty"`
	Status    string      `json:"status"`
	Created   time.Time   `json:"created"`
	Expires   time.Time   `json:"expires"`
	Decided   time.Time   `json:"decided,omitzero"`
	Approver  string      `json:"approver,omitempty"`
	URL       string      `json:"url"`
}

func (r *Registry) wireApproval(ctx context.Context, a store.Approval) wireApproval {
	return wireApproval{a.ID, a.Tool, a.Principal, jsontextRaw(a.Input), a.Digest, a.RequestID, string(a.Status),
		a.Created.UTC(), a.Expires.UTC(), a.Decided.UTC(), a.Approver, r.approvalURL(ctx, a.ID)}
}

func (r *Registry) mountApprovals(mux *http.ServeMux) {
	mux.HandleFunc("GET /approvals", r.serveApprovals)
	mux.HandleFunc("GET /approvals/{id}", r.serveApproval)
	mux.HandleFunc("POST /approvals/{id}/approve", r.serveDecision(true))
	mux.HandleFunc("POST /approvals/{id}/deny", r.serveDecision(false))
	mux.HandleFunc("/approvals", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}", onlyMethod("GET"))
	mux.HandleFunc("/approvals/{id}/approve", onlyMethod("POST"))
	mux.HandleFunc("/approvals/{id}/deny", onlyMethod("POST"))
}

// serveApprovals lists the approvals the caller may see, newest first:
// ?status=pending keeps those of one status.
func (r *Registry) serveApprovals(w http.ResponseWriter, req *http.Request) {
	c, err := r.caller(req)
	if err != nil {
		r.writeAuthError(w, req, err)
		return
	}
	all, err := r.approvals.store.List(req.Context())
	if err != nil {
		writeError(w, r.approvalStoreError(err))
		return
	}
	ctx := withHTTPRequest(req.Context(), req)
	status := req.URL.Query().Get("status")
	out := make([]wireApproval, 0, len(all))
	for _, a := range all {
		if c.sees(a) && (status == "" || string(a.Status) == status) {
			out = append(out, r.wireApproval(ctx, a))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// serveApproval shows one approval; ?wait=30s holds the request until it
// is no longer pending, for at most that long (and a minute), so that an
// agent learns of the decision at once.
func (r *Registry) serveApproval(w http.ResponseWriter, req *http.Request) {
	c, err := r.caller(req)
	if err != nil {
		r.writeAuthError(w, req, err)
		return
	}
	a, ok := r.visibleApproval(w, req, c)
	if !ok {
		return
	}
	if v := req.URL.Query().Get("wait"); v != "" && a.Status == store.ApprovalPending {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, Errorf(CodeInvalidInput, "wait=%q is not a duration such as 30s", v))
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), min(d, maxApprovalWait))
		defer cancel()
		if got, err := r.awaitDecision(ctx, a.ID); err == nil || errors.Is(err, context.DeadlineExceeded) {
			a = got
		} else if req.Context().Err() == nil {
			writeError(w, r.approvalStoreError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, r.wireApproval(withHTTPRequest(req.Context(), req), a))
}

// visibleApproval finds the approval a request names, answering 404 for
// one the caller may not see, as for one that does not exist.
func (r *Registry) visibleApproval(w http.ResponseWriter, req *http.Request, c caller) (store.Approval, bool) {
	id := req.PathValue("id")
	a, err := r.approvals.store.Get(req.Context(), id)
	if err == nil && !c.sees(a) {
		err = store.ErrApprovalNotFound
	}
	if errors.Is(err, store.ErrApprovalNotFound) {
		writeError(w, Errorf(CodeNotFound, "no approval %q is visible to you; see GET /approvals", id))
		return a, false
	}
	if err != nil {
		writeError(w, r.approvalStoreError(err))
		return a, false
	}
	return a, true
}

// serveDecision approves or denies a pending approval, for a caller who
// approves its tool. The decision is logged, with who made it.
func (r *Registry) serveDecision(approve bool) http.HandlerFunc {
	decision := "deny"
	if approve {
		decision = "approve"
	}
	return func(w http.ResponseWriter, req *http.Request) {
		c, err := r.caller(req)
		if err != nil {
			r.writeAuthError(w, req, err)
			return
		}
		// A page may send a form or text to any origin without asking
		// first, but not JSON: a decision is JSON, or has no body at all.
		if ct := req.Header.Get("Content-Type"); ct != "" || req.ContentLength != 0 {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				r.refuse(w, req, c.id.Principal, http.StatusUnsupportedMediaType, Errorf(CodeInvalidInput, "send the decision with no body, or with Content-Type: application/json"))
				return
			}
		}
		a, ok := r.visibleApproval(w, req, c)
		if !ok {
			return
		}
		if !c.approves(a.Tool) {
			r.refuse(w, req, c.id.Principal, http.StatusForbidden, Errorf(CodePermissionDenied,
				"deciding approvals of %s needs the permission %q or %q; the caller of a tool never decides on its own call", a.Tool, "approve:"+a.Tool, "approve:*"))
			return
		}
		a, err = r.approvals.store.Decide(req.Context(), a.ID, approve, c.name())
		if errors.Is(err, store.ErrApprovalState) {
			writeError(w, &Error{Code: CodeConflict, Message: "approval " + a.ID + " is " + string(a.Status) + ", not pending: it cannot be decided again",
				Details: map[string]any{"approval_id": a.ID, "status": string(a.Status)}})
			return
		}
		if err != nil {
			writeError(w, r.approvalStoreError(err))
			return
		}
		r.approvals.wake()
		r.logger.LogAttrs(req.Context(), slog.LevelInfo, "carmy: approval decided",
			slog.String("decision", decision), slog.String("approval_id", a.ID), slog.String("tool", a.Tool),
			slog.String("principal", a.Principal), slog.String("approver", a.Approver),
			slog.Time("decided", a.Decided), slog.String("digest", a.Digest), slog.String("remote", req.RemoteAddr))
		writeJSON(w, http.StatusOK, r.wireApproval(withHTTPRequest(req.Context(), req), a))
	}
}

// approvalStoreError explains a failure of the approval store.
func (r *Registry) approvalStoreError(err error) *Error {
	r.logger.Error("carmy: approval store failed", "error", err)
	return &Error{Code: CodeUnavailable, Message: "approvals are unavailable now; try again", Retryable: true, Err: err}
}
