package carmy

import (
	"fmt"
	"net/url"
	"strings"
)

// PublicURL names the address clients reach the server at, such as
// "https://tools.example.com", when it is not the one requests arrive
// with: behind a reverse proxy that rewrites Host or terminates TLS.
// Approval links (approval_url, and the page sent by MCP URL elicitation)
// and the OAuth protected-resource metadata, when [OAuthConfig].Audience
// is not a URL, are then built from it instead of the request's Host and
// scheme. Request headers such as X-Forwarded-Host are never trusted for
// this. It is public_url in carmy.toml and CARMY_PUBLIC_URL.
func (b *Builder) PublicURL(u string) *Builder {
	base, err := checkPublicURL(u)
	if err != nil {
		b.misuse("Builder.PublicURL: %v", err)
		return b
	}
	b.publicURL = base
	return b
}

// checkPublicURL returns an absolute http(s) URL with a host, without its
// trailing slash, or says why it is not one.
func checkPublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an http or https URL with a host and no query, such as \"https://tools.example.com\"", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
