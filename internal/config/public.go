package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// The environment variables of the idempotency window, the public URL
// and the tasks' TTL.
const (
	envIdempotencyWindow = "CARMY_IDEMPOTENCY_WINDOW"
	envPublicURL         = "CARMY_PUBLIC_URL"
	envStateKey          = "CARMY_STATE_KEY"
	envTaskTTL           = "CARMY_TASK_TTL"
)

// minStateKey is the shortest state_key, in bytes.
const minStateKey = 32

// parseStateKey checks state_key: at least 32 bytes, in hex. The error
// never repeats the value: it is a secret.
func parseStateKey(s string) ([]byte, error) {
	k, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(k) < minStateKey {
		return nil, fmt.Errorf("must be at least %d random bytes in hex (%d hex digits), such as the output of \"openssl rand -hex 32\"; the value is not shown", minStateKey, 2*minStateKey)
	}
	return k, nil
}

// parsePublicURL checks public_url: an absolute http or https URL with a
// host, and no query or fragment, since paths are appended to it.
func parsePublicURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL with a host and no query, such as \"https://tools.example.com\"", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// storeFromEnv applies CARMY_IDEMPOTENCY_WINDOW, CARMY_PUBLIC_URL,
// CARMY_STATE_KEY and CARMY_TASK_TTL to c.
func storeFromEnv(c *Settings) []error {
	var errs []error
	if v := os.Getenv(envIdempotencyWindow); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envIdempotencyWindow, Err: err})
		}
		c.IdempotencyWindow = d
	}
	if v := os.Getenv(envPublicURL); v != "" {
		u, err := parsePublicURL(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envPublicURL, Err: err})
		}
		c.PublicURL = u
	}
	if v := os.Getenv(envStateKey); v != "" {
		k, err := parseStateKey(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envStateKey, Err: err})
		}
		c.StateKey = k
	}
	if v := os.Getenv(envTaskTTL); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envTaskTTL, Err: err})
		}
		c.TaskTTL = d
	}
	return errs
}
