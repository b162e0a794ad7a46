package config_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/carmy-dev/carmy/internal/config"
)

func TestOAuth(t *testing.T) {
	clearEnv := func(t *testing.T) {
		for _, v := range []string{"CARMY_CONFIG", "CARMY_OAUTH_ISSUER", "CARMY_OAUTH_AUDIENCE", "CARMY_OAUTH_SCOPES"} {
			t.Setenv(v, "")
		}
	}
	const table = "listen = \"0.0.0.0:3000\"\n\n[oauth]\nissuer = \"https://auth.example.com\"\naudience = \"https://tools.example.com/mcp\"\nscopes = [\"tools\", \"read\"]\n"

	t.Run("file", func(t *testing.T) {
		path := writeConfig(t, table)
		c, err := config.Load(path)
		want := config.OAuth{Issuer: "https://auth.example.com", Audience: "https://tools.example.com/mcp", Scopes: []string{"tools", "read"}, Site: path + ":3"}
		if err != nil || !reflect.DeepEqual(c.OAuth, want) {
			t.Errorf("Load = %+v, %v\nwant %+v", c.OAuth, err, want)
		}
	})

	t.Run("environment", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CARMY_CONFIG", writeConfig(t, table))
		t.Setenv("CARMY_OAUTH_ISSUER", "https://login.example.org/realms/tools")
		t.Setenv("CARMY_OAUTH_SCOPES", " tools ,, admin ")
		c, err := config.FromEnv()
		want := config.OAuth{Issuer: "https://login.example.org/realms/tools", Audience: "https://tools.example.com/mcp", Scopes: []string{"tools", "admin"}, Site: "CARMY_OAUTH_ISSUER"}
		if err != nil || !reflect.DeepEqual(c.OAuth, want) {
			t.Errorf("FromEnv = %+v, %v\nwant %+v", c.OAuth, err, want)
		}
	})

	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"no audience", "[oauth]\nissuer = \"https://auth.example.com\"\n", nil,
			[]string{"carmy.toml:1: oauth.audience is required"}},
		{"bad values", "\n[oauth]\nissuer = \"auth.example.com\"\naudience = 7\nscopes = \"tools\"\nrealm = \"x\"\n", nil,
			[]string{"carmy.toml:2: oauth.audience must be a string, not the integer 7",
				`carmy.toml:2: unknown key "oauth.realm"`,
				`carmy.toml:2: oauth.scopes must be a list of strings such as ["tools"], not "tools"`,
				`carmy.toml:2: oauth.issuer: "auth.example.com" is not an https URL`,
				"carmy.toml:2: oauth.audience is required"}},
		{"not a table", "oauth = \"https://auth.example.com\"\n", nil,
			[]string{"carmy.toml:1: oauth must be a table"}},
		{"tokens too", "[oauth]\nissuer = \"https://auth.example.com\"\naudience = \"api\"\n\n[[tokens]]\nsha256 = \"" + hash(aliceToken) + "\"\nprincipal = \"alice\"\n", nil,
			[]string{"carmy.toml:1: [oauth] and [[tokens]] both authenticate callers; keep one"}},
		{"tokens and CARMY_OAUTH_ISSUER", "[[tokens]]\nsha256 = \"" + hash(aliceToken) + "\"\nprincipal = \"alice\"\n",
			map[string]string{"CARMY_OAUTH_ISSUER": "https://auth.example.com", "CARMY_OAUTH_AUDIENCE": "api"},
			[]string{"CARMY_OAUTH_ISSUER: the configuration file has [[tokens]]"}},
		{"issuer alone", "", map[string]string{"CARMY_OAUTH_ISSUER": "https://auth.example.com"},
			[]string{"CARMY_OAUTH_AUDIENCE: is required with CARMY_OAUTH_ISSUER"}},
		{"audience alone", "", map[string]string{"CARMY_OAUTH_AUDIENCE": "api"},
			[]string{"CARMY_OAUTH_ISSUER: is required with CARMY_OAUTH_AUDIENCE"}},
		{"bad issuer", "", map[string]string{"CARMY_OAUTH_ISSUER": "auth", "CARMY_OAUTH_AUDIENCE": "api"},
			[]string{`CARMY_OAUTH_ISSUER: "auth" is not an https URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Chdir(t.TempDir())
			if err := os.WriteFile("carmy.toml", []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := config.FromEnv()
			wantProblems(t, err, tc.want...)
		})
	}
}
