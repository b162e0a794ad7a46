package httpapi

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
)

// mountTools serves the tools: the list and the calls.
func (s *Server) mountTools(mux *http.ServeMux) {
	mux.HandleFunc("GET /tools", private(authenticated(s, s.identify, s.serveTools)))
	mux.HandleFunc("POST /tools/{name}", authenticated(s, s.identify, s.serveCall))
	mux.HandleFunc("/tools", onlyMethod("GET"))
	mux.HandleFunc("/tools/{name}", onlyMethod("POST"))
}

// serveTools lists the tools the caller may call; the list depends on who
// asks (see [private]).
func (s *Server) serveTools(w http.ResponseWriter, req *http.Request, id Identity) {
	writeJSON(w, http.StatusOK, s.host.Tools(req.Context(), id))
}

func (s *Server) serveCall(w http.ResponseWriter, req *http.Request, id Identity) {
	// A page may POST text/plain or a form to any origin without asking
	// first; requiring JSON, even for an empty body, takes that away.
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.refuse(w, req, id.Principal, http.StatusUnsupportedMediaType, errorf(codeInvalidInput, "send the input with Content-Type: application/json, even when it is empty"))
		return
	}
	body, err := io.ReadAll(req.Body) // bounded by the body limit
	if err != nil {
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooLarge):
			s.refuse(w, req, id.Principal, http.StatusRequestEntityTooLarge, errorf(codeInvalidInput, "the input is larger than the limit of %d bytes", s.cfg.BodyLimit))
		case errors.As(err, &netErr) && netErr.Timeout():
			s.refuse(w, req, id.Principal, http.StatusRequestTimeout, &Error{Code: codeTimeout, Message: "the request body did not arrive in time", Retryable: true})
		default:
			s.writeError(w, &Error{Code: codeCancelled, Message: "the request body could not be read", Retryable: true})
		}
		return
	}
	c := Call{Tool: req.PathValue("name"), Input: body, RequestID: req.Header.Get("Idempotency-Key"), Identity: id,
		Traceparent: req.Header.Get("Traceparent"), Tracestate: req.Header.Get("Tracestate")}
	if prefersAsync(req) && s.startOverHTTP(w, req, c) {
		return
	}
	res, err := s.host.Call(req, c)
	if err != nil {
		s.challengeMissing(w, req, err)
		s.writeError(w, err)
		return
	}
	w.Header().Set("X-Carmy-Execution-Id", res.ExecutionID)
	writeJSON(w, http.StatusOK, res)
}

// prefersAsync reports whether a request prefers an asynchronous answer
// (RFC 7240: Prefer: respond-async, in any of its Prefer headers).
func prefersAsync(req *http.Request) bool {
	for _, h := range req.Header.Values("Prefer") {
		for _, p := range strings.Split(h, ",") {
			name, _, _ := strings.Cut(p, ";")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// startOverHTTP answers a call that prefers an asynchronous answer with
// 202 and its task, when its tool runs as a task. It reports false, having
// written nothing, for a tool that forbids tasks or does not exist: the
// call is then answered as any other (RFC 7240 lets a server ignore a
// preference).
func (s *Server) startOverHTTP(w http.ResponseWriter, req *http.Request, c Call) bool {
	task, ok, err := s.host.Start(req, c)
	if !ok {
		return false
	}
	if err != nil {
		s.challengeMissing(w, req, err)
		s.writeError(w, err)
		return true
	}
	w.Header().Set("Location", "/tasks/"+task.ID)
	w.Header().Set("Preference-Applied", "respond-async")
	writeJSON(w, http.StatusAccepted, s.host.TaskDoc(req, task))
	return true
}
