package carmy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/carmy-dev/carmy"
)

// Signing keys of the test issuer, made once: RSA keys are slow to make.
var (
	rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	ecKey = sync.OnceValue(func() *ecdsa.PrivateKey { return newECKey() })
	// ecKey2 is the key the issuer rotates to.
	ecKey2 = sync.OnceValue(func() *ecdsa.PrivateKey { return newECKey() })
)

func newECKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

// testIssuer is an OpenID provider on loopback: a discovery document and
// a key set, which tests may change, or take down.
type testIssuer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	down    atomic.Bool
	fetches atomic.Int32 // of the key set
}

const testAudience = "carmy-api"

// newTestIssuer starts an issuer that publishes the RS256 key "rs" and the
// ES256 key "es".
func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	iss := &testIssuer{}
	iss.publish(jose.JSONWebKey{Key: rsaKey().Public(), KeyID: "rs", Algorithm: "RS256", Use: "sig"},
		jose.JSONWebKey{Key: ecKey().Public(), KeyID: "es", Algorithm: "ES256", Use: "sig"})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if iss.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/jwks",
			"authorization_endpoint":                iss.URL + "/authorize",
			"token_endpoint":                        iss.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		if iss.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		iss.fetches.Add(1)
		iss.mu.Lock()
		defer iss.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: iss.keys})
	})
	iss.Server = httptest.NewServer(mux)
	t.Cleanup(iss.Close)
	return iss
}

// publish replaces the issuer's key set.
func (iss *testIssuer) publish(keys ...jose.JSONWebKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys = keys
}

// claims are a valid token's claims for sub, with the given scope.
func (iss *testIssuer) claims(sub, scope string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": iss.URL, "aud": testAudience, "sub": sub, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	}
}

