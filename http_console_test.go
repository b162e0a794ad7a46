package carmy_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

func TestConsolePage(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New())
	get := func(path string, header ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if h := req.Header.Get("Host"); h != "" {
			req.Host = h
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, page := get("/console")
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(page, "/console/assets/console.js") {
		t.Fatalf("GET /console = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("CSP = %q; want the page's own files only", csp)
	}
	weight := len(page)
	for _, a := range []string{"console.js", "console.css"} {
		res, body := get("/console/assets/" + a)
		if res.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("GET %s = %d", a, res.StatusCode)
		}
		weight += len(body)
	}
	t.Logf("page weight: %.1f KiB", float64(weight)/1024)
	for _, p := range []string{"/console/assets/", "/console/assets/nope.js", "/console/assets/index.html", "/console/assets/../console.go"} {
		if res, _ := get(p); res.StatusCode != 404 {
			t.Errorf("GET %s = %d; want 404", p, res.StatusCode)
		}
	}
	// Behind the same boundary as the API.
	if res, _ := get("/console", "Host", "evil.example"); res.StatusCode != 403 {
		t.Fatalf("GET /console with a rebound Host = %d; want 403", res.StatusCode)
	}
	if res, _ := get("/console/executions", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); res.StatusCode != 403 {
		t.Fatalf("a cross-origin read of the executions = %d; want 403", res.StatusCode)
	}
}

// The console secret makes an approver when the page sends it in its
// header, never by a cookie: opening the console URL sets none, and a
// wrong secret makes no approver.
func TestConsoleSecretExchange(t *testing.T) {
	t.Parallel()
	srv, reg, _ := approvalServer(t, carmy.New())
	_, secret, _ := strings.Cut(reg.ConsoleURL(srv.URL), "?token=")
	for _, tt := range []struct {
		name     string
		header   []string
		approver bool
	}{
		{"no secret", nil, false},
		{"a wrong secret", []string{carmy.ConsoleHeader, strings.Repeat("0", 64)}, false},
		{"the secret in a cookie", []string{"Cookie", "carmy_console=" + secret}, false},
		{"the secret", []string{carmy.ConsoleHeader, secret}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar}
			res, err := c.Get(reg.ConsoleURL(srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if len(res.Cookies()) != 0 {
				t.Fatalf("the console set cookies %v", res.Cookies())
			}
			_, s := httpDo(t, c, "GET", srv.URL+"/console/session", "", tt.header...)
			if m := s.(map[string]any); m["approver"] != tt.approver || m["authenticated"] != false || m["console"] != true {
				t.Fatalf("session = %v; want approver %v", m, tt.approver)
			}
		})
	}
}

func TestConsoleExecutions(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New().Authenticate(carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent", Permissions: []string{"confirm:delete_note"}},
		carmy.Token{SHA256: carmy.HashToken("other"), Principal: "other"},
		carmy.Token{SHA256: carmy.HashToken("root"), Principal: "root", Permissions: []string{"approve:*"}},
	)))
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	for i := range 105 {
		input := `{"id":1}`
		if i == 104 {
			input = `{"id":"x"}`
		}
		httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", input, as("agent")...)
	}
	httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":2}`, as("other")...)
	list := func(tok string) []any {
		status, v := httpDo(t, http.DefaultClient, "GET", srv.URL+"/console/executions", "", as(tok)...)
		if status != 200 {
			t.Fatalf("GET /console/executions = %d", status)
		}
		return v.([]any)
	}
	all := list("root")
	if len(all) != 100 {
		t.Fatalf("an approver sees %d executions; want the last 100", len(all))
	}
	newest, second := all[0].(map[string]any), all[1].(map[string]any)
	if newest["principal"] != "other" || newest["code"] != "confirmation_required" || second["code"] != "invalid_input" {
		t.Fatalf("newest = %v, %v; want other's refusal, then agent's invalid input", newest, second)
	}
	if ok := all[2].(map[string]any); ok["code"] != "ok" || ok["tool"] != "delete_note" || ok["execution_id"] == "" {
		t.Fatalf("an execution = %v", ok)
	}
	if mine := list("other"); len(mine) != 1 {
		t.Fatalf("a caller sees %d executions; want its own one", len(mine))
	}
	// A refusal of a malformed request id is decided where every other
	// outcome is, so the console lists it as the audit records it.
	httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":3}`, append(as("agent"), "Idempotency-Key", strings.Repeat("k", 300))...)
	if newest := list("root")[0].(map[string]any); newest["principal"] != "agent" || newest["code"] != "invalid_input" {
		t.Fatalf("newest = %v; want agent's refused request id", newest)
	}
}
