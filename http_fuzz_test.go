package carmy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// FuzzHTTPCall sends arbitrary requests to the HTTP API: any tool name,
// body, content type and idempotency key. Every response is well-formed
// JSON whose status fits its code, the tool runs only on a 200, and
// nothing is internal.
//
//	go test -run '^$' -fuzz FuzzHTTPCall -fuzztime 5m .
func FuzzHTTPCall(f *testing.F) {
	for _, s := range []struct{ tool, ctype, key, body string }{
		{"hostile", "application/json", "", `{"name":"x"}`},
		{"hostile", "application/json; charset=utf-8", "k1", `{"name":"x","count":2.0}`},
		{"hostile", "", "", ``},
		{"hostile", "text/plain", "", `{"name":"x"}`},
		{"hostile", "application/json", "k1", `{"name":"x","Name":"y"}`},
		{"nope", "application/json", "", `{}`},
		{"../tools", "application/json", "", `{}`},
		{"hostile", "application/json", "", `{"name":"x","inner":{"level":1e400}}`},
	} {
		f.Add(s.tool, s.ctype, s.key, []byte(s.body))
	}
	var ran int
	tool := carmy.Tool(func(in Hostile) error { ran++; return nil }, carmy.Write, carmy.Name("hostile"), carmy.Register(false))
	reg, err := carmy.New().Tool(tool).BodyLimit(1 << 16).Build()
	if err != nil {
		f.Fatal(err)
	}
	defer reg.Close()
	h := reg.Handler()
	f.Fuzz(func(t *testing.T, name, ctype, key string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/tools/"+url.PathEscape(name), bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", key)
		}
		before := ran
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if p := "/tools/" + url.PathEscape(name); path.Clean(p) != p {
			if rec.Code/100 != 3 && rec.Code != http.StatusNotFound { // the mux redirects to the clean path
				t.Fatalf("unclean path %q: status %d", p, rec.Code)
			}
			return
		}
		var res struct {
			ExecutionID string          `json:"execution_id"`
			Output      json.RawMessage `json:"output"`
			Error       *carmy.Error    `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("status %d, body %q is not JSON: %v", rec.Code, rec.Body.Bytes(), err)
		}
		switch {
		case rec.Code == http.StatusOK:
			if res.Error != nil || res.ExecutionID == "" {
				t.Fatalf("200 with %s", rec.Body.Bytes())
			}
		case res.Error == nil || res.Error.Message == "":
			t.Fatalf("status %d without an error object: %s", rec.Code, rec.Body.Bytes())
		case res.Error.Code == carmy.CodeInternal:
			t.Fatalf("internal error: %s", rec.Body.Bytes())
		case rec.Code != carmy.StatusOf(res.Error) && rec.Code != http.StatusUnsupportedMediaType && rec.Code != http.StatusRequestEntityTooLarge && rec.Code != http.StatusMethodNotAllowed:
			t.Fatalf("status %d for code %s", rec.Code, res.Error.Code)
		}
		if (ran > before) != (rec.Code == http.StatusOK && res.Error == nil && !replayed(rec)) {
			t.Fatalf("ran = %v with status %d: %s", ran > before, rec.Code, rec.Body.Bytes())
		}
	})
}

func replayed(rec *httptest.ResponseRecorder) bool {
	return bytes.Contains(rec.Body.Bytes(), []byte(`"replayed":true`))
}
