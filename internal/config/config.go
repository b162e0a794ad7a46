// Package config reads a carmy host's settings: the carmy.toml file and the
// CARMY_* environment variables. It returns plain [Settings], which the
// root package's App applies to its builder, and a [*Problem] for every
// mistake, naming the file and line, or the variable.
//
// Keys and their positions come from the TOML library itself: a file is
// decoded into one [toml.Primitive] per top-level key, each value is
// decoded on its own, and the line of a key is the position the library
// records for it, which a [toml.ParseError] from decoding that key
// carries.
package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Settings are a host's settings. A zero field is unset and leaves the
// builder's default.
type Settings struct {
	Listen               string        // address Run serves on, such as "127.0.0.1:3000"
	BodyLimit            int64         // largest request body, in bytes
	Timeout              time.Duration // default deadline of an execution
	DrainTimeout         time.Duration // how long a shutdown lets running calls finish
	LogLevel             string        // "debug", "info", "warn" or "error"
	AllowUnauthenticated bool          // serve a non-loopback address without authentication
	StoreURL             string        // shared idempotency store and locker, by URL
	AuditFile            string        // JSON-lines audit file
	AuditURL             string        // audit sink, by URL
	Tokens               []Token       // bearer tokens
	OAuth                OAuth         // the OAuth resource server; none when Issuer is ""
	AllowedHosts         List          // Host names a local proxy forwards with
	AllowedOrigins       List          // browser origins whose pages may call the server
	SessionTimeout       time.Duration // how long an idle MCP session lives
	MaxSessions          int           // MCP sessions per principal
	EffectPermissions    EffectPermissions
	IdempotencyWindow    time.Duration // the age below which no idempotency record is evicted
	TaskTTL              time.Duration // how long a finished task is kept
	PublicURL            string        // the address clients use, for links and OAuth metadata
	RateLimits           RateLimits    // [rate_limits]
	StateKey             []byte        // signs the sessionless protocol's request state
	ToolSearch           bool          // serve the search_tools tool
	DeferredTools        List          // tools a model should load on demand
	Mounts               []Mount       // [[mount]]
	PolicyFile           string        // Cedar policies, reloaded when the file changes
	PolicyShadow         bool          // policy_mode = "shadow": evaluate and audit, never enforce
	PolicyPoll           time.Duration // how often the policy file is read
}

// Token is a bearer token of [[tokens]], known by its hash.
type Token struct {
	SHA256      string // hex SHA-256 of the token, lower case
	Principal   string
	Permissions []string
}

// Problem is one mistake in the configuration. Site is the file and line
// ("carmy.toml:7"), the file alone when the line is not known, or the
// environment variable's name.
type Problem struct {
	Site string
	Err  error
}

// Error returns the site and the mistake.
func (p *Problem) Error() string { return p.Site + ": " + p.Err.Error() }

// Unwrap returns the mistake.
func (p *Problem) Unwrap() error { return p.Err }

// The environment variables that override carmy.toml, and the one that
// names it.
const (
	envConfig               = "CARMY_CONFIG"
	envListen               = "CARMY_LISTEN"
	envBodyLimit            = "CARMY_BODY_LIMIT"
	envTimeout              = "CARMY_TIMEOUT"
	envDrainTimeout         = "CARMY_DRAIN_TIMEOUT"
	envLogLevel             = "CARMY_LOG_LEVEL"
	envAllowUnauthenticated = "CARMY_ALLOW_UNAUTHENTICATED"
	envStoreURL             = "CARMY_STORE_URL"
	envAuditFile            = "CARMY_AUDIT_FILE"
	envAuditURL             = "CARMY_AUDIT_URL"
	envPolicyFile           = "CARMY_POLICY_FILE"
)

// defaultFile is the file read when CARMY_CONFIG is not set and the file
// exists in the working directory.
const defaultFile = "carmy.toml"

// Load reads and checks one carmy.toml. Unknown keys and bad values are
// problems; every problem found is reported, joined with [errors.Join],
// each a [*Problem]. Environment variables play no part; see [FromEnv].
func Load(path string) (Settings, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, &Problem{Site: path, Err: fmt.Errorf("reading the configuration: %w", err)}
	}
	return parse(path, string(src))
}

