package console

import "testing"

// The proof depends on the secret and the nonce, and is checked exactly.
func TestProof(t *testing.T) {
	p := Proof("secret", "nonce-1")
	tests := []struct {
		name                  string
		secret, nonce, answer string
		want                  bool
	}{
		{"the server's answer", "secret", "nonce-1", p, true},
		{"another secret", "other", "nonce-1", p, false},
		{"another nonce", "secret", "nonce-2", p, false},
		{"the secret itself", "secret", "nonce-1", "secret", false},
		{"nothing", "secret", "nonce-1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Proves(tt.secret, tt.nonce, tt.answer); got != tt.want {
				t.Fatalf("Proves = %v; want %v", got, tt.want)
			}
		})
	}
}
