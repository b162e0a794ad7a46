package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/internal/config"
)

const (
	aliceToken = "alice-token"
	bobToken   = "bob-token"
)

// hash is a token's hex SHA-256, as carmy.toml holds it.
func hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// configProblems returns the *config.Problem values of a joined error, as
// "site: message" strings.
func configProblems(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var be *config.Problem
		if !errors.As(err, &be) {
			t.Fatalf("problem %q (%T) is not a *config.Problem", err, err)
		}
		out = append(out, be.Site+": "+be.Err.Error())
	}
	if err != nil {
		walk(err)
	}
	return out
}

// wantProblems checks that every problem is found, each once, and no other.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	got := configProblems(t, err)
	for _, w := range want {
		n := 0
		for _, g := range got {
			if strings.HasPrefix(g, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("problem %q found %d times in:\n  %s", w, n, strings.Join(got, "\n  "))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n  %s", len(got), len(want), strings.Join(got, "\n  "))
	}
}

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "carmy.toml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		file string
		want config.Settings
	}{
		{"empty.toml", config.Settings{}},
		{"full.toml", config.Settings{
			Listen:       "127.0.0.1:3100",
			BodyLimit:    512 << 10,
			Timeout:      15 * time.Second,
			DrainTimeout: 5 * time.Second,
			LogLevel:     "warn",
			StoreURL:     "redis://redis:6379/0",
			AllowedHosts: config.List{Values: []string{"tools.example.com", "tools.example.com:8443"},
				Site: filepath.Join("testdata", "full.toml") + ":9"},
			AllowedOrigins: config.List{Values: []string{"https://app.example.com"},
				Site: filepath.Join("testdata", "full.toml") + ":10"},
			SessionTimeout:    5 * time.Minute,
			MaxSessions:       8,
			IdempotencyWindow: 15 * time.Minute,
			TaskTTL:           2 * time.Hour,
			PublicURL:         "https://tools.example.com",
			ToolSearch:        true,
			DeferredTools:     config.List{Values: []string{"export_orders"}, Site: filepath.Join("testdata", "full.toml") + ":17"},
			Tokens: []config.Token{
				{SHA256: hash(aliceToken), Principal: "alice", Permissions: []string{"confirm:cancel_order", "orders:write"}},
				{SHA256: hash(bobToken), Principal: "bob"},
			},
			RateLimits: config.RateLimits{
				Default: &config.Rate{Calls: 100, Per: time.Minute, Key: "rate_limits.default", Site: filepath.Join("testdata", "full.toml") + ":31"},
				Tools: map[string]config.Rate{
					"create_order": {Calls: 10, Per: 30 * time.Second, Key: "rate_limits.create_order", Site: filepath.Join("testdata", "full.toml") + ":32"},
				},
			},
		}},
		{"inline_tokens.toml", config.Settings{
			Listen:    ":3000",
			BodyLimit: 4096,
			Tokens: []config.Token{
				{SHA256: hash(aliceToken), Principal: "alice"},
				{SHA256: hash(bobToken), Principal: "bob", Permissions: []string{"read"}},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := config.Load(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadConfig:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A bad file names the file and the line of every problem, and the key.
func TestLoadConfigErrors(t *testing.T) {
	dir := "testdata"
	tests := []struct {
		file string
		want []string // prefixes of "site: message"
	}{
		{"syntax.toml", []string{"syntax.toml:3: "}},
		{"unknown.toml", []string{
			`unknown.toml:3: unknown key "time_out"; carmy.toml has listen, body_limit, timeout`,
			`unknown.toml:5: unknown key "server"`, // not server.port too
		}},
		{"bad_values.toml", []string{
			`bad_values.toml:2: listen must be an address such as "127.0.0.1:3000", not the integer 3000`,
			`bad_values.toml:3: body_limit: "1.5MiB" is not a size`,
			`bad_values.toml:4: timeout: "5x" is not a duration such as "30s"`,
			`bad_values.toml:5: drain_timeout: "-1s" must be positive`,
			`bad_values.toml:6: log_level: "loud" is not a log level: use debug, info, warn or error`,
			`bad_values.toml:7: allow_unauthenticated must be true or false, not "yes"`,
			`bad_values.toml:8: store_url: not a URL with a scheme, such as "redis://redis:6379/0" (the value is not shown: it may hold a password)`,
			`bad_values.toml:9: allowed_hosts must be a list of strings such as ["tools.example.com"], not "tools.example.com"`,
			`bad_values.toml:10: allowed_origins must be strings such as ["https://app.example.com"], not the integer 7`,
			`bad_values.toml:11: session_timeout: "0s" must be positive`,
			`bad_values.toml:12: max_sessions must be a positive number of sessions, not the integer 0`,
			`bad_values.toml:13: idempotency_window: "soon" is not a duration`,
			`bad_values.toml:14: public_url: "tools.example.com" is not an http or https URL`,
		}},
		{"bad_tokens.toml", []string{
			// The TOML library keeps one position per dotted key, that of the
			// last [[tokens]] table: an earlier table's problems name it by
			// index, without a line.
			"bad_tokens.toml: tokens[1]: sha256 must be 64 hex digits, the SHA-256 of the token, not 16 characters",
			`bad_tokens.toml: tokens[1]: unknown key "name"`,
			"bad_tokens.toml:12: tokens[2]: the same token as tokens[0]",
			"bad_tokens.toml:13: tokens[2]: permissions must be a list of strings",
			"bad_tokens.toml:11: tokens[2]: principal is required", // no principal line: the table's header
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := config.Load(filepath.Join(dir, tt.file))
			if err == nil {
				t.Fatal("no error")
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = dir + string(filepath.Separator) + w
			}
			wantProblems(t, err, want...)
			for _, secret := range []string{"bob-secret-token", "redis-host"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error repeats %q, which may be secret: %v", secret, err)
				}
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "carmy.toml"))
		if err == nil || !strings.Contains(err.Error(), "carmy.toml: reading the configuration") {
			t.Errorf("error %v, want one naming the file", err)
		}
	})

	t.Run("message", func(t *testing.T) {
		path := writeConfig(t, "\n\ntimeout = \"soon\"\n")
		_, err := config.Load(path)
		want := path + `:3: timeout: "soon" is not a duration such as "30s", "2m" or "1m30s"`
		if err == nil || err.Error() != want {
			t.Errorf("error\n  %v\nwant\n  %s", err, want)
		}
	})
}

func TestLoadConfigSizes(t *testing.T) {
	tests := []struct {
		value string // as written in the file
		want  int64  // 0: an error
	}{
		{`1048576`, 1 << 20},
		{`"1048576"`, 1 << 20},
		{`"1MiB"`, 1 << 20},
		{`"1 MiB"`, 1 << 20},
		{`"512KiB"`, 512 << 10},
		{`"512kib"`, 512 << 10},
		{`"64K"`, 64 << 10},
		{`"2M"`, 2 << 20},
		{`"1GiB"`, 1 << 30},
		{`"2KB"`, 2000},
		{`"3MB"`, 3_000_000},
		{`"1GB"`, 1_000_000_000},
		{`"100B"`, 100},
		{`0`, 0},
		{`-1`, 0},
		{`"0KiB"`, 0},
		{`"1.5MiB"`, 0},
		{`"MiB"`, 0},
		{`"+5"`, 0},
		{`"5 TiB"`, 0},
		{`"9999999999GiB"`, 0},
		{`1.5`, 0},
		{`true`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c, err := config.Load(writeConfig(t, "body_limit = "+tt.value+"\n"))
			if tt.want == 0 {
				if err == nil || !strings.Contains(err.Error(), ":1: body_limit") {
					t.Errorf("body_limit = %s: error %v, want one at line 1 naming body_limit", tt.value, err)
				}
				return
			}
			if err != nil || c.BodyLimit != tt.want {
				t.Errorf("body_limit = %s: %d, %v; want %d", tt.value, c.BodyLimit, err, tt.want)
			}
		})
	}
}

// Keys are located in the layouts people write: quoted and dotted keys,
// comments, values spanning lines, multi-line strings (which the TOML
// library locates at the line where the string ends).
func TestLoadConfigLines(t *testing.T) {
	src := `# comment = "not a key"
"listen" = "127.0.0.1:3000" # a quoted key
extra = """
timeout = "not a key either"
"""
list = [
  "a",
  "b",
]
timeout = "later"
`
	_, err := config.Load(writeConfig(t, src))
	got := configProblems(t, err)
	want := []string{`:5: unknown key "extra"`, `:6: unknown key "list"`, `:10: timeout: "later" is not a duration`}
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("no problem %q in %q", w, got)
		}
	}
}

// AppConfig reads CARMY_CONFIG, else ./carmy.toml, then the environment.
func TestAppConfig(t *testing.T) {
	full := filepath.Join("testdata", "full.toml")
	clearEnv := func(t *testing.T) {
		for _, v := range []string{"CARMY_CONFIG", "CARMY_LISTEN", "CARMY_BODY_LIMIT", "CARMY_TIMEOUT", "CARMY_DRAIN_TIMEOUT", "CARMY_LOG_LEVEL", "CARMY_ALLOW_UNAUTHENTICATED", "CARMY_STORE_URL",
			"CARMY_AUDIT_FILE", "CARMY_AUDIT_URL", "CARMY_ALLOWED_HOSTS", "CARMY_ALLOWED_ORIGINS", "CARMY_SESSION_TIMEOUT", "CARMY_MAX_SESSIONS",
			"CARMY_IDEMPOTENCY_WINDOW", "CARMY_PUBLIC_URL", "CARMY_TASK_TTL"} {
			t.Setenv(v, "")
		}
	}

	t.Run("browser and session variables", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", full)
		t.Setenv("CARMY_ALLOWED_HOSTS", " proxy.internal , ,tools.example.com:9000")
		t.Setenv("CARMY_ALLOWED_ORIGINS", "https://console.example.com")
		t.Setenv("CARMY_SESSION_TIMEOUT", "90s")
		t.Setenv("CARMY_MAX_SESSIONS", "3")
		c, err := config.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		want := config.List{Values: []string{"proxy.internal", "tools.example.com:9000"}, Site: "CARMY_ALLOWED_HOSTS"}
		if !reflect.DeepEqual(c.AllowedHosts, want) {
			t.Errorf("AllowedHosts = %+v, want %+v (the variable replaces the file's list)", c.AllowedHosts, want)
		}
		if want := (config.List{Values: []string{"https://console.example.com"}, Site: "CARMY_ALLOWED_ORIGINS"}); !reflect.DeepEqual(c.AllowedOrigins, want) {
			t.Errorf("AllowedOrigins = %+v, want %+v", c.AllowedOrigins, want)
		}
		if c.SessionTimeout != 90*time.Second || c.MaxSessions != 3 {
			t.Errorf("SessionTimeout, MaxSessions = %v, %d; want 1m30s, 3", c.SessionTimeout, c.MaxSessions)
		}

		t.Setenv("CARMY_SESSION_TIMEOUT", "forever")
		t.Setenv("CARMY_MAX_SESSIONS", "-2")
		_, err = config.FromEnv()
		wantProblems(t, err, `CARMY_SESSION_TIMEOUT: "forever" is not a duration`, `CARMY_MAX_SESSIONS: "-2" is not a positive number of sessions`)
	})

	t.Run("idempotency window and public URL variables", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", full)
		t.Setenv("CARMY_IDEMPOTENCY_WINDOW", "20m")
		t.Setenv("CARMY_PUBLIC_URL", "https://mcp.example.com")
		t.Setenv("CARMY_TASK_TTL", "3h")
		c, err := config.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if c.IdempotencyWindow != 20*time.Minute || c.PublicURL != "https://mcp.example.com" || c.TaskTTL != 3*time.Hour {
			t.Errorf("IdempotencyWindow, PublicURL, TaskTTL = %v, %q, %v; want the variables' 20m, https://mcp.example.com, 3h", c.IdempotencyWindow, c.PublicURL, c.TaskTTL)
		}
		t.Setenv("CARMY_IDEMPOTENCY_WINDOW", "0s")
		t.Setenv("CARMY_PUBLIC_URL", "https://mcp.example.com/?x=1")
		t.Setenv("CARMY_TASK_TTL", "-1h")
		_, err = config.FromEnv()
		wantProblems(t, err, `CARMY_IDEMPOTENCY_WINDOW: "0s" must be positive`, `CARMY_PUBLIC_URL: "https://mcp.example.com/?x=1" is not an http or https URL`, `CARMY_TASK_TTL: "-1h"`)
	})

	t.Run("no file", func(t *testing.T) {
		clearEnv(t)
		t.Chdir(t.TempDir())
		c, err := config.FromEnv()
		if err != nil || !reflect.DeepEqual(c, config.Settings{}) {
			t.Errorf("AppConfig() = %+v, %v; want the zero Config", c, err)
		}
	})

	t.Run("./carmy.toml", func(t *testing.T) {
		clearEnv(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "carmy.toml"), []byte("listen = \"127.0.0.1:4000\"\n\nlog_level = \"DEBUG\"\nbogus = 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		c, err := config.FromEnv()
		if c.Listen != "127.0.0.1:4000" || c.LogLevel != "debug" {
			t.Errorf("AppConfig() = %+v", c)
		}
		wantProblems(t, err, `carmy.toml:4: unknown key "bogus"`)
	})

	t.Run("CARMY_CONFIG and overrides", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", full)
		t.Setenv("CARMY_LISTEN", "127.0.0.1:0")
		t.Setenv("CARMY_BODY_LIMIT", "2MiB")
		t.Setenv("CARMY_TIMEOUT", "1m")
		t.Setenv("CARMY_DRAIN_TIMEOUT", "250ms")
		t.Setenv("CARMY_LOG_LEVEL", "error")
		t.Setenv("CARMY_ALLOW_UNAUTHENTICATED", "true")
		t.Setenv("CARMY_STORE_URL", "rediss://:pw@cache:6380/1")
		c, err := config.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := config.Load(full)
		want.Listen, want.BodyLimit, want.Timeout, want.DrainTimeout, want.LogLevel, want.AllowUnauthenticated, want.StoreURL =
			"127.0.0.1:0", 2<<20, time.Minute, 250*time.Millisecond, "error", true, "rediss://:pw@cache:6380/1"
		if !reflect.DeepEqual(c, want) {
			t.Errorf("AppConfig():\n got %+v\nwant %+v", c, want)
		}
	})

	t.Run("a variable turns allow_unauthenticated off", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", writeConfig(t, "allow_unauthenticated = true\n"))
		t.Setenv("CARMY_ALLOW_UNAUTHENTICATED", "0")
		if c, err := config.FromEnv(); err != nil || c.AllowUnauthenticated {
			t.Errorf("AppConfig() = %+v, %v; want AllowUnauthenticated false", c, err)
		}
	})

	t.Run("bad variables", func(t *testing.T) {
		clearEnv(t)
		t.Chdir(t.TempDir())
		t.Setenv("CARMY_LISTEN", "3000")
		t.Setenv("CARMY_BODY_LIMIT", "lots")
		t.Setenv("CARMY_TIMEOUT", "5x")
		t.Setenv("CARMY_DRAIN_TIMEOUT", "0s")
		t.Setenv("CARMY_LOG_LEVEL", "verbose")
		t.Setenv("CARMY_ALLOW_UNAUTHENTICATED", "maybe")
		t.Setenv("CARMY_STORE_URL", "cache:6379")
		_, err := config.FromEnv()
		wantProblems(t, err,
			`CARMY_LISTEN: "3000" is not an address`,
			`CARMY_BODY_LIMIT: "lots" is not a size`,
			`CARMY_TIMEOUT: "5x" is not a duration`,
			`CARMY_DRAIN_TIMEOUT: "0s" must be positive`,
			`CARMY_LOG_LEVEL: "verbose" is not a log level`,
			`CARMY_ALLOW_UNAUTHENTICATED: "maybe" is not true or false`,
			`CARMY_STORE_URL: not a URL with a scheme`,
		)
	})

	t.Run("CARMY_CONFIG names a missing file", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", filepath.Join(t.TempDir(), "nope.toml"))
		_, err := config.FromEnv()
		wantProblems(t, err, "CARMY_CONFIG: cannot read the configuration file it names")
	})

	t.Run("a bad file and bad variables at once", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", writeConfig(t, "timeout = 5\n"))
		t.Setenv("CARMY_LOG_LEVEL", "loud")
		_, err := config.FromEnv()
		got := configProblems(t, err)
		if len(got) != 2 || !strings.Contains(got[0], `:1: timeout must be a duration such as "30s", not the integer 5`) || !strings.HasPrefix(got[1], "CARMY_LOG_LEVEL: ") {
			t.Errorf("problems %q", got)
		}
	})
}