// FromEnv returns the settings of an App: the file named by CARMY_CONFIG,
// else ./carmy.toml when it exists, else none; then CARMY_LISTEN,
// CARMY_BODY_LIMIT, CARMY_TIMEOUT, CARMY_DRAIN_TIMEOUT, CARMY_LOG_LEVEL,
// CARMY_ALLOW_UNAUTHENTICATED, CARMY_STORE_URL, CARMY_AUDIT_FILE,
// CARMY_AUDIT_URL, CARMY_OAUTH_ISSUER, CARMY_OAUTH_AUDIENCE,
// CARMY_OAUTH_SCOPES (comma-separated), CARMY_ALLOWED_HOSTS,
// CARMY_ALLOWED_ORIGINS (both comma-separated), CARMY_SESSION_TIMEOUT,
// CARMY_MAX_SESSIONS, CARMY_IDEMPOTENCY_WINDOW, CARMY_PUBLIC_URL,
// CARMY_STATE_KEY, CARMY_TASK_TTL and CARMY_POLICY_FILE, when set and not empty, override
// the file's values.
// A bad variable is a [*Problem] whose Site is its name.
func FromEnv() (Settings, error) {
	var (
		c    Settings
		errs []error
	)
	path, explicit := os.Getenv(envConfig), true
	if path == "" {
		path, explicit = defaultFile, false
	}
	src, err := os.ReadFile(path)
	switch {
	case err == nil:
		if c, err = parse(path, string(src)); err != nil {
			errs = append(errs, err)
		}
	case explicit:
		errs = append(errs, &Problem{Site: envConfig, Err: fmt.Errorf("cannot read the configuration file it names: %w", err)})
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, &Problem{Site: path, Err: fmt.Errorf("cannot read the configuration file: %w", err)})
	}
	env := func(name string, set func(string) error) {
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := set(v); err != nil {
			errs = append(errs, &Problem{Site: name, Err: err})
		}
	}
	env(envListen, func(v string) (err error) { c.Listen, err = parseListen(v); return })
	env(envBodyLimit, func(v string) (err error) { c.BodyLimit, err = parseBytes(v); return })
	env(envTimeout, func(v string) (err error) { c.Timeout, err = parseDuration(v); return })
	env(envDrainTimeout, func(v string) (err error) { c.DrainTimeout, err = parseDuration(v); return })
	env(envLogLevel, func(v string) (err error) { c.LogLevel, err = parseLogLevel(v); return })
	env(envAllowUnauthenticated, func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		c.AllowUnauthenticated = b
		return nil
	})
	env(envStoreURL, func(v string) (err error) { c.StoreURL, err = parseStoreURL(v); return })
	env(envAuditFile, func(v string) error { c.AuditFile = v; return nil })
	env(envAuditURL, func(v string) (err error) { c.AuditURL, err = parseAuditURL(v); return })
	env(envPolicyFile, func(v string) error { c.PolicyFile = v; return nil })
	errs = append(errs, oauthFromEnv(&c)...)
	errs = append(errs, boundaryFromEnv(&c)...)
	errs = append(errs, storeFromEnv(&c)...)
	return c, errors.Join(errs...)
}

// The top-level keys of carmy.toml; redis_url is store_url by another
// name, for Redis.
var knownKeys = []string{"listen", "body_limit", "timeout", "drain_timeout", "log_level", "allow_unauthenticated", "store_url", "redis_url", "audit_file", "audit_url", "allowed_hosts", "allowed_origins", "session_timeout", "max_sessions", "idempotency_window", "task_ttl", "public_url", "state_key", "policy_file", "policy_mode", "policy_poll", "tokens", "oauth", "effect_permissions", "rate_limits", "tool_search", "deferred_tools", "mount"}

const knownKeysText = "listen, body_limit, timeout, drain_timeout, log_level, allow_unauthenticated, store_url (or redis_url), audit_file, audit_url, allowed_hosts, allowed_origins, session_timeout, max_sessions, idempotency_window, task_ttl, public_url, state_key, policy_file, policy_mode, policy_poll, [[tokens]], [oauth], [effect_permissions], [rate_limits], tool_search, deferred_tools and [[mount]]"

// document is a decoded carmy.toml: each top-level key's value, still
// undecoded, with the library's metadata that locates it.
type document struct {
	md  toml.MetaData
	raw map[string]toml.Primitive
	src string
}

// value decodes the value of a top-level key; nil when the key is absent.
func (d *document) value(key string) any {
	p, ok := d.raw[key]
	if !ok {
		return nil
	}
	var v any
	_ = d.md.PrimitiveDecode(p, &v) // any TOML value decodes into any
	return v
}

// line returns the line of a top-level key, or 0.
func (d *document) line(key string) int {
	p, ok := d.raw[key]
	if !ok {
		return 0
	}
	return lineOf(d.md, p)
}

// locator finds nothing but the position of the value it is decoded from:
// the library reports the position of the key whose value failed to
// decode.
type locator struct{}

