package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
)

// OAuth is the [oauth] table: the authorization server whose access
// tokens the host accepts, as the root package's OAuthConfig has it.
type OAuth struct {
	Issuer   string
	Audience string
	Scopes   []string
	Site     string // where the issuer was set: "carmy.toml:12" or CARMY_OAUTH_ISSUER
}

// The environment variables of [OAuth].
const (
	envOAuthIssuer   = "CARMY_OAUTH_ISSUER"
	envOAuthAudience = "CARMY_OAUTH_AUDIENCE"
	envOAuthScopes   = "CARMY_OAUTH_SCOPES" // comma-separated
)

// parseOAuth checks the [oauth] table; a table with problems counts as
// none, so that its problems are reported once. They are located at the
// table's header.
func parseOAuth(d *document, path string, report func(line int, format string, args ...any)) OAuth {
	v := d.value("oauth")
	if v == nil {
		return OAuth{}
	}
	line, ok := d.line("oauth"), true
	fail := func(line int, format string, args ...any) {
		report(line, format, args...)
		ok = false
	}
	m, isTable := v.(map[string]any)
	if !isTable {
		fail(line, "oauth must be a table with issuer, audience and scopes, such as [oauth], not %s", tomlValue(v))
		return OAuth{}
	}
	var o OAuth
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "issuer", "audience":
			s, isString := m[k].(string)
			if !isString {
				fail(line, "oauth.%s must be a string, not %s", k, tomlValue(m[k]))
				continue
			}
			if k == "issuer" {
				o.Issuer = s
			} else {
				o.Audience = s
			}
		case "scopes":
			list, isList := m[k].([]any)
			if !isList {
				fail(line, "oauth.scopes must be a list of strings such as [\"tools\"], not %s", tomlValue(m[k]))
				continue
			}
			for _, p := range list {
				s, isString := p.(string)
				if !isString {
					fail(line, "oauth.scopes must be strings, not %s", tomlValue(p))
					break
				}
				o.Scopes = append(o.Scopes, s)
			}
		default:
			fail(line, "unknown key %q; [oauth] has issuer, audience and scopes", "oauth."+k)
		}
	}
	if err := checkIssuer(o.Issuer); err != nil {
		fail(line, "oauth.issuer: %v", err)
	}
	if o.Audience == "" {
		fail(line, "oauth.audience is required: this server's resource URI, such as \"https://tools.example.com/mcp\", which tokens name in aud")
	}
	if !ok {
		return OAuth{}
	}
	o.Site = fmt.Sprintf("%s:%d", path, line)
	return o
}

// oauthFromEnv applies CARMY_OAUTH_* to c and checks that the result is
// whole.
func oauthFromEnv(c *Settings) []error {
	var errs []error
	if v := os.Getenv(envOAuthIssuer); v != "" {
		if err := checkIssuer(v); err != nil {
			errs = append(errs, &Problem{Site: envOAuthIssuer, Err: err})
		}
		if len(c.Tokens) > 0 {
			errs = append(errs, &Problem{Site: envOAuthIssuer, Err: errors.New("the configuration file has [[tokens]], which also authenticate callers; keep one")})
		}
		c.OAuth.Issuer, c.OAuth.Site = v, envOAuthIssuer
	}
	if v := os.Getenv(envOAuthAudience); v != "" {
		c.OAuth.Audience = v
	}
	if v := os.Getenv(envOAuthScopes); v != "" {
		c.OAuth.Scopes = nil
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.OAuth.Scopes = append(c.OAuth.Scopes, s)
			}
		}
	}
	switch {
	case c.OAuth.Issuer == "" && (c.OAuth.Audience != "" || len(c.OAuth.Scopes) > 0):
		errs = append(errs, &Problem{Site: envOAuthIssuer, Err: errors.New("is required with CARMY_OAUTH_AUDIENCE and CARMY_OAUTH_SCOPES: the authorization server's issuer URL")})
	case c.OAuth.Issuer != "" && c.OAuth.Audience == "":
		errs = append(errs, &Problem{Site: envOAuthAudience, Err: errors.New("is required with CARMY_OAUTH_ISSUER: this server's resource URI, which tokens name in aud")})
	}
	return errs
}

// checkIssuer checks that an issuer is an absolute URL; OAuth checks the
// rest when it reaches the issuer.
func checkIssuer(s string) error {
	if s == "" {
		return errors.New("the issuer is required: the authorization server's URL, such as \"https://auth.example.com\"")
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an https URL such as \"https://auth.example.com\"", s)
	}
	return nil
}
