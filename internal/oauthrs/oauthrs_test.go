package oauthrs

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

func TestSplitScope(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"read write", []string{"read", "write"}},
		{"  read   write ", []string{"read", "write"}},
		// Only U+0020 separates: anything else is part of a scope.
		{"read\u00a0confirm:destroy", []string{"read\u00a0confirm:destroy"}},
		{"read\tconfirm:destroy", []string{"read\tconfirm:destroy"}},
	} {
		t.Run(tt.in, func(t *testing.T) {
			if got := splitScope(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("%q, want %q", got, tt.want)
			}
		})
	}
}

func TestClaimList(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`"a b"`, []string{"a", "b"}, true},
		{`["a b","c"]`, []string{"a b", "c"}, true},
		{`7`, nil, false},
		{`{"a":1}`, nil, false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			var c claimList
			err := jsonv2.Unmarshal([]byte(tt.in), &c)
			if (err == nil) != tt.ok || !slices.Equal(c, tt.want) {
				t.Fatalf("%q, %v; want %q, ok %v", c, err, tt.want, tt.ok)
			}
		})
	}
}

func TestBearer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header []string
		want   string
	}{
		{"none", nil, ""},
		{"bearer", []string{"Bearer abc"}, "abc"},
		{"scheme in any case", []string{"bEaReR abc"}, "abc"},
		{"basic", []string{"Basic abc"}, ""},
		{"empty token", []string{"Bearer "}, ""},
		{"two headers", []string{"Bearer abc", "Bearer def"}, ""},
		{"too large", []string{"Bearer " + strings.Repeat("a", maxTokenSize+1)}, ""},
		{"largest", []string{"Bearer " + strings.Repeat("a", maxTokenSize)}, strings.Repeat("a", maxTokenSize)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/tools", nil)
			for _, h := range tt.header {
				req.Header.Add("Authorization", h)
			}
			got, err := bearer(req)
			var e *Error
			if got != tt.want || (tt.want == "") != errors.As(err, &e) || (e != nil && e.Kind != BadToken) {
				t.Fatalf("%.20q, %v; want %.20q", got, err, tt.want)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		ok   bool
	}{
		{"https", Config{Issuer: "https://auth.example.com", Audience: "https://tools.example.com/mcp", Scopes: []string{"tools"}}, true},
		{"http on loopback", Config{Issuer: "http://127.0.0.1:9000", Audience: "x"}, true},
		{"http on localhost", Config{Issuer: "http://localhost:9000", Audience: "x"}, true},
		{"no issuer", Config{Audience: "x"}, false},
		{"http elsewhere", Config{Issuer: "http://auth.example.com", Audience: "x"}, false},
		{"no host", Config{Issuer: "https://", Audience: "x"}, false},
		{"no audience", Config{Issuer: "https://auth.example.com"}, false},
		{"scope with a space", Config{Issuer: "https://auth.example.com", Audience: "x", Scopes: []string{"a b"}}, false},
		{"empty scope", Config{Issuer: "https://auth.example.com", Audience: "x", Scopes: []string{""}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Check()
			var e *Error
			if (err == nil) != tt.ok || (err != nil && (!errors.As(err, &e) || e.Kind != BadConfig)) {
				t.Fatalf("%v, want ok %v", err, tt.ok)
			}
		})
	}
}

// Fetches of the keys reach the issuer at most once per interval; the
// others get the last answer, and other URLs are not limited.
func TestKeyFetchLimiter(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = io.WriteString(w, `{"keys":[]}`)
	}))
	defer srv.Close()
	const interval = 200 * time.Millisecond
	c := limitKeyFetches(srv.Client(), srv.URL+"/jwks", interval)
	get := func(path string) string {
		t.Helper()
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	start := time.Now()
	for range 5 {
		if got := get("/jwks"); got != `{"keys":[]}` {
			t.Fatalf("answer %q", got)
		}
	}
	if n := fetches.Load(); n != 1 && time.Since(start) < interval {
		t.Fatalf("%d fetches within the interval, want 1", n)
	}
	get("/other")
	get("/other")
	if n := fetches.Load(); n < 3 {
		t.Fatalf("%d fetches: other URLs were limited", n)
	}
	time.Sleep(interval)
	before := fetches.Load()
	get("/jwks")
	if fetches.Load() != before+1 {
		t.Fatal("no fetch after the interval")
	}
}

func TestChallenge(t *testing.T) {
	v := &Verifier{issuer: "https://auth.example.com", scopes: []string{"tools"}}
	v.LocateAt("https://tools.example.com")
	v.LocateAt("https://ignored.example.com") // the first one holds
	for _, tt := range []struct {
		name, path, auth string
		err              error
		description      string
		want             string
	}{
		{"no token", "/tools", "", errors.New("x"), "", `Bearer scope="tools", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource"`},
		{"MCP", "/mcp", "", errors.New("x"), "", `Bearer scope="tools", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp"`},
		{"bad token", "/tools", "Bearer x", errors.New("x"), `it "expired"`, `Bearer error="invalid_token", error_description="it \"expired\"", scope="tools", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource"`},
		{"missing scope", "/tools", "Bearer x", &Error{Kind: MissingScope, Err: &ScopeError{[]string{"tools", "confirm:x"}}}, "", `Bearer error="insufficient_scope", scope="tools confirm:x", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			if got := v.Challenge(req, tt.err, tt.description); got != tt.want {
				t.Fatalf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMetadataOrigin(t *testing.T) {
	v := &Verifier{issuer: "https://auth.example.com"}
	req := httptest.NewRequest(http.MethodGet, "http://localhost:3000"+WellKnownMCP, nil)
	if got := v.Metadata(req, "/mcp").Resource; got != "http://localhost:3000/mcp" {
		t.Fatalf("resource %q, want the request's host", got)
	}
	v.LocateAt("https://tools.example.com")
	if got := v.Metadata(req, "/mcp").Resource; got != "https://tools.example.com/mcp" {
		t.Fatalf("resource %q, want the located origin", got)
	}
}
