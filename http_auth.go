package carmy

import (
	"net/http"

	"github.com/carmy-dev/carmy/internal/approve"
)

// authenticated is the one authentication wrapper of the HTTP API: it
// finds the caller of a request with who ([Registry.identify] for the
// tools, [Registry.caller] for the approvals and the console) and hands
// it to next, or answers a request its authentication refuses with the
// refusal (and a resource server's challenge) before next reads anything.
func authenticated[C Identity | approve.Who](r *Registry, who func(*http.Request) (C, error), next func(http.ResponseWriter, *http.Request, C)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		c, err := who(req)
		if err != nil {
			r.writeAuthError(w, req, err)
			return
		}
		next(w, req, c)
	}
}

// private marks the answers of next, refusals included, as the caller's
// own: no shared cache may keep them, since they depend on who asks.
func private(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "private")
		w.Header().Add("Vary", "Authorization")
		next(w, req)
	}
}
