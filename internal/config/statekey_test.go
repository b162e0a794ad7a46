package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy/internal/config"
)

// state_key and CARMY_STATE_KEY take at least 32 bytes in hex; a bad
// value is reported without being repeated, since it is a secret.
func TestStateKey(t *testing.T) {
	key := strings.Repeat("ab", 32)
	write := func(t *testing.T, value string) string {
		p := filepath.Join(t.TempDir(), "carmy.toml")
		if err := os.WriteFile(p, []byte("state_key = \""+value+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := config.Load(write(t, key))
	if err != nil || !bytes.Equal(c.StateKey, bytes.Repeat([]byte{0xab}, 32)) {
		t.Fatalf("Load = %x, %v; want 32 bytes of ab", c.StateKey, err)
	}
	for _, bad := range []string{"abab", "not hex at all, not hex at all, not hex at all, not hex at all!"} {
		_, err := config.Load(write(t, bad))
		if err == nil || !strings.Contains(err.Error(), "carmy.toml:1: state_key") || strings.Contains(err.Error(), bad) {
			t.Errorf("Load of state_key %q = %v; want the problem at its line, without the value", bad, err)
		}
	}
	t.Setenv("CARMY_CONFIG", write(t, key))
	t.Setenv("CARMY_STATE_KEY", strings.Repeat("cd", 40))
	if c, err := config.FromEnv(); err != nil || !bytes.Equal(c.StateKey, bytes.Repeat([]byte{0xcd}, 40)) {
		t.Fatalf("FromEnv = %x, %v; want the variable's 40 bytes", c.StateKey, err)
	}
	t.Setenv("CARMY_STATE_KEY", "beef")
	if _, err := config.FromEnv(); err == nil || !strings.Contains(err.Error(), "CARMY_STATE_KEY: must be at least 32") || strings.Contains(err.Error(), "beef") {
		t.Fatalf("FromEnv with a short key = %v", err)
	}
}
