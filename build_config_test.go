package carmy_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

const (
	aliceToken = "alice-token"
	bobToken   = "bob-token"
)

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "carmy.toml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// App applies the configuration to its builder, and reports a bad one from
// Build, Listen and Run.
func TestAppSettings(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	t.Setenv("CARMY_CONFIG", filepath.Join("internal", "config", "testdata", "full.toml"))
	t.Setenv("CARMY_LISTEN", "")
	t.Setenv("CARMY_BODY_LIMIT", "")
	t.Setenv("CARMY_TIMEOUT", "")
	t.Setenv("CARMY_DRAIN_TIMEOUT", "")
	t.Setenv("CARMY_LOG_LEVEL", "")
	t.Setenv("CARMY_ALLOW_UNAUTHENTICATED", "")
	t.Setenv("CARMY_STORE_URL", "")

	t.Run("mapping", func(t *testing.T) {
		s := carmy.SettingsOf(carmy.App())
		if len(s.Errs) > 0 {
			t.Fatal(s.Errs)
		}
		if s.Addr != "127.0.0.1:3100" || s.BodyLimit != 512<<10 || s.Timeout != 15*time.Second || s.Drain != 5*time.Second || s.AllowUnauthenticated || !s.Signals || s.StoreURL != "redis://redis:6379/0" {
			t.Errorf("settings %+v", s)
		}
		if s.Logger == nil || s.Logger.Enabled(context.Background(), slog.LevelInfo) || !s.Logger.Enabled(context.Background(), slog.LevelWarn) {
			t.Errorf("log_level = \"warn\" did not give a logger at warn")
		}
		if s.Authenticator == nil {
			t.Fatal("[[tokens]] did not set an authenticator")
		}
		for _, tc := range []struct{ token, principal string }{{aliceToken, "alice"}, {bobToken, "bob"}, {"eve-token", ""}} {
			req, _ := http.NewRequest("GET", "/tools", nil)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			id, err := s.Authenticator.Authenticate(req)
			if id.Principal != tc.principal || (err == nil) != (tc.principal != "") {
				t.Errorf("token %s: %+v, %v; want principal %q", tc.token, id, err, tc.principal)
			}
		}
	})

	t.Run("builder settings win", func(t *testing.T) {
		s := carmy.SettingsOf(carmy.App().Addr("127.0.0.1:0").Timeout(time.Second).BodyLimit(10))
		if s.Addr != "127.0.0.1:0" || s.Timeout != time.Second || s.BodyLimit != 10 {
			t.Errorf("settings %+v", s)
		}
	})

	t.Run("store_url is opened at Build", func(t *testing.T) {
		t.Setenv("CARMY_STORE_URL", "carmy-test-nosuch://somewhere")
		_, err := carmy.App().Build()
		if err == nil || !strings.Contains(err.Error(), `no store is registered for "carmy-test-nosuch"`) {
			t.Errorf("Build = %v, want the store's error", err)
		}
	})

	t.Run("New reads nothing", func(t *testing.T) {
		s := carmy.SettingsOf(carmy.New())
		if s.Addr != "" || s.Timeout != carmy.DefaultTimeout || s.BodyLimit != carmy.DefaultBodyLimit || s.Authenticator != nil || s.Logger != nil || s.Signals {
			t.Errorf("settings %+v", s)
		}
	})

	t.Run("allowed hosts and origins, sessions", func(t *testing.T) {
		t.Setenv("CARMY_CONFIG", writeConfig(t, `allowed_hosts = ["tools.example.com"]
allowed_origins = ["https://app.example.com"]
session_timeout = "2m"
max_sessions = 5
`))
		b := carmy.App().Tool(carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("noop"), carmy.Register(false)))
		if d, n := carmy.SessionSettingsOf(b); d != 2*time.Minute || n != 5 {
			t.Errorf("session_timeout, max_sessions gave %v, %d; want 2m0s, 5", d, n)
		}
		r, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for _, tc := range []struct {
			host, origin string
			want         int
		}{
			{"tools.example.com", "", 200},
			{"tools.example.com:3000", "https://app.example.com", 200},
			{"evil.example.com", "", 403},
			{"localhost:3000", "https://evil.example.com", 403},
		} {
			req := httptest.NewRequest("GET", "/tools", nil)
			req.Host, req.RemoteAddr = tc.host, "127.0.0.1:50000" // as a browser on this machine sends it
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
				req.Header.Set("Sec-Fetch-Site", "cross-site")
			}
			w := httptest.NewRecorder()
			r.Handler().ServeHTTP(w, req)
			if w.Code != tc.want {
				t.Errorf("Host %s, Origin %q: %d; want %d", tc.host, tc.origin, w.Code, tc.want)
			}
		}
	})

	t.Run("a bad allowed host or origin names its line", func(t *testing.T) {
		path := writeConfig(t, "allowed_hosts = [\"http://tools.example.com\"]\nallowed_origins = [\"https://App.example.com\"]\n")
		t.Setenv("CARMY_CONFIG", path)
		_, err := carmy.App().Build()
		for _, want := range []string{path + `:1: allowed host "http://tools.example.com"`, path + `:2: allowed origin "https://App.example.com": write the origin in lower case`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Build = %v; want %q", err, want)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		dir := filepath.Join("internal", "config", "testdata")
		t.Setenv("CARMY_CONFIG", filepath.Join(dir, "bad_values.toml"))
		t.Setenv("CARMY_TIMEOUT", "soon")
		b := carmy.App()
		want := []string{
			filepath.Join(dir, "bad_values.toml") + `:4: timeout: "5x" is not a duration`,
			`CARMY_TIMEOUT: "soon" is not a duration`,
		}
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Fatalf("%s: no error", what)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), "carmy: "+w) {
					t.Errorf("%s: error does not say %q:\n%v", what, w, err)
				}
			}
		}
		_, err := b.Build()
		check("Build", err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// The configuration comes first, even on an address Listen would
		// refuse; nothing is served.
		check("Listen", b.Listen(ctx, "0.0.0.0:0"))
		check("Run", b.Run(ctx))
	})
}
