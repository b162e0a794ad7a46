package carmy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/carmy-dev/carmy/internal/oauthrs"
)

// OAuthConfig configures [OAuth]: which authorization server issues the
// access tokens this server accepts, and what they must say.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer URL; its OpenID Connect
	// discovery document is at Issuer + "/.well-known/openid-configuration"
	// and must name the same issuer. HTTPS, or HTTP on a loopback address.
	Issuer string
	// Audience is this server's resource URI: tokens must name it in
	// "aud". Its public URL, such as "https://tools.example.com/mcp", is
	// what MCP clients ask tokens for, and also tells the protected
	// resource metadata where the server is.
	Audience string
	// Scopes are the scopes every token must hold.
	Scopes []string
	// HTTPClient fetches the discovery document and the keys; nil means a
	// client with a timeout of 10 seconds. Give yours a timeout too: calls
	// that need the keys fetched wait for a fetch under way.
	HTTPClient *http.Client
}

// oauthStartTimeout bounds discovery and the first key fetch when
// carmy.toml configures OAuth and Build resolves it.
const oauthStartTimeout = 15 * time.Second

// keyRefreshInterval is the least time between two fetches of the key set
// that reach the issuer.
const keyRefreshInterval = 5 * time.Second

// OAuth returns an [Authenticator] that makes the server an OAuth 2.1
// resource server: it accepts JWT access tokens that cfg.Issuer signed for
// cfg.Audience, sent as "Authorization: Bearer <token>".
//
// It reads the issuer's OpenID Connect discovery document and fetches its
// signing keys (JWKS) now; an issuer it cannot reach is an error of code
// [CodeUnavailable], a bad cfg one of code [CodeInvalidInput]. Keys are
// cached and fetched again, at most once per 5 seconds, when a token does
// not verify with them (it names a key the cache does not hold), so the
// issuer may rotate its keys; while the issuer is down, tokens signed with
// cached keys keep working.
//
// A token is accepted when its signature verifies with one of the
// issuer's keys by an asymmetric algorithm (never "none" nor HMAC), "iss"
// is the issuer, "aud" holds the audience, "exp" and "nbf" hold with 30
// seconds of clock skew, it has a "sub", and its scopes hold every one of
// cfg.Scopes; a token larger than 16 KiB is refused unread. The caller's
// [Identity] is then: principal = "sub"; permissions = the entries of the
// space-separated "scope" claim (or of an "scp" claim, as some issuers
// name it) followed by those of a "permissions" array claim, so that a
// scope or permission "confirm:cancel_order" grants that confirmation.
//
// With this authenticator, [Registry.Handler] publishes the protected
// resource metadata (RFC 9728) at /.well-known/oauth-protected-resource
// and /.well-known/oauth-protected-resource/mcp, and its refusals say
// where to sign in, as MCP's authorization spec asks: a 401 carries
// "WWW-Authenticate: Bearer resource_metadata=…" (with
// error="invalid_token" when a token was sent) and a token that lacks a
// required scope gets 403 with error="insufficient_scope" and the scope.
func OAuth(ctx context.Context, cfg OAuthConfig) (Authenticator, error) {
	return oauth(ctx, cfg, keyRefreshInterval)
}

// oauth is [OAuth] with the least time between two key fetches, which
// tests shorten for their own authenticator.
func oauth(ctx context.Context, cfg OAuthConfig, keyRefresh time.Duration) (Authenticator, error) {
	v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: cfg.Issuer, Audience: cfg.Audience, Scopes: cfg.Scopes, HTTPClient: cfg.HTTPClient, KeyRefreshInterval: keyRefresh})
	if err != nil {
		return nil, oauthError(err)
	}
	return &oauthAuthenticator{v}, nil
}

// oauthError is a refusal of package oauth as an [*Error].
func oauthError(err error) error {
	var e *oauthrs.Error
	if !errors.As(err, &e) {
		return err
	}
	code := CodeUnauthenticated
	switch e.Kind {
	case oauthrs.BadConfig:
		code = CodeInvalidInput
	case oauthrs.Unreachable:
		code = CodeUnavailable
	case oauthrs.MissingScope:
		code = CodePermissionDenied
	}
	return &Error{Code: code, Message: e.Message, Err: e.Err}
}

