package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// List is a list of strings from carmy.toml or from a comma-separated
// environment variable, with where it was set, so that the host can
// locate a value it refuses.
type List struct {
	Values []string
	Site   string // "carmy.toml:7", or the variable's name
}

// The environment variables of the browser and session settings.
const (
	envAllowedHosts   = "CARMY_ALLOWED_HOSTS"   // comma-separated
	envAllowedOrigins = "CARMY_ALLOWED_ORIGINS" // comma-separated
	envSessionTimeout = "CARMY_SESSION_TIMEOUT"
	envMaxSessions    = "CARMY_MAX_SESSIONS"
)

// parseList checks a top-level key that holds a list of strings. Whether
// each string is a valid host or origin is the host's to judge; it gets
// the key's site for that.
func parseList(d *document, path, key, example string, fail func(line int, format string, args ...any)) List {
	v := d.value(key)
	if v == nil {
		return List{}
	}
	line := d.line(key)
	items, ok := v.([]any)
	if !ok {
		fail(line, "%s must be a list of strings such as %s, not %s", key, example, tomlValue(v))
		return List{}
	}
	l := List{Site: fmt.Sprintf("%s:%d", path, line)}
	for _, item := range items {
		s, ok := item.(string)
		if !ok {
			fail(line, "%s must be strings such as %s, not %s", key, example, tomlValue(item))
			return List{}
		}
		l.Values = append(l.Values, s)
	}
	return l
}

// parseMaxSessions checks max_sessions, a positive number of sessions.
func parseMaxSessions(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive number of sessions", s)
	}
	return n, nil
}

// boundaryFromEnv applies CARMY_ALLOWED_HOSTS, CARMY_ALLOWED_ORIGINS,
// CARMY_SESSION_TIMEOUT and CARMY_MAX_SESSIONS to c.
func boundaryFromEnv(c *Settings) []error {
	var errs []error
	list := func(name string, l *List) {
		v := os.Getenv(name)
		if v == "" {
			return
		}
		*l = List{Site: name}
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				l.Values = append(l.Values, s)
			}
		}
	}
	list(envAllowedHosts, &c.AllowedHosts)
	list(envAllowedOrigins, &c.AllowedOrigins)
	if v := os.Getenv(envSessionTimeout); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envSessionTimeout, Err: err})
		}
		c.SessionTimeout = d
	}
	if v := os.Getenv(envMaxSessions); v != "" {
		n, err := parseMaxSessions(v)
		if err != nil {
			errs = append(errs, &Problem{Site: envMaxSessions, Err: err})
		}
		c.MaxSessions = n
	}
	return errs
}
