package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// pingTimeout bounds one ping of the store by a health check.
const pingTimeout = time.Second

// health tracks whether the host reaches its store, as its health checks
// find by pinging it. It is safe for concurrent use.
type health struct {
	grace   time.Duration
	pingers []store.Pinger

	mu      sync.Mutex
	failing time.Time // when pings began to fail; zero while they succeed
}

// Pingers returns what the health checks of a registry whose store and
// locker are s and l ping: those that implement [store.Pinger], once
// when they are the same.
func Pingers(s store.IdempotencyStore, l store.Locker) []store.Pinger {
	var pingers []store.Pinger
	if p, ok := s.(store.Pinger); ok {
		pingers = append(pingers, p)
	}
	if p, ok := l.(store.Pinger); ok && any(l) != any(s) {
		pingers = append(pingers, p)
	}
	return pingers
}

// check pings the store and reports whether the host has been unable to
// reach it for longer than the grace, since when, and why.
func (h *health) check(ctx context.Context) (down bool, since time.Time, err error) {
	if len(h.pingers) == 0 {
		return false, time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var errs []error
	for _, p := range h.pingers {
		if err := p.Ping(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.failing = time.Time{}
	case h.failing.IsZero():
		h.failing = now
	}
	return err != nil && now.Sub(h.failing) >= h.grace, h.failing, err
}

// mountHealth serves the health checks, which need no authentication.
func (s *Server) mountHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.HandleFunc("GET /readyz", s.serveHealth)
	mux.HandleFunc("GET /livez", serveLive)
	mux.HandleFunc("/healthz", onlyMethod("GET"))
	mux.HandleFunc("/readyz", onlyMethod("GET"))
	mux.HandleFunc("/livez", onlyMethod("GET"))
}

// serveHealth answers GET /healthz and GET /readyz: 200 while the host
// reaches its store, or lost it for less than the grace; 503 past it. The
// answer names no address or cause, since anyone may ask: the log has the
// cause.
func (s *Server) serveHealth(w http.ResponseWriter, req *http.Request) {
	down, since, err := s.health.check(req.Context())
	switch {
	case down:
		s.cfg.Logger.Warn("carmy: health check failed: the store is out of reach", "since", since, "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "store": "unreachable", "since": since.UTC().Format(time.RFC3339)})
	case err != nil:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": "unreachable", "since": since.UTC().Format(time.RFC3339)})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "store": "ok"})
	}
}

// serveLive answers GET /livez: 200 while the process serves HTTP, whatever
// its store does, so that an orchestrator restarts a host that hangs, not
// one whose store is out of reach (a restart would not bring it back).
func serveLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
