package carmy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// TestHTTPAuthenticationWrapper: every route of the HTTP API that serves
// a caller refuses a request its authentication refuses before anything
// else, with the same 401 and the same body on every route: without a
// token, with an unknown one, and with two Authorization headers. The
// list of tools says even its refusal is the caller's own.
func TestHTTPAuthenticationWrapper(t *testing.T) {
	t.Parallel()
	who := carmy.Tool(func(ctx context.Context, _ struct{}) (string, error) { return "ran", nil }, carmy.Write,
		carmy.Name("who"), carmy.Register(false))
	reg := build(t, carmy.New().Tool(who).Logger(quietLogger()).
		Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"})))
	srv := serve(t, reg)

	routes := []struct{ method, path string }{
		{"GET", "/tools"},
		{"POST", "/tools/who"},
		{"GET", "/approvals"},
		{"GET", "/approvals/a1"},
		{"POST", "/approvals/a1/approve"},
		{"POST", "/approvals/a1/deny"},
		{"GET", "/console/session"},
		{"GET", "/console/executions"},
		{"GET", "/tasks"},
		{"GET", "/tasks/t1"},
		{"POST", "/tasks/t1/cancel"},
	}
	credentials := map[string][]string{
		"no token":                  nil,
		"an unknown token":          {"Bearer not-a-token"},
		"two Authorization headers": {"Bearer " + aliceToken, "Bearer " + aliceToken},
		"a token of another scheme": {"Basic YWxpY2U6c2VjcmV0"},
	}
	for name, auth := range credentials {
		t.Run(name, func(t *testing.T) {
			var first string
			for _, rt := range routes {
				header := []string{"Content-Type", "application/json"}
				for _, a := range auth {
					header = append(header, "Authorization", a)
				}
				res, body := roundTrip(t, nil, rt.method, srv.URL+rt.path, `{}`, header...)
				if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"code":"unauthenticated"`) {
					t.Fatalf("%s %s = %d %s; want 401 unauthenticated", rt.method, rt.path, res.StatusCode, body)
				}
				if first == "" {
					first = string(body)
				} else if string(body) != first {
					t.Errorf("%s %s answers %s; %s %s answered %s", rt.method, rt.path, body, routes[0].method, routes[0].path, first)
				}
				if rt.path == "/tools" && (res.Header.Get("Cache-Control") != "private" || res.Header.Get("Vary") != "Authorization") {
					t.Errorf("GET /tools refused with Cache-Control %q, Vary %q; want private, Authorization",
						res.Header.Get("Cache-Control"), res.Header.Get("Vary"))
				}
			}
		})
	}
}