var errLocate = errors.New("locating the key")

// UnmarshalTOML fails, so that the library says where the key is.
func (locator) UnmarshalTOML(any) error { return errLocate }

// lineOf returns the line the TOML library records for p's key, or 0.
func lineOf(md toml.MetaData, p toml.Primitive) int {
	var pe toml.ParseError
	if err := md.PrimitiveDecode(p, &locator{}); errors.As(err, &pe) {
		return pe.Position.Line
	}
	return 0
}

func parse(path, src string) (Settings, error) {
	d := document{src: src}
	var err error
	if d.md, err = toml.Decode(src, &d.raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Settings{}, &Problem{Site: fmt.Sprintf("%s:%d", path, pe.Position.Line), Err: errors.New(pe.Message)}
		}
		return Settings{}, &Problem{Site: path, Err: err}
	}
	type problem struct {
		line int
		err  error
	}
	var (
		c        Settings
		problems []problem
	)
	fail := func(line int, format string, args ...any) {
		site := path
		if line > 0 {
			site = fmt.Sprintf("%s:%d", path, line)
		}
		problems = append(problems, problem{line, &Problem{Site: site, Err: fmt.Errorf(format, args...)}})
	}

	scalar := func(key string, parse func(string) error, want string) {
		v := d.value(key)
		if v == nil {
			return
		}
		s, ok := v.(string)
		if !ok {
			fail(d.line(key), "%s must be %s, not %s", key, want, tomlValue(v))
			return
		}
		if err := parse(s); err != nil {
			fail(d.line(key), "%s: %v", key, err)
		}
	}
	scalar("listen", func(s string) (err error) { c.Listen, err = parseListen(s); return }, `an address such as "127.0.0.1:3000"`)
	if n, ok := d.value("body_limit").(int64); ok {
		if n <= 0 {
			fail(d.line("body_limit"), "body_limit must be a positive number of bytes, not %d", n)
		}
		c.BodyLimit = n
	} else {
		scalar("body_limit", func(s string) (err error) { c.BodyLimit, err = parseBytes(s); return }, `a number of bytes or a size such as "1MiB"`)
	}
	scalar("timeout", func(s string) (err error) { c.Timeout, err = parseDuration(s); return }, `a duration such as "30s"`)
	scalar("drain_timeout", func(s string) (err error) { c.DrainTimeout, err = parseDuration(s); return }, `a duration such as "30s"`)
	scalar("log_level", func(s string) (err error) { c.LogLevel, err = parseLogLevel(s); return }, `"debug", "info", "warn" or "error"`)
	if v := d.value("allow_unauthenticated"); v != nil {
		b, ok := v.(bool)
		if !ok {
			fail(d.line("allow_unauthenticated"), "allow_unauthenticated must be true or false, not %s", tomlValue(v))
		}
		c.AllowUnauthenticated = b
	}
	scalar("store_url", func(s string) (err error) { c.StoreURL, err = parseStoreURL(s); return }, `a URL such as "redis://redis:6379/0"`)
	_, hasStore := d.raw["store_url"]
	if _, hasRedis := d.raw["redis_url"]; hasStore && hasRedis {
		fail(d.line("redis_url"), "redis_url and store_url name the same setting; keep one")
	} else {
		scalar("redis_url", func(s string) (err error) { c.StoreURL, err = parseStoreURL(s); return }, `a URL such as "redis://redis:6379/0"`)
	}
	scalar("audit_file", func(s string) error {
		if s == "" {
			return errors.New("must name a file, such as \"/var/log/carmy/audit.jsonl\"")
		}
		c.AuditFile = s
		return nil
	}, `a path such as "/var/log/carmy/audit.jsonl"`)
	scalar("audit_url", func(s string) (err error) { c.AuditURL, err = parseAuditURL(s); return }, `a URL such as "postgres://carmy@db/carmy"`)
	c.AllowedHosts = parseList(&d, path, "allowed_hosts", `["tools.example.com"]`, fail)
	c.AllowedOrigins = parseList(&d, path, "allowed_origins", `["https://app.example.com"]`, fail)
	scalar("session_timeout", func(s string) (err error) { c.SessionTimeout, err = parseDuration(s); return }, `a duration such as "10m"`)
	if v := d.value("max_sessions"); v != nil {
		if n, ok := v.(int64); !ok || n <= 0 {
			fail(d.line("max_sessions"), "max_sessions must be a positive number of sessions, not %s", tomlValue(v))
		} else {
			c.MaxSessions = int(n)
		}
	}
	scalar("idempotency_window", func(s string) (err error) { c.IdempotencyWindow, err = parseDuration(s); return }, `a duration such as "10m"`)
	scalar("task_ttl", func(s string) (err error) { c.TaskTTL, err = parseDuration(s); return }, `a duration such as "1h"`)
	scalar("public_url", func(s string) (err error) { c.PublicURL, err = parsePublicURL(s); return }, `a URL such as "https://tools.example.com"`)
	scalar("state_key", func(s string) (err error) { c.StateKey, err = parseStateKey(s); return }, `64 hex digits, such as the output of "openssl rand -hex 32"`)
	if v := d.value("tool_search"); v != nil {
		b, ok := v.(bool)
		if !ok {
			fail(d.line("tool_search"), "tool_search must be true or false, not %s", tomlValue(v))
		}
		c.ToolSearch = b
	}
	c.DeferredTools = parseList(&d, path, "deferred_tools", `["export_orders"]`, fail)
	scalar("policy_file", func(s string) error {
		if s == "" {
			return errors.New("must name a file, such as \"policies.cedar\"")
		}
		c.PolicyFile = s
		return nil
	}, `a path such as "policies.cedar"`)
	scalar("policy_mode", func(s string) error {
		if s != "enforce" && s != "shadow" {
			return fmt.Errorf("%q is not a mode; use \"enforce\" or \"shadow\"", s)
		}
		c.PolicyShadow = s == "shadow"
		return nil
	}, `"enforce" or "shadow"`)
	scalar("policy_poll", func(s string) (err error) { c.PolicyPoll, err = parseDuration(s); return }, `a duration such as "2s"`)
	c.Tokens = parseTokens(&d, fail)
	c.OAuth = parseOAuth(&d, path, fail)
	c.EffectPermissions = parseEffectPermissions(&d, path, fail)
	c.RateLimits = parseRateLimits(&d, path, fail)
	c.Mounts = parseMounts(&d, path, fail)
	if c.OAuth.Issuer != "" && len(c.Tokens) > 0 {
		fail(d.line("oauth"), "[oauth] and [[tokens]] both authenticate callers; keep one")
	}

	// Unknown keys, outermost only: [extra] and extra.x are one mistake.
	for _, k := range slices.Sorted(maps.Keys(d.raw)) {
		if !slices.Contains(knownKeys, k) {
			fail(d.line(k), "unknown key %q; carmy.toml has %s", k, knownKeysText)
		}
	}

	// In the order of the file; problems without a line last.
	slices.SortStableFunc(problems, func(a, b problem) int {
		return cmp.Compare(uint(a.line-1), uint(b.line-1))
	})
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p.err
	}
	return c, errors.Join(errs...)
}

