package carmy

import (
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/carmy-dev/carmy/internal/approve"
)

// authenticated is the one authentication wrapper of the HTTP API, around
// every route that needs its caller: it finds the caller of a request
// with who ([httpServer.identify] for the tools and the tasks,
// [httpServer.caller] for the approvals and the console) and hands it to
// next, or answers a request its authentication refuses (see [login])
// before next reads anything.
func authenticated[C Identity | approve.Who](s *httpServer, who func(*http.Request) (C, error), next func(http.ResponseWriter, *http.Request, C)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c, ok := login(s, w, req, who); ok {
			next(w, req, c)
		}
	}
}

// login is the one login check of the HTTP API, of [authenticated]'s
// routes and of /mcp, whose door asks it for each request: it returns the
// caller of a request that who finds, or answers the request with who's
// refusal (and a resource server's challenge) and returns false.
func login[C Identity | approve.Who](s *httpServer, w http.ResponseWriter, req *http.Request, who func(*http.Request) (C, error)) (C, bool) {
	c, err := who(req)
	if err != nil {
		s.writeAuthError(w, req, err)
		return c, false
	}
	return c, true
}

// identify authenticates a request; without an authenticator everyone is
// the anonymous principal "". It reads no body, so that a caller with bad
// credentials is refused at once. A refusal is logged at warn level with
// its code alone: an authenticator may have written the credential into
// its message or its cause.
func (s *httpServer) identify(req *http.Request) (Identity, error) {
	if s.auth == nil {
		return Identity{}, nil
	}
	// Proxies and authenticators disagree on which of two Authorization
	// headers counts: none does.
	_, e := authorization(req)
	if e == nil {
		id, err := s.auth.Authenticate(req)
		switch {
		case err == nil && utf8.ValidString(id.Principal):
			return id, nil
		case err == nil:
			// Answers, logs and records name the principal, as text.
			e = Errorf(CodeUnauthenticated, "authentication failed: the authenticator named a principal that is not valid UTF-8")
		case !errors.As(err, &e):
			e = &Error{Code: CodeUnauthenticated, Message: "authentication failed", Err: err}
		}
	}
	s.logRefusal(req, "", &Error{Code: e.Code}) // the code, not the message
	return Identity{}, e
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
