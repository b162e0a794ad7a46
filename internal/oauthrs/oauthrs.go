// Package oauthrs is carmy's OAuth 2.1 resource server: it verifies JWT
// access tokens with the issuer's keys (go-oidc), limits how often a flood
// of forged tokens makes the keys fetched again, reads the scopes and
// permissions a token grants, and describes the server in its protected
// resource metadata (RFC 9728) and its challenges (RFC 6750). It knows
// nothing of carmy's errors: each refusal is an [*Error] of a [Kind] that
// the caller turns into its own.
package oauthrs

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
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Config says which authorization server issues the access tokens the
// server accepts, and what they must say.
type Config struct {
	Issuer     string
	Audience   string
	Scopes     []string
	HTTPClient *http.Client // nil: a client with a timeout of 10 seconds
	// KeyRefreshInterval is the least time between two fetches of the key
	// set that reach the issuer.
	KeyRefreshInterval time.Duration
}

// Kind says what an [*Error] refuses.
type Kind int

const (
	// BadConfig: the configuration is wrong.
	BadConfig Kind = iota + 1
	// Unreachable: the issuer's discovery document or keys could not be
	// read.
	Unreachable
	// BadToken: the request has no acceptable token.
	BadToken
	// MissingScope: the token lacks a scope every token must hold; Err is
	// a [*ScopeError].
	MissingScope
)

// Error is a refusal: Message says what went wrong, for the caller.
type Error struct {
	Kind    Kind
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// ScopeError is the cause of a refusal for missing scopes.
type ScopeError struct{ Missing []string }

func (e *ScopeError) Error() string { return "missing scopes " + strings.Join(e.Missing, " ") }

// Limits of the checks.
const (
	// maxTokenSize is the largest bearer token parsed: a larger one is
	// refused before any decoding, so that a huge header costs nothing.
	maxTokenSize = 16 << 10
	// clockSkew is how far the server's clock may disagree with the
	// issuer's on "exp" and "nbf".
	clockSkew = 30 * time.Second
)

// algs are the signature algorithms a token may use: asymmetric ones
// only, so that "none" and HMAC, where the public key could serve as a
// shared secret, are refused before any key is looked at. The key that
// verifies a token must be of the algorithm's type.
var algs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.EdDSA,
}

// The protected resource metadata (RFC 9728) of the server's root and,
// suffixed with its path, of the MCP endpoint: MCP clients look for the
// latter first.
const (
	WellKnown    = "/.well-known/oauth-protected-resource"
	WellKnownMCP = WellKnown + "/mcp"
)

// Verifier verifies access tokens for one audience.
type Verifier struct {
	issuer   string
	audience string
	scopes   []string
	verifier *oidc.IDTokenVerifier
	// origin is the scheme and host of the audience when it is a URL, or
	// the server's public URL: where the server is, for the metadata.
	// Otherwise each request's Host says.
	origin string
}

// New reads the issuer's discovery document and fetches its keys now, so
// that a wrong issuer is an error at start and the issuer may go down
// before the first call.
func New(ctx context.Context, c Config) (*Verifier, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	client := c.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	ctx = oidc.ClientContext(ctx, client)
	provider, err := oidc.NewProvider(ctx, c.Issuer)
	if err != nil {
		var mismatch *oidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, &Error{Kind: BadConfig, Message: fmt.Sprintf("OAuth: the discovery document of %s names the issuer %q; set Issuer to exactly the issuer's URL", c.Issuer, mismatch.Discovered), Err: err}
		}
		return nil, &Error{Kind: Unreachable, Message: fmt.Sprintf("OAuth: the issuer %s could not be discovered at %s: %v", c.Issuer, discoveryURL(c.Issuer), short(err)), Err: err}
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, &Error{Kind: Unreachable, Message: fmt.Sprintf("OAuth: the discovery document at %s has no jwks_uri", discoveryURL(c.Issuer)), Err: err}
	}
	limited := limitKeyFetches(client, doc.JWKSURI, c.KeyRefreshInterval)
	if err := checkKeys(ctx, limited, doc.JWKSURI); err != nil {
		return nil, &Error{Kind: Unreachable, Message: fmt.Sprintf("OAuth: the issuer's keys at %s: %v", doc.JWKSURI, short(err)), Err: err}
	}
	// The key set lives as long as the verifier: its fetches must not end
	// with the caller's ctx.
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.WithoutCancel(ctx), limited), doc.JWKSURI)
	// Fill the key cache now, so that the issuer may go down before the
	// first call. No key has the probe's id: the set fetches its keys, then
	// refuses the probe.
	_, _ = keys.VerifySignature(ctx, jwksProbe)
	v := &Verifier{
		issuer:   c.Issuer,
		audience: c.Audience,
		scopes:   slices.Clone(c.Scopes),
		verifier: oidc.NewVerifier(c.Issuer, keys, &oidc.Config{
			SupportedSigningAlgs: algs,
			// Checked by Verify: "aud" as a resource URI, and "exp" and
			// "nbf" with a small skew instead of go-oidc's none on exp and
			// five minutes on nbf.
			SkipClientIDCheck: true,
			SkipExpiryCheck:   true,
		}),
	}
	if u, err := url.Parse(c.Audience); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		v.origin = u.Scheme + "://" + u.Host
	}
	return v, nil
}