// parseTokens checks the [[tokens]] tables.
//
// A key of the i-th table has its own line only where the TOML library
// records one: it keeps one position per dotted key, so in a file of
// several [[tokens]] tables "tokens.sha256" and the "tokens" header are
// located in the last table. Problems of the other tables name the table
// by its index and the file without a line; the tables of an inline array
// ("tokens = [{...}, {...}]") are all located at its key.
func parseTokens(d *document, fail func(line int, format string, args ...any)) []Token {
	var (
		tables []map[string]any
		inline bool
	)
	v := d.value("tokens")
	switch v := v.(type) {
	case nil:
		return nil
	case []map[string]any:
		tables = v
	case []any:
		inline = true
		for _, t := range v {
			m, ok := t.(map[string]any)
			if !ok {
				fail(d.line("tokens"), "tokens must be tables with sha256, principal and permissions, such as [[tokens]]; found %s", tomlValue(t))
				return nil
			}
			tables = append(tables, m)
		}
	default:
		fail(d.line("tokens"), "tokens must be [[tokens]] tables with sha256, principal and permissions, not %s", tomlValue(v))
		return nil
	}
	var keys []map[string]toml.Primitive // the last table's keys, to locate them
	if !inline {
		_ = d.md.PrimitiveDecode(d.raw["tokens"], &keys) // tables of tables, as checked above
	}
	var tokens []Token
	first := map[string]int{} // hash → index of the first token with it
	for i, m := range tables {
		// The line of one of this table's keys, else of its header or an
		// inline array's key, where the library locates them.
		at := func(key string) int {
			switch {
			case inline:
				return d.line("tokens")
			case i != len(tables)-1:
				return 0
			}
			if i < len(keys) {
				if p, ok := keys[i][key]; ok {
					if l := lineOf(d.md, p); l > 0 {
						return l
					}
				}
			}
			return d.line("tokens")
		}
		var t Token
		ok := true
		bad := func(key, format string, args ...any) {
			fail(at(key), "tokens[%d]: "+format, append([]any{i}, args...)...)
			ok = false
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			switch k {
			case "sha256", "principal":
				s, isString := m[k].(string)
				if !isString {
					bad(k, "%s must be a string, not %s", k, tomlValue(m[k]))
					continue
				}
				if k == "sha256" {
					t.SHA256 = strings.ToLower(s)
				} else {
					t.Principal = s
				}
			case "permissions":
				list, isList := m[k].([]any)
				if !isList {
					bad(k, "permissions must be a list of strings such as [\"confirm:cancel_order\"], not %s", tomlValue(m[k]))
					continue
				}
				for _, p := range list {
					s, isString := p.(string)
					if !isString {
						bad(k, "permissions must be strings, not %s", tomlValue(p))
						break
					}
					t.Permissions = append(t.Permissions, s)
				}
			default:
				bad(k, "unknown key %q; a token has sha256, principal and permissions", k)
			}
		}
		switch _, has := m["sha256"]; {
		case !has:
			bad("", "sha256 is required: the hex SHA-256 of the token (carmy.HashToken, or: printf %%s TOKEN | sha256sum)")
		case !isHash(t.SHA256):
			if _, isString := m["sha256"].(string); isString {
				// The value is not repeated: it may be the secret itself.
				bad("sha256", "sha256 must be 64 hex digits, the SHA-256 of the token, not %d characters; write the hash (carmy.HashToken), never the token itself", len(t.SHA256))
			}
		default:
			if j, dup := first[t.SHA256]; dup {
				bad("sha256", "the same token as tokens[%d]; give each principal its own token", j)
			}
			first[t.SHA256] = i
		}
		if p, isString := m["principal"].(string); m["principal"] == nil || isString && p == "" {
			bad("principal", "principal is required: it names who calls with this token")
		}
		if ok {
			tokens = append(tokens, t)
		}
	}
	return tokens
}

