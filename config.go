package carmy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// Config is the host configuration that [App] reads from carmy.toml and
// CARMY_* environment variables. A zero field is unset and leaves the
// builder's default.
//
// A carmy.toml with every key:
//
//	listen = "127.0.0.1:3000"          # Builder.Run's address
//	body_limit = "1MiB"                # bytes: an integer, or with B, KB, KiB, MB, MiB, GB, GiB
//	timeout = "60s"                    # default deadline of an execution
//	drain_timeout = "30s"              # how long a shutdown lets running calls finish
//	log_level = "info"                 # debug, info, warn or error: log to standard error
//	allow_unauthenticated = false      # serve a non-loopback address without authentication
//	store_url = "redis://redis:6379/0" # shared idempotency store and locker (see store.Register); redis_url is the same
//
//	[[tokens]]                         # a bearer token, known by its hash (see HashToken)
//	sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//	principal = "alice"
//	permissions = ["confirm:cancel_order"]
type Config struct {
	Listen               string        // address Run serves on, such as "127.0.0.1:3000"
	BodyLimit            int64         // largest request body, in bytes
	Timeout              time.Duration // default deadline of an execution
	DrainTimeout         time.Duration // how long a shutdown lets running calls finish
	LogLevel             string        // "debug", "info", "warn" or "error"
	AllowUnauthenticated bool          // serve a non-loopback address without authentication
	StoreURL             string        // shared idempotency store and locker, as Builder.StoreURL takes it
	Tokens               []Token       // bearer tokens: App authenticates with BearerTokens(Tokens...)
}

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
)

// defaultConfigFile is the file App reads when CARMY_CONFIG is not set and
// the file exists in the working directory.
const defaultConfigFile = "carmy.toml"

// LoadConfig reads and checks one carmy.toml. Unknown keys and bad values
// are errors; every problem found is reported, joined with [errors.Join],
// each a [*BuildError] whose Site is the file and line ("carmy.toml:7").
// Environment variables play no part; see [AppConfig].
func LoadConfig(path string) (Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return Config{}, &BuildError{Site: path, Err: fmt.Errorf("reading the configuration: %w", err)}
	}
	return parseConfig(path, string(src))
}

