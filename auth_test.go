package carmy_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestAuthenticatorErrorNotLogged: an authenticator's message and cause,
// which may hold the credential, never reach the log; the refusal is
// logged with its code.
func TestAuthenticatorErrorNotLogged(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-4242-very-secret"
	for _, tt := range []struct {
		name string
		auth carmy.AuthenticatorFunc
	}{
		{"a carmy error", func(r *http.Request) (carmy.Identity, error) {
			return carmy.Identity{}, carmy.Errorf(carmy.CodeUnauthenticated, "token %s is revoked", r.Header.Get("Authorization"))
		}},
		{"a plain error", func(r *http.Request) (carmy.Identity, error) {
			return carmy.Identity{}, fmt.Errorf("lookup of %s: %w", r.Header.Get("Authorization"), errors.New("no such token"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &logSink{}
			reg := build(t, carmy.New().Authenticate(tt.auth).Logger(slog.New(slog.NewTextHandler(log, nil))).Tool(boundaryTools()...))
			srv := serve(t, reg)
			for _, r := range []struct{ method, path, body string }{
				{"GET", "/tools", ""}, {"POST", "/tools/who", "{}"}, {"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
				{"GET", "/approvals", ""}, {"GET", "/console/session", ""},
			} {
				if status, _ := httpDo(t, http.DefaultClient, r.method, srv.URL+r.path, r.body, "Authorization", "Bearer "+secret); status != 401 {
					t.Fatalf("%s %s = %d; want 401", r.method, r.path, status)
				}
			}
			if strings.Contains(log.String(), secret) || strings.Contains(log.String(), "revoked") || strings.Contains(log.String(), "no such token") {
				t.Fatalf("the log holds the authenticator's words:\n%s", log)
			}
			if strings.Count(log.String(), "code=unauthenticated") < 5 {
				t.Fatalf("the log does not name the refusals' code:\n%s", log)
			}
		})
	}
}

// TestPrincipalNotUTF8: an authenticator that names a principal that is
// not valid UTF-8 gets its caller a 401, on every door, not a 500.
func TestPrincipalNotUTF8(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Authenticate(carmy.AuthenticatorFunc(func(*http.Request) (carmy.Identity, error) {
		return carmy.Identity{Principal: "agent\xff\xfe"}, nil
	})).Logger(quietLogger()).Tool(boundaryTools()...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := serve(t, reg)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/tools/who", "{}"}, {"GET", "/tools", ""}, {"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"GET", "/approvals", ""}, {"GET", "/console/executions", ""},
	} {
		if status, body := httpDo(t, http.DefaultClient, r.method, srv.URL+r.path, r.body); status != 401 || errObj(body)["code"] != "unauthenticated" {
			t.Fatalf("%s %s = %d %v; want 401", r.method, r.path, status, body)
		}
	}
}