// oauthAuthenticator is the [Authenticator] of [OAuth], a resource server.
type oauthAuthenticator struct{ v *oauthrs.Verifier }

// Authenticate verifies the request's bearer token.
func (o *oauthAuthenticator) Authenticate(r *http.Request) (Identity, error) {
	sub, perms, err := o.v.Verify(r)
	if err != nil {
		return Identity{}, oauthError(err)
	}
	return Identity{Principal: sub, Permissions: perms}, nil
}

func (o *oauthAuthenticator) serveMetadata(w http.ResponseWriter, req *http.Request, path string, declared []string) {
	// The permissions tools require are scopes a client may ask for.
	o.v.ServeMetadata(w, req, path, union(o.v.Scopes(), declared))
}

func (o *oauthAuthenticator) challenge(req *http.Request, err error) string {
	return o.v.Challenge(req, err, publicError(err).Message)
}

// resourceServer is an [Authenticator] that is an OAuth 2.0 resource
// server: [Registry.Handler] publishes its metadata and its refusals tell
// the caller where to get a token.
type resourceServer interface {
	// serveMetadata answers a request for the metadata of the protected
	// resource at path ("" for the server's root, or "/mcp") as the
	// request reached it, the declared permissions among its scopes.
	serveMetadata(w http.ResponseWriter, req *http.Request, path string, declared []string)
	// challenge is the WWW-Authenticate value of a request the
	// authenticator refused with err.
	challenge(req *http.Request, err error) string
}

// metadata serves the protected resource metadata when the authenticator
// is a resource server; nil otherwise.
func (h *httpDoor) metadata() func(w http.ResponseWriter, req *http.Request, path string) {
	rs, ok := h.auth.(resourceServer)
	if !ok {
		return nil
	}
	declared := h.r.declaredPermissions()
	return func(w http.ResponseWriter, req *http.Request, path string) {
		rs.serveMetadata(w, req, path, declared)
	}
}

// Challenge is the WWW-Authenticate value of a refusal err of req on a
// server that is an OAuth resource server: of its authentication (authn),
// or, for a call refused for missing permissions, the challenge of RFC
// 6750 §3.1: error="insufficient_scope" and the scopes a token needs for
// the call (those every token must hold, and every one the tool
// requires), so that a client can ask its user for them.
func (h *httpDoor) Challenge(req *http.Request, err error, authn bool) string {
	rs, ok := h.auth.(resourceServer)
	if !ok {
		return ""
	}
	if authn {
		return rs.challenge(req, err)
	}
	var m *missingPermissions
	if !errors.As(err, &m) {
		return ""
	}
	scopes := m.required
	if o, ok := rs.(*oauthAuthenticator); ok {
		scopes = union(o.v.Scopes(), scopes)
	}
	return rs.challenge(req, &oauthrs.ScopeError{Missing: scopes})
}

// oauthSetting is the OAuth configuration of carmy.toml or CARMY_OAUTH_*,
// with where it was set.
type oauthSetting struct {
	config OAuthConfig
	site   string
}

// resolveOAuth makes the OAuth resource server that carmy.toml or CARMY_OAUTH_*
// configure the builder's authenticator, at the first Build; one set
// with [Builder.Authenticate] wins.
func (b *Builder) resolveOAuth() error {
	if b.oauth == nil || b.auth != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), oauthStartTimeout)
	defer cancel()
	a, err := OAuth(ctx, b.oauth.config)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			err = siteError{e}
		}
		return &BuildError{Site: b.oauth.site, Err: err}
	}
	b.auth = a
	return nil
}

// siteError is an [Error] after the site of a [BuildError]: its message
// alone, the code still found by [CodeOf].
type siteError struct{ e *Error }

func (s siteError) Error() string { return s.e.Message }
func (s siteError) Unwrap() error { return s.e }