// AppConfig returns the configuration [App] uses: the file named by
// CARMY_CONFIG, else ./carmy.toml when it exists, else none; then
// CARMY_LISTEN, CARMY_BODY_LIMIT, CARMY_TIMEOUT, CARMY_DRAIN_TIMEOUT,
// CARMY_LOG_LEVEL, CARMY_ALLOW_UNAUTHENTICATED and CARMY_STORE_URL, when set
// and not empty,
// override the file's values. A bad variable is a [*BuildError] whose Site
// is its name.
func AppConfig() (Config, error) {
	var (
		c    Config
		errs []error
	)
	path, explicit := os.Getenv(envConfig), true
	if path == "" {
		path, explicit = defaultConfigFile, false
	}
	src, err := os.ReadFile(path)
	switch {
	case err == nil:
		if c, err = parseConfig(path, string(src)); err != nil {
			errs = append(errs, err)
		}
	case explicit:
		errs = append(errs, &BuildError{Site: envConfig, Err: fmt.Errorf("cannot read the configuration file it names: %w", err)})
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, &BuildError{Site: path, Err: fmt.Errorf("cannot read the configuration file: %w", err)})
	}
	env := func(name string, set func(string) error) {
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := set(v); err != nil {
			errs = append(errs, &BuildError{Site: name, Err: err})
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
	return c, errors.Join(errs...)
}

// configure applies the configuration of App to the builder; problems are
// reported by Build, Listen and Run.
func (b *Builder) configure() {
	c, err := AppConfig()
	if err != nil {
		b.errs = append(b.errs, flatten(err)...)
	}
	if c.Listen != "" {
		b.addr = c.Listen
	}
	if c.BodyLimit > 0 {
		b.bodyLimit = c.BodyLimit
	}
	if c.Timeout > 0 {
		b.timeout = c.Timeout
	}
	if c.DrainTimeout > 0 {
		b.drain = c.DrainTimeout
	}
	if c.LogLevel != "" {
		var level slog.Level
		_ = level.UnmarshalText([]byte(c.LogLevel)) // checked by parseLogLevel
		b.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	if c.AllowUnauthenticated {
		b.allowAnonymous = true
	}
	if c.StoreURL != "" {
		b.storeURL = c.StoreURL
	}
	if len(c.Tokens) > 0 {
		b.auth = BearerTokens(c.Tokens...) // the tokens that passed the checks
	}
}

// flatten undoes errors.Join, so that the builder holds one *BuildError
// per problem.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// fileConfig is carmy.toml as decoded, before its values are checked.
type fileConfig struct {
	Listen               any `toml:"listen"`
	BodyLimit            any `toml:"body_limit"`
	Timeout              any `toml:"timeout"`
	DrainTimeout         any `toml:"drain_timeout"`
	LogLevel             any `toml:"log_level"`
	AllowUnauthenticated any `toml:"allow_unauthenticated"`
	StoreURL             any `toml:"store_url"`
	RedisURL             any `toml:"redis_url"` // store_url by another name, for Redis
	Tokens               any `toml:"tokens"`
}

const knownKeys = "listen, body_limit, timeout, drain_timeout, log_level, allow_unauthenticated, store_url (or redis_url) and [[tokens]]"

func parseConfig(path, src string) (Config, error) {
	var raw fileConfig
	md, err := toml.Decode(src, &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Config{}, &BuildError{Site: fmt.Sprintf("%s:%d", path, pe.Position.Line), Err: errors.New(pe.Message)}
		}
		return Config{}, &BuildError{Site: path, Err: err}
	}
	type problem struct {
		line int
		err  error
	}
	var (
		c        Config
		problems []problem
		lines    = scanKeys(src)
	)
	fail := func(line int, format string, args ...any) {
		site := path
		if line > 0 {
			site = fmt.Sprintf("%s:%d", path, line)
		}
		problems = append(problems, problem{line, &BuildError{Site: site, Err: fmt.Errorf(format, args...)}})
	}

	// Unknown keys, outermost only: [extra] and extra.x are one mistake.
	var unknown []string
	seen := map[string]int{}
	for _, k := range md.Undecoded() {
		if k[0] == "tokens" {
			continue // checked with the tokens
		}
		name := k.String()
		n := seen[name]
		seen[name]++
		if slices.ContainsFunc(unknown, func(u string) bool { return strings.HasPrefix(name, u+".") }) {
			continue
		}
		unknown = append(unknown, name)
		fail(lines.nth(name, n), "unknown key %q; carmy.toml has %s", name, knownKeys)
	}

	scalar := func(key string, v any, parse func(string) error, want string) {
		if v == nil {
			return
		}
		s, ok := v.(string)
		if !ok {
			fail(lines.line(key, 0), "%s must be %s, not %s", key, want, tomlValue(v))
			return
		}
		if err := parse(s); err != nil {
			fail(lines.line(key, 0), "%s: %v", key, err)
		}
	}
	scalar("listen", raw.Listen, func(s string) (err error) { c.Listen, err = parseListen(s); return }, `an address such as "127.0.0.1:3000"`)
	if n, ok := raw.BodyLimit.(int64); ok {
		if n <= 0 {
			fail(lines.line("body_limit", 0), "body_limit must be a positive number of bytes, not %d", n)
		}
		c.BodyLimit = n
	} else {
		scalar("body_limit", raw.BodyLimit, func(s string) (err error) { c.BodyLimit, err = parseBytes(s); return }, `a number of bytes or a size such as "1MiB"`)
	}
	scalar("timeout", raw.Timeout, func(s string) (err error) { c.Timeout, err = parseDuration(s); return }, `a duration such as "30s"`)
	scalar("drain_timeout", raw.DrainTimeout, func(s string) (err error) { c.DrainTimeout, err = parseDuration(s); return }, `a duration such as "30s"`)
	scalar("log_level", raw.LogLevel, func(s string) (err error) { c.LogLevel, err = parseLogLevel(s); return }, `"debug", "info", "warn" or "error"`)
	if raw.AllowUnauthenticated != nil {
		b, ok := raw.AllowUnauthenticated.(bool)
		if !ok {
			fail(lines.line("allow_unauthenticated", 0), "allow_unauthenticated must be true or false, not %s", tomlValue(raw.AllowUnauthenticated))
		}
		c.AllowUnauthenticated = b
	}
	scalar("store_url", raw.StoreURL, func(s string) (err error) { c.StoreURL, err = parseStoreURL(s); return }, `a URL such as "redis://redis:6379/0"`)
	if raw.RedisURL != nil && raw.StoreURL != nil {
		fail(lines.line("redis_url", 0), "redis_url and store_url name the same setting; keep one")
	} else {
		scalar("redis_url", raw.RedisURL, func(s string) (err error) { c.StoreURL, err = parseStoreURL(s); return }, `a URL such as "redis://redis:6379/0"`)
	}
	c.Tokens = parseTokens(raw.Tokens, lines, fail)
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
func parseTokens(v any, lines keyLines, fail func(line int, format string, args ...any)) []Token {
	var tables []map[string]any
	switch v := v.(type) {
	case nil:
		return nil
	case []map[string]any:
		tables = v
	case []any:
		for _, t := range v {
			m, ok := t.(map[string]any)
			if !ok {
				fail(lines.line("tokens", 0), "tokens must be tables with sha256, principal and permissions, such as [[tokens]]; found %s", tomlValue(t))
				return nil
			}
			tables = append(tables, m)
		}
	default:
		fail(lines.line("tokens", 0), "tokens must be [[tokens]] tables with sha256, principal and permissions, not %s", tomlValue(v))
		return nil
	}
	var tokens []Token
	first := map[string]int{} // hash → index of the first token with it
	for i, m := range tables {
		// The line of one of this table's keys, else of its header, else
		// of an inline array's key.
		at := func(key string) int {
			if l := lines.line("tokens."+key, i); l > 0 && key != "" {
				return l
			}
			if l := lines.line("tokens", i); l > 0 {
				return l
			}
			return lines.line("tokens", 0)
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

// keyLines locates keys in a TOML document for messages: the TOML library
// reports positions of syntax errors, not of keys. It reads the common
// layout (one key per line, [table] and [[array]] headers) and gives up
// quietly on anything else; a message then names the key without a line.
type keyLines []keyLine

type keyLine struct {
	key   string // dotted, as toml.Key.String writes it
	table int    // inside the n-th [[array]] table of that name, from 0
	line  int
}

// line returns the line of key inside the table-th table, or 0.
func (ks keyLines) line(key string, table int) int {
	for _, k := range ks {
		if k.key == key && k.table == table {
			return k.line
		}
	}
	return 0
}

// nth returns the line of the n-th occurrence of key, or 0.
func (ks keyLines) nth(key string, n int) int {
	for _, k := range ks {
		if k.key == key {
			if n == 0 {
				return k.line
			}
			n--
		}
	}
	return 0
}

func scanKeys(src string) keyLines {
	var (
		out     keyLines
		table   string
		index   int
		arrays  = map[string]int{}
		depth   int    // open brackets and braces of a value spanning lines
		inMulti string // the delimiter of an open multi-line string
	)
	for i, line := range strings.Split(strings.TrimPrefix(src, "\ufeff"), "\n") {
		n := i + 1
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		if depth > 0 {
			depth += nesting(line)
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "" || t[0] == '#':
		case strings.HasPrefix(t, "[["):
			end := strings.Index(t, "]]")
			if end < 0 {
				continue
			}
			table = normalizeKey(t[2:end])
			index = arrays[table]
			arrays[table]++
			out = append(out, keyLine{table, index, n})
		case t[0] == '[':
			end := strings.IndexByte(t, ']')
			if end < 0 {
				continue
			}
			table, index = normalizeKey(t[1:end]), 0
			out = append(out, keyLine{table, 0, n})
		default:
			eq := indexOutsideQuotes(t, '=')
			if eq < 0 {
				continue
			}
			key := normalizeKey(t[:eq])
			if table != "" {
				key = table + "." + key
			}
			out = append(out, keyLine{key, index, n})
			value := t[eq+1:]
			for _, delim := range []string{`"""`, `'''`} {
				if strings.Count(value, delim)%2 == 1 {
					inMulti = delim
				}
			}
			depth = nesting(value)
		}
	}
	return out
}

// nesting counts the brackets and braces a line opens minus those it
// closes, outside strings and comments.
func nesting(s string) int {
	d := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return d
		case c == '[' || c == '{':
			d++
		case c == ']' || c == '}':
			d--
		}
	}
	return d
}

func indexOutsideQuotes(s string, b byte) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == b:
			return i
		}
	}
	return -1
}

// normalizeKey turns a written key (a.b, "a b".c, a . b) into the form of
// toml.Key.String.
func normalizeKey(s string) string {
	var parts toml.Key
	for {
		s = strings.TrimSpace(s)
		if s == "" {
			break
		}
		var part string
		if q := s[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return ""
			}
			part, s = s[1:end+1], s[end+2:]
			if u, err := strconv.Unquote(`"` + part + `"`); err == nil && q == '"' {
				part = u // a basic string's escapes
			}
		} else {
			dot := strings.IndexByte(s, '.')
			if dot < 0 {
				dot = len(s)
			}
			part, s = strings.TrimSpace(s[:dot]), s[dot:]
		}
		parts = append(parts, part)
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, ".") {
			break
		}
		s = s[1:]
	}
	return parts.String()
}
