// Package schemes keeps what opens a resource by the scheme of its URL,
// as database/sql keeps drivers by name: the idempotency stores of
// package store and the audit sinks of the root package register here.
package schemes

import (
	"strings"
	"sync"
)

// Registry holds one opener of type T per URL scheme. Its zero value is
// empty and ready; it is safe for concurrent use.
type Registry[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Register sets the opener of a scheme, replacing any earlier one.
func (r *Registry[T]) Register(scheme string, open T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[scheme] = open
}

// Lookup returns the scheme of url ("" when it has none) and the opener
// registered for it, if any.
func (r *Registry[T]) Lookup(url string) (scheme string, open T, ok bool) {
	scheme, _, hasScheme := strings.Cut(url, "://")
	if !hasScheme {
		return "", open, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	open, ok = r.m[scheme]
	return scheme, open, ok
}