// Check reports the first mistake in a configuration.
func (c Config) Check() error {
	u, err := url.Parse(c.Issuer)
	switch {
	case c.Issuer == "":
		return errorf(BadConfig, "OAuth: Issuer is required: the authorization server's issuer URL, such as https://auth.example.com")
	case err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))):
		return errorf(BadConfig, "OAuth: Issuer %q must be an https URL (http only on a loopback address)", c.Issuer)
	case c.Audience == "":
		return errorf(BadConfig, "OAuth: Audience is required: this server's resource URI, such as https://tools.example.com/mcp, as tokens name it in aud")
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return errorf(BadConfig, "OAuth: scope %q is not a scope: one word without spaces or quotes", s)
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

// limitKeyFetches returns a copy of client whose fetches of the key set at
// jwksURI reach the issuer at most once per interval; the others get the
// last answer. go-oidc fetches the keys again for every token that does
// not verify with the cached ones, so that without this a flood of forged
// tokens would be a flood of requests to the issuer. A key the issuer
// publishes is still seen within the interval.
func limitKeyFetches(client *http.Client, jwksURI string, interval time.Duration) *http.Client {
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *client
	c.Transport = &keyFetchLimiter{next: next, url: jwksURI, interval: interval}
	return &c
}

type keyFetchLimiter struct {
	next     http.RoundTripper
	url      string
	interval time.Duration

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
	if time.Since(l.last) < l.interval {
		if l.body == nil {
			return nil, fmt.Errorf("the last fetch of the keys, %v ago, failed; the next waits %v", time.Since(l.last).Round(time.Millisecond), l.interval)
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

// Verify verifies the request's bearer token and returns its subject and
// what it grants: the entries of the space-separated "scope" claim (or of
// an "scp" claim, as some issuers name it) followed by those of a
// "permissions" array claim.
func (v *Verifier) Verify(r *http.Request) (subject string, permissions []string, err error) {
	token, err := bearer(r)
	if err != nil {
		return "", nil, err
	}
	idt, err := v.verifier.Verify(r.Context(), token)
	if err != nil {
		return "", nil, &Error{Kind: BadToken, Message: "the bearer token is not valid: its signature, algorithm or issuer is not accepted", Err: err}
	}
	var raw json.RawMessage
	var c accessClaims
	if err := idt.Claims(&raw); err != nil {
		return "", nil, &Error{Kind: BadToken, Message: "the bearer token's claims cannot be read", Err: err}
	}
	// Case-sensitive, and duplicate claim names refused: "Scope" is not
	// "scope".
	if err := jsonv2.Unmarshal(raw, &c); err != nil {
		return "", nil, &Error{Kind: BadToken, Message: "the bearer token's claims cannot be read", Err: err}
	}
	now := time.Now()
	switch {
	case !oauthex.MatchesResource(idt.Audience, v.audience):
		return "", nil, errorf(BadToken, "the bearer token is not valid: it is not meant for this server (aud must hold %q)", v.audience)
	case idt.Expiry.IsZero():
		return "", nil, errorf(BadToken, "the bearer token is not valid: it has no expiry (exp)")
	case now.After(idt.Expiry.Add(clockSkew)):
		return "", nil, errorf(BadToken, "the bearer token has expired; get a new one")
	case c.NotBefore != nil && *c.NotBefore > float64(now.Add(clockSkew).UnixMilli())/1e3:
		return "", nil, errorf(BadToken, "the bearer token is not valid yet (nbf)")
	case c.Subject == "":
		return "", nil, errorf(BadToken, "the bearer token is not valid: it names no subject (sub)")
	}
	scopes := splitScope(c.Scope)
	scopes = append(scopes, c.Scp...)
	var missing []string
	for _, s := range v.scopes {
		if !slices.Contains(scopes, s) {
			missing = append(missing, s)
		}
	}
	if missing != nil {
		return "", nil, &Error{Kind: MissingScope, Message: fmt.Sprintf("the bearer token lacks the scope %s that this server requires", strings.Join(missing, " ")), Err: &ScopeError{missing}}
	}
	return c.Subject, append(scopes, c.Permissions...), nil
}

// errNoToken is the refusal of a request without a bearer token.
func errNoToken() error {
	return errorf(BadToken, "send a bearer token: Authorization: Bearer <token>")
}

// bearer returns the request's bearer token: one Authorization header,
// scheme Bearer, at most maxTokenSize bytes.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errNoToken()
	case 1:
	default:
		return "", errorf(BadToken, "send one Authorization header, not %d", len(values))
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errNoToken()
	}
	if len(token) > maxTokenSize {
		return "", errorf(BadToken, "the bearer token is larger than %d KiB", maxTokenSize>>10)
	}
	return token, nil
}

// Scopes returns the scopes every token must hold.
func (v *Verifier) Scopes() []string { return v.scopes }

// LocateAt sets where the server is, a URL's scheme and host, for the
// metadata, when the audience did not say: the server's public URL.
// Call it before serving.
func (v *Verifier) LocateAt(origin string) {
	if v.origin == "" {
		v.origin = origin
	}
}

// serverOrigin is the scheme and host under which a request reached the
// server.
func (v *Verifier) serverOrigin(req *http.Request) string {
	if v.origin != "" {
		return v.origin
	}
	if req.TLS != nil {
		return "https://" + req.Host
	}
	return "http://" + req.Host
}

// Metadata describes the protected resource at path ("" for the server's
// root, or "/mcp") as the request reached it.
func (v *Verifier) Metadata(req *http.Request, path string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               v.serverOrigin(req) + path,
		AuthorizationServers:   []string{v.issuer},
		ScopesSupported:        v.scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "carmy",
	}
}

