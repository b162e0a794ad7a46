package carmy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
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

// Limits of [OAuth]'s checks.
const (
	// maxTokenSize is the largest bearer token parsed: a larger one is
	// refused before any decoding, so that a huge header costs nothing.
	maxTokenSize = 16 << 10
	// oauthClockSkew is how far the server's clock may disagree with the
	// issuer's on "exp" and "nbf".
	oauthClockSkew = 30 * time.Second
	// oauthStartTimeout bounds discovery and the first key fetch when
	// carmy.toml configures OAuth and Build resolves it.
	oauthStartTimeout = 15 * time.Second
)

// oauthAlgs are the signature algorithms a token may use: asymmetric ones
// only, so that "none" and HMAC, where the public key could serve as a
// shared secret, are refused before any key is looked at. The key that
// verifies a token must be of the algorithm's type.
var oauthAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.EdDSA,
}

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
	if err := cfg.check(); err != nil {
		return nil, err
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	ctx = oidc.ClientContext(ctx, client)
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		var mismatch *oidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, &Error{Code: CodeInvalidInput, Message: fmt.Sprintf("OAuth: the discovery document of %s names the issuer %q; set Issuer to exactly the issuer's URL", cfg.Issuer, mismatch.Discovered), Err: err}
		}
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("OAuth: the issuer %s could not be discovered at %s: %v", cfg.Issuer, discoveryURL(cfg.Issuer), short(err)), Err: err}
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("OAuth: the discovery document at %s has no jwks_uri", discoveryURL(cfg.Issuer)), Err: err}
	}
	limited := limitKeyFetches(client, doc.JWKSURI)
	if err := checkKeys(ctx, limited, doc.JWKSURI); err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("OAuth: the issuer's keys at %s: %v", doc.JWKSURI, short(err)), Err: err}
	}
	// The key set lives as long as the authenticator: its fetches must not
	// end with the caller's ctx.
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.WithoutCancel(ctx), limited), doc.JWKSURI)
	// Fill the key cache now, so that the issuer may go down before the
	// first call. No key has the probe's id: the set fetches its keys, then
	// refuses the probe.
	_, _ = keys.VerifySignature(ctx, jwksProbe)
	o := &oauthAuthenticator{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		scopes:   slices.Clone(cfg.Scopes),
		verifier: oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
			SupportedSigningAlgs: oauthAlgs,
			// Checked by Authenticate: "aud" as a resource URI, and "exp"
			// and "nbf" with a small skew instead of go-oidc's none on exp
			// and five minutes on nbf.
			SkipClientIDCheck: true,
			SkipExpiryCheck:   true,
		}),
	}
	if u, err := url.Parse(cfg.Audience); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		o.origin = u.Scheme + "://" + u.Host
	}
	return o, nil
}

// check reports the first mistake in a configuration.
func (cfg OAuthConfig) check() error {
	u, err := url.Parse(cfg.Issuer)
	switch {
	case cfg.Issuer == "":
		return Errorf(CodeInvalidInput, "OAuth: Issuer is required: the authorization server's issuer URL, such as https://auth.example.com")
	case err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))):
		return Errorf(CodeInvalidInput, "OAuth: Issuer %q must be an https URL (http only on a loopback address)", cfg.Issuer)
	case cfg.Audience == "":
		return Errorf(CodeInvalidInput, "OAuth: Audience is required: this server's resource URI, such as https://tools.example.com/mcp, as tokens name it in aud")
	}
	for _, s := range cfg.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return Errorf(CodeInvalidInput, "OAuth: scope %q is not a scope: one word without spaces or quotes", s)
		}
	}
	return nil
}

// isLoopback reports whether a host name is a loopback address or
// localhost.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func discoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// short keeps an error message to one reasonable line: a failed fetch may
// quote a whole response body.
func short(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// checkKeys fetches the issuer's key set once, so that a bad jwks_uri is
// an error at start, naming what went wrong, not a refusal of every call.
func checkKeys(ctx context.Context, client *http.Client, jwksURI string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURI, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return errors.New("the set holds no keys")
	}
	return nil
}

// keyRefreshInterval is the least time between two fetches of the key set
// that reach the issuer. A variable so that tests can shorten it.
var keyRefreshInterval = 5 * time.Second

// limitKeyFetches returns a copy of client whose fetches of the key set at
// jwksURI reach the issuer at most once per keyRefreshInterval; the others
// get the last answer. go-oidc fetches the keys again for every token that
// does not verify with the cached ones, so that without this a flood of
// forged tokens would be a flood of requests to the issuer. A key the
// issuer publishes is still seen within the interval.
func limitKeyFetches(client *http.Client, jwksURI string) *http.Client {
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *client
	c.Transport = &keyFetchLimiter{next: next, url: jwksURI}
	return &c
}

type keyFetchLimiter struct {
	next http.RoundTripper
	url  string

	mu     sync.Mutex // held during a fetch: one at a time
	last   time.Time  // of the last fetch that reached the issuer
	status int
	header http.Header
	body   []byte // of the last fetch that the issuer answered
}