func TestLoadConfigRedisURL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := config.Load(write("redis.toml", "redis_url = \"redis://127.0.0.1:6379/0\"\n"))
	if err != nil || c.StoreURL != "redis://127.0.0.1:6379/0" {
		t.Fatalf("redis_url: %+v, %v", c, err)
	}
	_, err = config.Load(write("both.toml", "store_url = \"redis://a:1/0\"\nredis_url = \"redis://b:1/0\"\n"))
	if err == nil || !strings.Contains(err.Error(), "both.toml:2") || !strings.Contains(err.Error(), "keep one") {
		t.Fatalf("both set: %v", err)
	}
}

// audit_file and audit_url are read from the file and overridden by
// CARMY_AUDIT_FILE and CARMY_AUDIT_URL; a URL without a scheme is a problem
// that never shows the value.
func TestAuditSettings(t *testing.T) {
	for _, v := range []string{"CARMY_CONFIG", "CARMY_AUDIT_FILE", "CARMY_AUDIT_URL"} {
		t.Setenv(v, "")
	}
	path := writeConfig(t, "audit_file = \"/var/log/carmy/audit.jsonl\"\naudit_url = \"postgres://carmy:pw@db/carmy\"\n")
	c, err := config.Load(path)
	if err != nil || c.AuditFile != "/var/log/carmy/audit.jsonl" || c.AuditURL != "postgres://carmy:pw@db/carmy" {
		t.Fatalf("Load: %+v, %v", c, err)
	}
	t.Setenv("CARMY_CONFIG", path)
	t.Setenv("CARMY_AUDIT_FILE", "/tmp/audit.jsonl")
	t.Setenv("CARMY_AUDIT_URL", "postgresql://other/db")
	if c, err = config.FromEnv(); err != nil || c.AuditFile != "/tmp/audit.jsonl" || c.AuditURL != "postgresql://other/db" {
		t.Fatalf("FromEnv: %+v, %v", c, err)
	}

	bad := writeConfig(t, "audit_url = \"db:5432\"\naudit_file = \"\"\n")
	_, err = config.Load(bad)
	wantProblems(t, err, bad+":1: audit_url: not a URL with a scheme", bad+":2: audit_file: must name a file")
	if strings.Contains(err.Error(), "db:5432") {
		t.Errorf("the problem repeats the URL: %v", err)
	}
	t.Setenv("CARMY_CONFIG", "")
	t.Chdir(t.TempDir())
	t.Setenv("CARMY_AUDIT_URL", "secret@db")
	_, err = config.FromEnv()
	wantProblems(t, err, "CARMY_AUDIT_URL: not a URL with a scheme")
}

