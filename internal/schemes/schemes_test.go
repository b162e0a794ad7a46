package schemes_test

import (
	"testing"

	"github.com/carmy-dev/carmy/internal/schemes"
)

func TestRegistry(t *testing.T) {
	var r schemes.Registry[string]
	r.Register("redis", "first")
	r.Register("redis", "second") // replaces
	r.Register("rediss", "tls")
	for _, tt := range []struct {
		url, scheme, open string
		ok                bool
	}{
		{"redis://:secret@cache:6379/0", "redis", "second", true},
		{"rediss://cache", "rediss", "tls", true},
		{"postgres://db", "postgres", "", false},
		{"cache:6379", "", "", false},
		{"", "", "", false},
	} {
		scheme, open, ok := r.Lookup(tt.url)
		if scheme != tt.scheme || open != tt.open || ok != tt.ok {
			t.Errorf("Lookup(%q) = %q, %q, %v; want %q, %q, %v", tt.url, scheme, open, ok, tt.scheme, tt.open, tt.ok)
		}
	}
}