func (l *keyFetchLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.String() != l.url {
		return l.next.RoundTrip(req)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < keyRefreshInterval {
		if l.body == nil {
			return nil, fmt.Errorf("the last fetch of the keys, %v ago, failed; the next waits %v", time.Since(l.last).Round(time.Millisecond), keyRefreshInterval)
		}
		return &http.Response{StatusCode: l.status, Status: fmt.Sprintf("%d %s", l.status, http.StatusText(l.status)), Header: l.header.Clone(), Body: io.NopCloser(bytes.NewReader(l.body)), Request: req}, nil
	}
	l.last, l.body = time.Now(), nil
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	l.status, l.header, l.body = resp.StatusCode, resp.Header.Clone(), body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// jwksProbe is a well-formed JWS signed by nobody, whose key id no issuer
// uses: verifying it makes a key set fetch its keys.
const jwksProbe = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImNhcm15LWp3a3MtcHJvYmUifQ.e30.AA"

// oauthAuthenticator is the [Authenticator] of [OAuth].
type oauthAuthenticator struct {
	issuer   string
	audience string
	scopes   []string
	verifier *oidc.IDTokenVerifier
	// origin is the scheme and host of the audience when it is a URL: where
	// the server is, for the metadata. Otherwise each request's Host says.
	origin string
}

// accessClaims are the claims of an access token that go-oidc leaves to
// the caller.
type accessClaims struct {
	Subject     string    `json:"sub"`
	NotBefore   *float64  `json:"nbf"`
	Scope       string    `json:"scope"`
	Scp         claimList `json:"scp"`
	Permissions []string  `json:"permissions"`
}

// claimList is a claim that issuers write either as a space-separated
// string or as an array of strings.
type claimList []string

// UnmarshalJSON reads a string of space-separated entries or an array.
func (s *claimList) UnmarshalJSON(b []byte) error {
	var one string
	if err := jsonv2.Unmarshal(b, &one); err == nil {
		*s = splitScope(one)
		return nil
	}
	var list []string
	if err := jsonv2.Unmarshal(b, &list); err != nil {
		return err
	}
	*s = list
	return nil
}

// splitScope splits a scope claim on U+0020 alone, as RFC 6749 §3.3 says:
// split on any other white space too (as strings.Fields does),
// "read\u00a0confirm:destroy" would grant confirm:destroy, which the issuer
// never granted.
func splitScope(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, " ") {
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// scopeError is the cause of a refusal for a missing scope.
type scopeError struct{ missing []string }

func (e *scopeError) Error() string { return "missing scopes " + strings.Join(e.missing, " ") }

// Authenticate verifies the request's bearer token.
func (o *oauthAuthenticator) Authenticate(r *http.Request) (Identity, error) {
	token, err := oauthBearer(r)
	if err != nil {
		return Identity{}, err
	}
	idt, err := o.verifier.Verify(r.Context(), token)
	if err != nil {
		return Identity{}, &Error{Code: CodeUnauthenticated, Message: "the bearer token is not valid: its signature, algorithm or issuer is not accepted", Err: err}
	}
	var raw json.RawMessage
	var c accessClaims
	if err := idt.Claims(&raw); err != nil {
		return Identity{}, &Error{Code: CodeUnauthenticated, Message: "the bearer token's claims cannot be read", Err: err}
	}
	// Case-sensitive, and duplicate claim names refused: "Scope" is not
	// "scope".
	if err := jsonv2.Unmarshal(raw, &c); err != nil {
		return Identity{}, &Error{Code: CodeUnauthenticated, Message: "the bearer token's claims cannot be read", Err: err}
	}
	now := time.Now()
	switch {
	case !oauthex.MatchesResource(idt.Audience, o.audience):
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid: it is not meant for this server (aud must hold %q)", o.audience)
	case idt.Expiry.IsZero():
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid: it has no expiry (exp)")
	case now.After(idt.Expiry.Add(oauthClockSkew)):
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token has expired; get a new one")
	case c.NotBefore != nil && *c.NotBefore > float64(now.Add(oauthClockSkew).UnixMilli())/1e3:
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid yet (nbf)")
	case c.Subject == "":
		return Identity{}, Errorf(CodeUnauthenticated, "the bearer token is not valid: it names no subject (sub)")
	}
	scopes := splitScope(c.Scope)
	scopes = append(scopes, c.Scp...)
	var missing []string
	for _, s := range o.scopes {
		if !slices.Contains(scopes, s) {
			missing = append(missing, s)
		}
	}
	if missing != nil {
		return Identity{}, &Error{Code: CodePermissionDenied, Message: fmt.Sprintf("the bearer token lacks the scope %s that this server requires", strings.Join(missing, " ")), Err: &scopeError{missing}}
	}
	return Identity{Principal: c.Subject, Permissions: append(scopes, c.Permissions...)}, nil
}

// errNoToken is the refusal of a request without a bearer token.
func errNoToken() error {
	return Errorf(CodeUnauthenticated, "send a bearer token: Authorization: Bearer <token>")
}

// oauthBearer returns the request's bearer token: one Authorization
// header, scheme Bearer, at most maxTokenSize bytes.
func oauthBearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errNoToken()
	case 1:
	default:
		return "", Errorf(CodeUnauthenticated, "send one Authorization header, not %d", len(values))
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoToken()
	}
	if len(token) > maxTokenSize {
		return "", Errorf(CodeUnauthenticated, "the bearer token is larger than %d KiB", maxTokenSize>>10)
	}
	return token, nil
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