func TestEffectPermissions(t *testing.T) {
	path := writeConfig(t, "listen = \"127.0.0.1:3000\"\n[effect_permissions]\nread = \"tools:read\"\ndestructive = \"tools:admin\"\n")
	c, err := config.Load(path)
	want := config.EffectPermissions{ByEffect: map[string]string{"read": "tools:read", "destructive": "tools:admin"}, Site: path + ":2"}
	if err != nil || !reflect.DeepEqual(c.EffectPermissions, want) {
		t.Errorf("Load = %+v, %v\nwant %+v", c.EffectPermissions, err, want)
	}
	for _, tc := range []struct{ file, want string }{
		{"effect_permissions = \"tools\"\n", "carmy.toml:1: effect_permissions must be a table"},
		{"[effect_permissions]\nread = 1\n", `carmy.toml:1: effect_permissions.read must be a permission such as "tools:read", not the integer 1`},
		{"[effect_permissions]\nreads = \"x\"\n", `carmy.toml:1: unknown key "effect_permissions.reads"`},
	} {
		path := writeConfig(t, tc.file)
		_, err := config.Load(path)
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), path, "carmy.toml"), tc.want) {
			t.Errorf("%q: %v; want %q", tc.file, err, tc.want)
		}
	}
}

func TestRateLimits(t *testing.T) {
	path := writeConfig(t, "[rate_limits]\ndefault = \"100/min\"\ncreate_order = \" 5 / second \"\n\"orders.export\" = \"1/24h\"\nlist_orders = \"unlimited\"\nsearch = \"30/1m30s\"\n")
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rate := func(calls int, per time.Duration, key string, line int) config.Rate {
		return config.Rate{Calls: calls, Per: per, Key: "rate_limits." + key, Site: fmt.Sprintf("%s:%d", path, line)}
	}
	def := rate(100, time.Minute, "default", 2)
	want := config.RateLimits{Default: &def, Tools: map[string]config.Rate{
		"create_order":  rate(5, time.Second, "create_order", 3),
		"orders.export": rate(1, 24*time.Hour, "orders.export", 4),
		"list_orders":   rate(0, 0, "list_orders", 5),
		"search":        rate(30, 90*time.Second, "search", 6),
	}}
	if !reflect.DeepEqual(c.RateLimits, want) {
		t.Errorf("Load = %+v\nwant %+v", c.RateLimits, want)
	}
	for _, tc := range []struct{ file, want string }{
		{"rate_limits = \"10/min\"\n", "carmy.toml:1: rate_limits must be a table"},
		{"[rate_limits]\ncreate_order = 10\n", `carmy.toml:2: rate_limits.create_order must be a rate such as "10/min"`},
		{"[rate_limits]\ndefault = \"0/min\"\n", `carmy.toml:2: rate_limits.default: "0/min": the number of calls must be a positive integer`},
		{"[rate_limits]\n\ncreate_order = \"10/fortnight\"\n", `carmy.toml:3: rate_limits.create_order: "10/fortnight": the period must be`},
		{"[rate_limits]\ncreate_order = \"10/-1s\"\n", `carmy.toml:2: rate_limits.create_order: "10/-1s": the period must be`},
		{"[rate_limits]\ncreate_order = \"ten\"\n", `carmy.toml:2: rate_limits.create_order: "ten" is not a rate`},
	} {
		path := writeConfig(t, tc.file)
		_, err := config.Load(path)
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), path, "carmy.toml"), tc.want) {
			t.Errorf("%q: %v; want %q", tc.file, err, tc.want)
		}
	}
}