// ServeMetadata answers a request for the metadata of the protected
// resource at path, naming scopes as the scopes a client may ask for.
func (v *Verifier) ServeMetadata(w http.ResponseWriter, req *http.Request, path string, scopes []string) {
	m := v.Metadata(req, path)
	m.ScopesSupported = scopes
	auth.ProtectedResourceMetadataHandler(m).ServeHTTP(w, req)
}

// Challenge is the WWW-Authenticate value of a refused request, following
// RFC 6750 §3 and RFC 9728 §5.1: the metadata URL of the resource asked
// for, the scopes this server requires, and an error code once a token
// was sent. err is the refusal: a [*ScopeError] in its chain names the
// scopes the token lacks (error="insufficient_scope"); otherwise
// description says what was wrong with the token sent, "" for nothing.
func (v *Verifier) Challenge(req *http.Request, err error, description string) string {
	meta := v.serverOrigin(req) + WellKnown
	if req.URL.Path == "/mcp" {
		meta = v.serverOrigin(req) + WellKnownMCP
	}
	params := []string{}
	scope := strings.Join(v.scopes, " ")
	var missing *ScopeError
	switch {
	case errors.As(err, &missing):
		params = append(params, `error="insufficient_scope"`)
		scope = strings.Join(missing.Missing, " ")
	case req.Header.Get("Authorization") != "":
		params = append(params, `error="invalid_token"`)
		if description != "" {
			params = append(params, "error_description="+quoteParam(description))
		}
	}
	if scope != "" {
		params = append(params, "scope="+quoteParam(scope))
	}
	params = append(params, "resource_metadata="+quoteParam(meta))
	return "Bearer " + strings.Join(params, ", ")
}

// quoteParam quotes an auth-param value (RFC 9110 §5.6.4).
func quoteParam(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