// sign makes a compact JWS of claims with a private key.
func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// with returns claims with some changed; a nil value removes the claim.
func with(claims map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newOAuth(t testing.TB, iss *testIssuer, scopes ...string) carmy.Authenticator {
	t.Helper()
	a, err := carmy.OAuth(context.Background(), carmy.OAuthConfig{Issuer: iss.URL, Audience: testAudience, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newOAuthRefreshing is newOAuth fetching the issuer's keys again at most
// once per interval.
func newOAuthRefreshing(t testing.TB, iss *testIssuer, interval time.Duration) carmy.Authenticator {
	t.Helper()
	a, err := carmy.OAuthKeyRefresh(context.Background(), carmy.OAuthConfig{Issuer: iss.URL, Audience: testAudience}, interval)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func authenticate(a carmy.Authenticator, token string) (carmy.Identity, error) {
	req := httptest.NewRequest("GET", "/tools", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return a.Authenticate(req)
}

// Every token of the list: the good ones pass with their sub and
// scopes, every bad one is refused with the code that gives its status.
func TestOAuthTokens(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	a := newOAuth(t, iss, "tools")
	good := iss.claims("alice", "tools confirm:burn_note")
	now := time.Now()
	rs := func(c map[string]any) string { return sign(t, jose.RS256, rsaKey(), "rs", c) }
	es := func(c map[string]any) string { return sign(t, jose.ES256, ecKey(), "es", c) }

	valid := rs(good)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64([]byte(`{"iss":"`+iss.URL+`","aud":"carmy-api","sub":"mallory","scope":"tools","exp":`+jsonInt(now.Add(time.Hour).Unix())+`}`)) + "." + parts[2]
	none := b64([]byte(`{"alg":"none","kid":"rs"}`)) + "." + parts[1] + "."
	pubPEM := func() []byte {
		der, _ := x509.MarshalPKIXPublicKey(rsaKey().Public())
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	// Algorithm confusion: HMAC with the issuer's public key as the secret,
	// which a verifier that took the algorithm from the token would accept.
	hs256 := sign(t, jose.HS256, pubPEM, "rs", good)
	// A token of another key is refused, even when it claims a known kid.
	stranger := sign(t, jose.ES256, newECKey(), "es", good)
	padding := func(n int) map[string]any { return with(good, "pad", strings.Repeat("x", n)) }

	for _, tc := range []struct {
		name, token string
		code        carmy.Code
		principal   string
	}{
		{"valid RS256", valid, "", "alice"},
		{"valid ES256", es(good), "", "alice"},
		{"expired within the clock skew", rs(with(good, "exp", now.Add(-10*time.Second).Unix())), "", "alice"},
		{"expired", rs(with(good, "exp", now.Add(-2*time.Minute).Unix())), carmy.CodeUnauthenticated, ""},
		{"no exp", rs(with(good, "exp", nil)), carmy.CodeUnauthenticated, ""},
		{"not yet valid", rs(with(good, "nbf", now.Add(2*time.Minute).Unix())), carmy.CodeUnauthenticated, ""},
		{"nbf within the clock skew", rs(with(good, "nbf", now.Add(10*time.Second).Unix())), "", "alice"},
		{"wrong issuer", rs(with(good, "iss", "https://evil.example.com")), carmy.CodeUnauthenticated, ""},
		{"wrong audience", rs(with(good, "aud", "another-api")), carmy.CodeUnauthenticated, ""},
		{"audience among others", rs(with(good, "aud", []string{"another-api", testAudience})), "", "alice"},
		{"no sub", rs(with(good, "sub", nil)), carmy.CodeUnauthenticated, ""},
		{"missing scope", rs(with(good, "scope", "confirm:burn_note")), carmy.CodePermissionDenied, ""},
		{"scope as a prefix only", rs(with(good, "scope", "toolsets")), carmy.CodePermissionDenied, ""},
		{"alg none", none, carmy.CodeUnauthenticated, ""},
		{"HS256 with the public key as secret", hs256, carmy.CodeUnauthenticated, ""},
		{"signed by another key", stranger, carmy.CodeUnauthenticated, ""},
		{"tampered payload", tampered, carmy.CodeUnauthenticated, ""},
		{"garbage", "not.a.jwt", carmy.CodeUnauthenticated, ""},
		// Base64 makes the padding a third larger.
		{"just under 16 KiB", rs(padding(11 << 10)), "", "alice"},
		{"over 16 KiB", rs(padding(12 << 10)), carmy.CodeUnauthenticated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := authenticate(a, tc.token)
			if got := carmy.CodeOf(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if id.Principal != tc.principal {
				t.Errorf("principal %q, want %q", id.Principal, tc.principal)
			}
		})
	}

	t.Run("over 16 KiB is refused unread", func(t *testing.T) {
		// Not even base64: only the size can refuse it.
		_, err := authenticate(a, strings.Repeat("!", 16<<10+1))
		if !strings.Contains(err.Error(), "larger than 16 KiB") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("two Authorization headers", func(t *testing.T) {
		req := httptest.NewRequest("GET", "/tools", nil)
		req.Header.Add("Authorization", "Bearer "+valid)
		req.Header.Add("Authorization", "Bearer "+valid)
		if _, err := a.Authenticate(req); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
			t.Errorf("error %v", err)
		}
	})
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// The principal is sub; the permissions are the scope claim's entries, an
// scp claim's (string or array), then a permissions array claim's.
func TestOAuthPermissions(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	a := newOAuth(t, iss)
	base := iss.claims("svc-7", "")
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   []string
	}{
		{"scope", with(base, "scope", "tools  confirm:burn_note"), []string{"tools", "confirm:burn_note"}},
		{"scp array", with(base, "scope", nil, "scp", []string{"tools", "read"}), []string{"tools", "read"}},
		{"scp string", with(base, "scope", nil, "scp", "tools read"), []string{"tools", "read"}},
		{"permissions", with(base, "scope", "tools", "permissions", []string{"confirm:burn_note"}), []string{"tools", "confirm:burn_note"}},
		{"none", with(base, "scope", nil), nil},
		// RFC 6749 §3.3: scopes are separated by U+0020 alone.
		{"no-break space is not a separator", with(base, "scope", "read\u00a0confirm:burn_note"), []string{"read\u00a0confirm:burn_note"}},
		{"tab and newline are not separators", with(base, "scope", "read\tconfirm:burn_note\nx"), []string{"read\tconfirm:burn_note\nx"}},
		{"ideographic space in scp", with(base, "scope", nil, "scp", "read\u3000confirm:burn_note"), []string{"read\u3000confirm:burn_note"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := authenticate(a, sign(t, jose.ES256, ecKey(), "es", tc.claims))
			if err != nil {
				t.Fatal(err)
			}
			if id.Principal != "svc-7" || !slices.Equal(id.Permissions, tc.want) {
				t.Errorf("identity %+v, want principal svc-7 and permissions %q", id, tc.want)
			}
		})
	}
	t.Run("claim names are case-sensitive", func(t *testing.T) {
		id, err := authenticate(a, sign(t, jose.ES256, ecKey(), "es", with(base, "scope", nil, "Scope", "admin", "Permissions", []string{"confirm:burn_note"})))
		if err != nil || len(id.Permissions) != 0 {
			t.Errorf("identity %+v, %v: Scope and Permissions granted something", id, err)
		}
	})
}

// A token naming a key the cache lacks makes the key set fetched again:
// refused while the issuer does not publish it, accepted once it does,
// without a restart; a key the issuer dropped stops working.
func TestOAuthKeyRotation(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	a := newOAuthRefreshing(t, iss, 0)
	start := iss.fetches.Load()
	claims := iss.claims("alice", "")
	old := sign(t, jose.ES256, ecKey(), "es", claims)
	rotated := sign(t, jose.ES256, ecKey2(), "es-2", claims)
	if _, err := authenticate(a, old); err != nil {
		t.Fatal(err)
	}
	if n := iss.fetches.Load() - start; n != 0 {
		t.Errorf("%d key fetches for a cached key's token, want 0", n)
	}
	unknown := eventually(func() bool {
		if _, err := authenticate(a, rotated); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
			t.Fatalf("unknown kid before the rotation: %v", err)
		}
		return iss.fetches.Load() > start
	})
	if !unknown {
		t.Errorf("no key fetch for an unknown kid")
	}
	iss.publish(jose.JSONWebKey{Key: ecKey2().Public(), KeyID: "es-2", Algorithm: "ES256", Use: "sig"})
	var (
		id  carmy.Identity
		err error
	)
	eventually(func() bool { id, err = authenticate(a, rotated); return err == nil })
	if err != nil || id.Principal != "alice" {
		t.Fatalf("new key after the rotation: %+v, %v", id, err)
	}
	if !eventually(func() bool { _, err := authenticate(a, old); return carmy.CodeOf(err) == carmy.CodeUnauthenticated }) {
		t.Errorf("the dropped key's token is still accepted")
	}
}

// eventually reports whether f holds within half a second. go-oidc hands
// a key fetch's result to the calls waiting for it a moment before it
// caches the keys and lets another fetch start: a call right after a
// fetch may still see the keys before it.
func eventually(f func() bool) bool {
	for range 50 {
		if f() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// Tokens that do not verify make the keys fetched again, but at most once
// per interval: a flood of forged tokens is not a flood of requests to the
// issuer.
func TestOAuthKeyFetchLimit(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	iss := newTestIssuer(t)
	started := time.Now()
	a := newOAuthRefreshing(t, iss, interval)
	if n := iss.fetches.Load(); n != 1 {
		t.Errorf("%d key fetches at start, want 1", n)
	}
	claims := iss.claims("alice", "")
	valid := sign(t, jose.ES256, ecKey(), "es", claims)
	var forged []string
	for i := range 20 {
		if i%2 == 0 {
			forged = append(forged, sign(t, jose.ES256, ecKey2(), "kid-"+strconv.Itoa(i), claims)) // an unknown kid
		} else {
			forged = append(forged, sign(t, jose.ES256, newECKey(), "es", claims)) // a known kid, another key
		}
	}
	// flood sends the forged tokens and returns how many fetches reached
	// the issuer.
	flood := func() int32 {
		before := iss.fetches.Load()
		for _, tok := range forged {
			if _, err := authenticate(a, tok); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
				t.Fatalf("forged token: %v", err)
			}
		}
		return iss.fetches.Load() - before
	}
	// Since the fetch at start, one fetch per interval at most.
	if n, allowed := flood(), int32(time.Since(started)/interval); n > allowed {
		t.Errorf("%d key fetches for a flood, want at most %d", n, allowed)
	}
	time.Sleep(interval + 50*time.Millisecond)
	started = time.Now()
	if n, allowed := flood(), 1+int32(time.Since(started)/interval); n < 1 || n > allowed {
		t.Errorf("%d key fetches for a flood past the interval, want 1 to %d", n, allowed)
	}
	if _, err := authenticate(a, valid); err != nil {
		t.Errorf("a valid token after the floods: %v", err)
	}
}

func TestOAuthIssuerDown(t *testing.T) {
	t.Parallel()
	t.Run("at start", func(t *testing.T) {
		iss := newTestIssuer(t)
		iss.Close()
		_, err := carmy.OAuth(context.Background(), carmy.OAuthConfig{Issuer: iss.URL, Audience: testAudience})
		if carmy.CodeOf(err) != carmy.CodeUnavailable || !strings.Contains(err.Error(), "the issuer "+iss.URL+" could not be discovered at "+iss.URL+"/.well-known/openid-configuration") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("keys down at start", func(t *testing.T) {
		iss := newTestIssuer(t)
		iss.publish()
		_, err := carmy.OAuth(context.Background(), carmy.OAuthConfig{Issuer: iss.URL, Audience: testAudience})
		if carmy.CodeOf(err) != carmy.CodeUnavailable || !strings.Contains(err.Error(), "the issuer's keys at "+iss.URL+"/jwks: the set holds no keys") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("later", func(t *testing.T) {
		iss := newTestIssuer(t)
		a := newOAuth(t, iss)
		iss.down.Store(true)
		// No call verified a token before: the keys were cached at start.
		for _, tok := range []string{
			sign(t, jose.RS256, rsaKey(), "rs", iss.claims("alice", "")),
			sign(t, jose.ES256, ecKey(), "es", iss.claims("alice", "")),
		} {
			if id, err := authenticate(a, tok); err != nil || id.Principal != "alice" {
				t.Errorf("with the issuer down: %+v, %v", id, err)
			}
		}
		if _, err := authenticate(a, sign(t, jose.ES256, ecKey2(), "es-2", iss.claims("alice", ""))); carmy.CodeOf(err) != carmy.CodeUnauthenticated {
			t.Errorf("unknown kid with the issuer down: %v", err)
		}
	})
	t.Run("issuer mismatch", func(t *testing.T) {
		iss := newTestIssuer(t)
		_, err := carmy.OAuth(context.Background(), carmy.OAuthConfig{Issuer: iss.URL + "/", Audience: testAudience})
		if carmy.CodeOf(err) != carmy.CodeInvalidInput || !strings.Contains(err.Error(), "names the issuer") {
			t.Errorf("error %v", err)
		}
	})
}

func TestOAuthConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  carmy.OAuthConfig
		want string
	}{
		{carmy.OAuthConfig{Audience: "a"}, "Issuer is required"},
		{carmy.OAuthConfig{Issuer: "http://auth.example.com", Audience: "a"}, "must be an https URL"},
		{carmy.OAuthConfig{Issuer: "auth.example.com", Audience: "a"}, "must be an https URL"},
		{carmy.OAuthConfig{Issuer: "https://auth.example.com"}, "Audience is required"},
		{carmy.OAuthConfig{Issuer: "https://auth.example.com", Audience: "a", Scopes: []string{"a b"}}, "is not a scope"},
	} {
		_, err := carmy.OAuth(context.Background(), tc.cfg)
		if carmy.CodeOf(err) != carmy.CodeInvalidInput || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OAuth(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// oauthServer serves the host tools, and a tool that shows the caller's
// permissions, behind the issuer's tokens.
func oauthServer(t *testing.T, iss *testIssuer, scopes ...string) (*httptest.Server, *hostTools) {
	t.Helper()
	perms := carmy.Tool(func(ctx carmy.Context) ([]string, error) { return ctx.Permissions.List(), nil },
		carmy.Read, carmy.Name("my_permissions"), carmy.ParallelSafe(), carmy.Register(false))
	return hostServer(t, carmy.New().Logger(quietLogger()).Authenticate(newOAuth(t, iss, scopes...)).Tool(perms))
}

// What a caller of the HTTP API and of /mcp gets back, token by token:
// status, WWW-Authenticate, and where the metadata is.
func TestOAuthHTTPChallenges(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	srv, _ := oauthServer(t, iss, "tools")
	rootMeta := srv.URL + "/.well-known/oauth-protected-resource"
	mcpMeta := rootMeta + "/mcp"
	good := iss.claims("alice", "tools")
	valid := sign(t, jose.ES256, ecKey(), "es", good)
	expired := sign(t, jose.ES256, ecKey(), "es", with(good, "exp", time.Now().Add(-time.Hour).Unix()))
	noScope := sign(t, jose.ES256, ecKey(), "es", with(good, "scope", "read"))
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	for _, route := range []struct {
		name, method, path, body, meta string
	}{
		{"GET /tools", "GET", "/tools", "", rootMeta},
		{"POST /tools/whoami", "POST", "/tools/whoami", "{}", rootMeta},
		{"/mcp", "POST", "/mcp", initialize, mcpMeta},
	} {
		for _, tc := range []struct {
			name, token string
			status      int
			challenge   string
		}{
			{"no token", "", 401, `Bearer scope="tools", resource_metadata="` + route.meta + `"`},
			{"expired", expired, 401, `Bearer error="invalid_token", error_description="the bearer token has expired; get a new one", scope="tools", resource_metadata="` + route.meta + `"`},
			{"garbage", "x.y.z", 401, `Bearer error="invalid_token", error_description="the bearer token is not valid: its signature, algorithm or issuer is not accepted", scope="tools", resource_metadata="` + route.meta + `"`},
			{"missing scope", noScope, 403, `Bearer error="insufficient_scope", scope="tools", resource_metadata="` + route.meta + `"`},
			{"valid", valid, 200, ""},
		} {
			t.Run(route.name+"/"+tc.name, func(t *testing.T) {
				header := []string{"Accept", "application/json, text/event-stream"}
				if tc.token != "" {
					header = append(header, "Authorization", "Bearer "+tc.token)
				}
				r := do(t, route.method, srv.URL+route.path, route.body, header...)
				if r.status != tc.status {
					t.Fatalf("status %d, want %d (%v)", r.status, tc.status, r.body)
				}
				if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
					t.Errorf("WWW-Authenticate\n got %s\nwant %s", got, tc.challenge)
				}
				if id := r.header.Get("Mcp-Session-Id"); id != "" {
					// End the session that initialize opened.
					do(t, "DELETE", srv.URL+"/mcp", "", append(header, "Mcp-Session-Id", id)...)
				}
				if tc.status != 200 {
					challenges, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate"))
					if err != nil || len(challenges) != 1 || challenges[0].Params["resource_metadata"] != route.meta {
						t.Errorf("the SDK reads %+v, %v", challenges, err)
					}
				}
			})
		}
	}

	t.Run("metadata", func(t *testing.T) {
		for _, tc := range []struct{ url, resource string }{{rootMeta, srv.URL}, {mcpMeta, srv.URL + "/mcp"}} {
			r := do(t, "GET", tc.url, "")
			want := map[string]any{
				"resource":                 tc.resource,
				"authorization_servers":    []any{iss.URL},
				"scopes_supported":         []any{"tools"},
				"bearer_methods_supported": []any{"header"},
				"resource_name":            "carmy",
			}
			if r.status != 200 || !jsonEqual(r.body, want) {
				t.Errorf("GET %s: %d %v\nwant %v", tc.url, r.status, r.body, want)
			}
			// Browser-based clients read it from their own origin, while
			// the routes behind it stay closed to other origins.
			if got := browserGet(t, tc.url); got != 200 {
				t.Errorf("cross-origin GET %s: %d; want 200", tc.url, got)
			}
			if got := browserGet(t, srv.URL+"/tools"); got != 403 {
				t.Errorf("cross-origin GET /tools: %d; want 403", got)
			}
			// The MCP SDK's client checks the resource against the URL it
			// derived the metadata URL from.
			if _, err := oauthex.GetProtectedResourceMetadata(context.Background(), tc.url, tc.resource, http.DefaultClient); err != nil {
				t.Errorf("the SDK's client refuses the metadata: %v", err)
			}
		}
	})
}

// browserGet sends a GET as a page of another site does, and returns the
// status.
func browserGet(t *testing.T, url string) int {
	t.Helper()
	res, _ := roundTrip(t, nil, "GET", url, "", "Origin", "https://agent.example", "Sec-Fetch-Site", "cross-site")
	return res.StatusCode
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// An audience that is a URL says where the server is, behind any proxy.
func TestOAuthAudienceURL(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	const aud = "https://tools.example.com/mcp"
	a, err := carmy.OAuth(context.Background(), carmy.OAuthConfig{Issuer: iss.URL, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := hostServer(t, carmy.New().Logger(quietLogger()).Authenticate(a))
	r := do(t, "POST", srv.URL+"/mcp", "{}")
	if want := `Bearer resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp"`; r.status != 401 || r.header.Get("WWW-Authenticate") != want {
		t.Errorf("%d %q, want %q", r.status, r.header.Get("WWW-Authenticate"), want)
	}
	if r := do(t, "GET", srv.URL+"/.well-known/oauth-protected-resource/mcp", ""); r.body["resource"] != aud {
		t.Errorf("metadata %v", r.body)
	}
	tok := sign(t, jose.ES256, ecKey(), "es", with(iss.claims("alice", ""), "aud", aud+"/"))
	if r := do(t, "POST", srv.URL+"/tools/whoami", "{}", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Errorf("a token for %s/: %d %v", aud, r.status, r.body)
	}
}

// Without OAuth nothing is published and 401 answers are as before.
func TestOAuthMetadataOnlyWithOAuth(t *testing.T) {
	t.Parallel()
	tokens := carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"})
	srv, _ := hostServer(t, carmy.New().Authenticate(tokens))
	if r := do(t, "GET", srv.URL+"/.well-known/oauth-protected-resource", ""); r.status != 404 {
		t.Errorf("metadata without OAuth: %d", r.status)
	}
	if r := do(t, "GET", srv.URL+"/tools", ""); r.status != 401 || r.header.Get("WWW-Authenticate") != `Bearer realm="carmy"` {
		t.Errorf("401 without OAuth: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
}

// A token's sub and scopes reach the tools: scopes grant confirmations,
// and idempotency records are the sub's own.
func TestOAuthCalls(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	srv, h := oauthServer(t, iss, "tools")
	tok := func(sub string, kv ...any) string {
		return "Bearer " + sign(t, jose.ES256, ecKey(), "es", with(iss.claims(sub, "tools"), kv...))
	}
	call := func(tool, auth string, header ...string) response {
		return do(t, "POST", srv.URL+"/tools/"+tool, `{"text":"hi"}`, append([]string{"Authorization", auth}, header...)...)
	}

	t.Run("permissions", func(t *testing.T) {
		r := do(t, "POST", srv.URL+"/tools/my_permissions", "{}", "Authorization", tok("alice", "scope", "tools read", "permissions", []string{"confirm:x"}))
		if !jsonEqual(r.body["output"], []string{"confirm:x", "read", "tools"}) {
			t.Errorf("permissions %v", r.body)
		}
	})
	t.Run("confirmation", func(t *testing.T) {
		for _, tc := range []struct {
			name, auth string
			status     int
		}{
			{"no grant", tok("alice"), 403},
			{"scope grants", tok("alice", "scope", "tools confirm:burn_note"), 200},
			{"permissions claim grants", tok("alice", "permissions", []string{"confirm:burn_note"}), 200},
			{"another tool's grant", tok("alice", "scope", "tools confirm:save_note"), 403},
		} {
			r := call("burn_note", tc.auth)
			if r.status != tc.status || (tc.status == 403 && errCode(r) != "confirmation_required") {
				t.Errorf("%s: %d %v", tc.name, r.status, r.body)
			}
		}
	})
	t.Run("idempotency by sub", func(t *testing.T) {
		first := call("save_note", tok("alice"), "Idempotency-Key", "req-1")
		other := call("save_note", tok("bob"), "Idempotency-Key", "req-1")
		again := call("save_note", tok("alice"), "Idempotency-Key", "req-1")
		if first.status != 200 || other.status != 200 || again.status != 200 {
			t.Fatalf("statuses %d %d %d", first.status, other.status, again.status)
		}
		if first.body["replayed"] != false || other.body["replayed"] != false || again.body["replayed"] != true {
			t.Errorf("replayed: alice %v, bob %v, alice again %v", first.body["replayed"], other.body["replayed"], again.body["replayed"])
		}
		if first.body["execution_id"] == other.body["execution_id"] || again.body["execution_id"] != first.body["execution_id"] {
			t.Errorf("execution ids: alice %v, bob %v, alice again %v", first.body["execution_id"], other.body["execution_id"], again.body["execution_id"])
		}
		if n := h.saves.Load(); n != 2 {
			t.Errorf("%d executions, want 2", n)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		s, err := mcpSession(t, srv.URL, strings.TrimPrefix(tok("carol", "scope", "tools confirm:burn_note"), "Bearer "), nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
		if err != nil || structured(t, r)["result"] != "carol" {
			t.Fatalf("whoami = %+v, %v", r, err)
		}
		r, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "burn_note", Arguments: map[string]any{"text": "hi"}})
		if err != nil || r.IsError {
			t.Errorf("burn_note with the scope's grant: %+v, %v", r, err)
		}
		if _, err := mcpSession(t, srv.URL, strings.TrimPrefix(tok("carol", "scope", "read"), "Bearer "), nil); err == nil {
			t.Error("connected without the required scope")
		}
	})
}

// carmy.toml's [oauth] (here through CARMY_OAUTH_*) makes App's builder a
// resource server at Build, and lets it listen beyond loopback.
func TestOAuthApp(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	iss := newTestIssuer(t)
	t.Setenv("CARMY_CONFIG", writeConfig(t, ""))
	t.Setenv("CARMY_OAUTH_ISSUER", iss.URL)
	t.Setenv("CARMY_OAUTH_AUDIENCE", testAudience)
	t.Setenv("CARMY_OAUTH_SCOPES", "tools, read")
	tool := carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("noop"), carmy.Register(false))

	r := build(t, carmy.App().Logger(quietLogger()).Tool(tool))
	srv := serve(t, r)
	if resp := do(t, "GET", srv.URL+"/.well-known/oauth-protected-resource", ""); !jsonEqual(resp.body["scopes_supported"], []string{"tools", "read"}) {
		t.Errorf("metadata %v", resp.body)
	}
	tok := sign(t, jose.ES256, ecKey(), "es", iss.claims("alice", "tools read"))
	if resp := do(t, "GET", srv.URL+"/tools", "", "Authorization", "Bearer "+tok); resp.status != 200 {
		t.Errorf("GET /tools: %d", resp.status)
	}

	t.Run("listens beyond loopback", func(t *testing.T) {
		// 192.0.2.1 (RFC 5737) is on no interface: past the exposure
		// check, binding fails and nothing is sent.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := carmy.App().Logger(quietLogger()).Tool(tool).Listen(ctx, "192.0.2.1:0")
		if err == nil || strings.Contains(err.Error(), "refusing") {
			t.Errorf("Listen = %v", err)
		}
	})
	t.Run("issuer down", func(t *testing.T) {
		iss.down.Store(true)
		defer iss.down.Store(false)
		_, err := carmy.App().Logger(quietLogger()).Tool(tool).Build()
		var be *carmy.BuildError
		want := "carmy: CARMY_OAUTH_ISSUER: OAuth: the issuer " + iss.URL + " could not be discovered at " + iss.URL + "/.well-known/openid-configuration: 503 Service Unavailable: down"
		if !errors.As(err, &be) || be.Site != "CARMY_OAUTH_ISSUER" || carmy.CodeOf(be.Err) != carmy.CodeUnavailable || err.Error() != want {
			t.Errorf("Build = %v\nwant %s", err, want)
		}
	})
}

// BenchmarkOAuthAuthenticate is the cost of authenticating one call with
// an access token, its key cached.
func BenchmarkOAuthAuthenticate(b *testing.B) {
	iss := newTestIssuer(b)
	a := newOAuth(b, iss, "tools")
	for _, k := range []struct {
		name string
		alg  jose.SignatureAlgorithm
		key  any
		kid  string
	}{{"RS256", jose.RS256, rsaKey(), "rs"}, {"ES256", jose.ES256, ecKey(), "es"}} {
		b.Run(k.name, func(b *testing.B) {
			claims := iss.claims("alice", "tools confirm:burn_note")
			claims["exp"] = time.Now().Add(time.Hour).Unix()
			req := httptest.NewRequest("GET", "/tools", nil)
			req.Header.Set("Authorization", "Bearer "+sign(b, k.alg, k.key, k.kid, claims))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
