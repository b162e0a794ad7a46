package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/internal/config"
)

func TestLoadMounts(t *testing.T) {
	t.Setenv("GH_TOKEN", "s3cret")
	path := filepath.Join(t.TempDir(), "carmy.toml")
	src := `
[[mount]]
prefix = "fs"
command = ["npx", "server-filesystem", "/srv"]
env = { NODE_ENV = "production", TOKEN = "Bearer ${GH_TOKEN}" }
roots = ["file:///srv"]
effect_floor = "write"
trust_annotations = false

[mount.tools.write_file]
effect = "destructive"
confirm = true
requires = ["files:write"]
rate_limit = "10/min"
timeout = "30s"
description = "Writes one file"
deferred = false

[[mount]]
prefix = "gh"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${GH_TOKEN}" }
requires = ["repos:read"]
sampling = true
url_elicitation = true
resources = false
deferred = true
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := []config.Mount{{
		Prefix: "fs", Command: []string{"npx", "server-filesystem", "/srv"},
		Env:   map[string]string{"NODE_ENV": "production", "TOKEN": "Bearer s3cret"},
		Roots: []string{"file:///srv"}, EffectFloor: "write", TrustAnnotations: &no, Site: path + ":2",
		Tools: map[string]config.MountTool{"write_file": {Effect: "destructive", Confirm: &yes, Requires: []string{"files:write"},
			RateLimit: config.Rate{Calls: 10, Per: time.Minute, Key: "mount.tools.write_file.rate_limit"}, Timeout: 30 * time.Second, Description: "Writes one file", Deferred: &no}},
	}, {
		Prefix: "gh", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"},
		Requires: []string{"repos:read"}, Sampling: true, URLElicitation: true, Resources: &no, Deferred: true, Site: path + ":19",
	}}
	if !reflect.DeepEqual(c.Mounts, want) {
		t.Errorf("mounts =\n%+v\nwant\n%+v", c.Mounts, want)
	}
}

func TestLoadMountErrors(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"no upstream", "[[mount]]\nprefix = \"a\"\n", "needs command"},
		{"both upstreams", "[[mount]]\nprefix = \"a\"\ncommand = [\"x\"]\nurl = \"http://x\"\n", "needs command"},
		{"no prefix", "[[mount]]\ncommand = [\"x\"]\n", "needs a prefix"},
		{"an unset variable", "[[mount]]\nprefix = \"a\"\nurl = \"http://x\"\nheaders = { A = \"${CARMY_TEST_NOT_SET}\" }\n", "${CARMY_TEST_NOT_SET}, which is not set"},
		{"an unknown key", "[[mount]]\nprefix = \"a\"\nurl = \"http://x\"\nsamplng = true\n", `unknown key "samplng"`},
		{"a bad effect", "[[mount]]\nprefix = \"a\"\nurl = \"http://x\"\n[mount.tools.t]\neffect = \"wreck\"\n", `"wreck" is not an effect`},
		{"a bad rate", "[[mount]]\nprefix = \"a\"\nurl = \"http://x\"\n[mount.tools.t]\nrate_limit = \"often\"\n", "rate_limit"},
		{"a command not a list", "[[mount]]\nprefix = \"a\"\ncommand = \"npx x\"\n", "command must be a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "carmy.toml")
			if err := os.WriteFile(path, []byte(c.src), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}