// isHash reports whether s is 64 hex digits.
func isHash(s string) bool {
	h, err := hex.DecodeString(s)
	return err == nil && len(h) == sha256.Size
}

// tomlValue names a decoded TOML value for a message.
func tomlValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return "the integer " + strconv.FormatInt(v, 10)
	case float64:
		return "the number " + strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return "the boolean " + strconv.FormatBool(v)
	case []any, []map[string]any:
		return "a list"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func parseListen(s string) (string, error) {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", fmt.Errorf("%q is not an address such as \"127.0.0.1:3000\" or \":8080\"", s)
	}
	return s, nil
}

// parseStoreURL checks that a store URL has a scheme; the store's package
// checks the rest at Build. The value is not repeated: it may hold a
// password.
func parseStoreURL(s string) (string, error) {
	if scheme, _, ok := strings.Cut(s, "://"); !ok || scheme == "" {
		return "", errors.New("not a URL with a scheme, such as \"redis://redis:6379/0\" (the value is not shown: it may hold a password)")
	}
	return s, nil
}

// parseAuditURL checks that an audit URL has a scheme; the sink's package
// checks the rest at Build. The value is not repeated: it may hold a
// password.
func parseAuditURL(s string) (string, error) {
	if scheme, _, ok := strings.Cut(s, "://"); !ok || scheme == "" {
		return "", errors.New("not a URL with a scheme, such as \"postgres://carmy@db/carmy\" (the value is not shown: it may hold a password)")
	}
	return s, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"30s\", \"2m\" or \"1m30s\"", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

func parseLogLevel(s string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(s)); l {
	case "debug", "info", "warn", "error":
		return l, nil
	}
	return "", fmt.Errorf("%q is not a log level: use debug, info, warn or error", s)
}

// byteUnits are the units of a size, longest first where one is a suffix
// of another.
var byteUnits = []struct {
	name string
	size int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// parseBytes reads a size: a whole number of bytes, optionally with a unit
// (B, KB, MB, GB in powers of 1000; KiB, MiB, GiB, K, M, G in powers of
// 1024), case-insensitive.
func parseBytes(s string) (int64, error) {
	bad := fmt.Errorf("%q is not a size: write a whole number of bytes, or one with a unit such as \"512KiB\" or \"1MiB\"", s)
	num, unit := strings.TrimSpace(s), int64(1)
	lower := strings.ToLower(num)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.name) {
			num, unit = strings.TrimSpace(num[:len(num)-len(u.name)]), u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || strings.HasPrefix(num, "+") {
		return 0, bad
	}
	if n <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	if n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}
