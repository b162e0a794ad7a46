package config

import (
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
	envTaskTTL           = "CARMY_TASK_TTL"
)

// parsePublicURL checks public_url: an absolute http or https URL with a
// host, and no query or fragment, since paths are appended to it.
func parsePublicURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL with a host and no query, such as \"https://tools.example.com\"", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// storeFromEnv applies CARMY_IDEMPOTENCY_WINDOW, CARMY_PUBLIC_URL and
// CARMY_TASK_TTL to c.
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
	if v := os.Getenv(envTaskTTL); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envTaskTTL, Err: err})
		}
		c.TaskTTL = d
	}
	return errs
}
