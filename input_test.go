package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

type Hostile struct {
	Name  string         `json:"name" validate:"max=100"`
	Note  string         `json:"note,omitempty"`
	Count int32          `json:"count,omitempty"`
	Big   uint64         `json:"big,omitempty"`
	U8    uint8          `json:"u8,omitempty"`
	Tags  []string       `json:"tags,omitempty"`
	Inner *HostileInner  `json:"inner,omitempty"`
	Any   any            `json:"any,omitempty"`
	Meta  map[string]int `json:"meta,omitempty"`
}

type HostileInner struct {
	Level int `json:"level"`
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// TestHostileInput sends every input an attacker or a confused model might,
// through Execute and through the HTTP API, and checks the exact outcome
// and that the tool ran only when the input was valid.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	type tc struct {
		name   string
		body   string
		ctype  string // HTTP Content-Type; "" means application/json
		code   carmy.Code
		status int  // HTTP status; 0 means StatusOf(code)
		httpOK bool // the HTTP API takes it even though it is too large for Execute's rules, or vice versa
	}
	huge := `{"name":"` + strings.Repeat("a", 50*mib) + `"}`
	tenMB := `{"name":"x","note":"` + strings.Repeat("é", 5*mib) + `"}`
	tests := []tc{
		{name: "valid", body: `{"name":"ok"}`},
		{name: "empty body is {}, which lacks name", body: ``, code: carmy.CodeInvalidInput},
		{name: "whitespace body", body: " \n\t ", code: carmy.CodeInvalidInput},
		{name: "null body", body: `null`, code: carmy.CodeInvalidInput},
		{name: "nesting 100000 deep in any", body: `{"name":"x","any":` + nested(100000) + `}`, code: carmy.CodeInvalidInput},
		{name: "nesting 100000 deep at the top", body: nested(100000), code: carmy.CodeInvalidInput},
		{name: "nesting of objects", body: strings.Repeat(`{"inner":`, 20000) + strings.Repeat(`}`, 20000), code: carmy.CodeInvalidInput},
		{name: "a 50 MB body", body: huge, code: carmy.CodeInvalidInput, status: http.StatusRequestEntityTooLarge},
		{name: "a 10 MB string within a 16 MiB limit", body: tenMB},
		{name: "invalid UTF-8 in a value", body: "{\"name\":\"\xff\xfe\"}", code: carmy.CodeInvalidInput},
		{name: "invalid UTF-8 in a key", body: "{\"na\xffme\":\"x\"}", code: carmy.CodeInvalidInput},
		{name: "overlong UTF-8", body: "{\"name\":\"\xc0\xaf\"}", code: carmy.CodeInvalidInput},
		{name: "a UTF-8 BOM", body: "\xef\xbb\xbf{\"name\":\"x\"}", code: carmy.CodeInvalidInput},
		{name: "duplicate keys", body: `{"name":"a","name":"b"}`, code: carmy.CodeInvalidInput},
		{name: "duplicate keys by escape", body: `{"name":"a","n\u0061me":"b"}`, code: carmy.CodeInvalidInput},
		{name: "a key differing only in case", body: `{"Name":"x"}`, code: carmy.CodeInvalidInput},
		{name: "both cases of a key (smuggling)", body: `{"name":"x","NAME":"y"}`, code: carmy.CodeInvalidInput},
		{name: "__proto__", body: `{"name":"x","__proto__":{"admin":true}}`, code: carmy.CodeInvalidInput},
		{name: "constructor.prototype", body: `{"name":"x","constructor":{"prototype":{}}}`, code: carmy.CodeInvalidInput},
		{name: "a megabyte key", body: `{"name":"x","` + strings.Repeat("k", mib) + `":1}`, code: carmy.CodeInvalidInput},
		{name: "1e400 into an integer", body: `{"name":"x","count":1e400}`, code: carmy.CodeInvalidInput},
		{name: "1e400 into any, a number its schema {} allows", body: `{"name":"x","any":1e400}`},
		{name: "1.5 into an integer", body: `{"name":"x","count":1.5}`, code: carmy.CodeInvalidInput},
		{name: "2.0 into an integer", body: `{"name":"x","count":2.0}`},
		{name: "2e0 into an integer", body: `{"name":"x","count":2e0}`},
		{name: "2^64 into uint64", body: `{"name":"x","big":18446744073709551616}`, code: carmy.CodeInvalidInput},
		{name: "2^64-1 into uint64", body: `{"name":"x","big":18446744073709551615}`},
		{name: "-1 into unsigned", body: `{"name":"x","u8":-1}`, code: carmy.CodeInvalidInput},
		{name: "256 into uint8", body: `{"name":"x","u8":256}`, code: carmy.CodeInvalidInput},
		{name: "2^31 into int32", body: `{"name":"x","count":2147483648}`, code: carmy.CodeInvalidInput},
		{name: "null into a non-pointer", body: `{"name":null}`, code: carmy.CodeInvalidInput},
		{name: "null into a pointer", body: `{"name":"x","inner":null}`},
		{name: "null into a slice", body: `{"name":"x","tags":null}`, code: carmy.CodeInvalidInput},
		{name: "an array where an object is expected", body: `[{"name":"x"}]`, code: carmy.CodeInvalidInput},
		{name: "a string where an object is expected", body: `"name"`, code: carmy.CodeInvalidInput},
		{name: "an array into a nested object", body: `{"name":"x","inner":[1]}`, code: carmy.CodeInvalidInput},
		{name: "an object into a string", body: `{"name":{"$gt":""}}`, code: carmy.CodeInvalidInput},
		{name: "a number into a string", body: `{"name":1}`, code: carmy.CodeInvalidInput},
		{name: "a string into a number", body: `{"name":"x","count":"1"}`, code: carmy.CodeInvalidInput},
		{name: "trailing data", body: `{"name":"x"}x`, code: carmy.CodeInvalidInput},
		{name: "a second object", body: `{"name":"x"}{"name":"y"}`, code: carmy.CodeInvalidInput},
		{name: "a missing required field", body: `{"note":"x"}`, code: carmy.CodeInvalidInput},
		{name: "an extra field", body: `{"name":"x","admin":true}`, code: carmy.CodeInvalidInput},
		{name: "NaN", body: `{"name":"x","any":NaN}`, code: carmy.CodeInvalidInput},
		{name: "Infinity", body: `{"name":"x","count":Infinity}`, code: carmy.CodeInvalidInput},
		{name: "-Infinity", body: `{"name":"x","count":-Infinity}`, code: carmy.CodeInvalidInput},
		{name: "an unterminated string", body: `{"name":"x`, code: carmy.CodeInvalidInput},
		{name: "an unterminated object", body: `{"name":"x"`, code: carmy.CodeInvalidInput},
		{name: "a raw control character", body: "{\"name\":\"a\x01b\"}", code: carmy.CodeInvalidInput},
		{name: "a lone surrogate", body: `{"name":"\ud800"}`, code: carmy.CodeInvalidInput},
		{name: "a leading zero", body: `{"name":"x","count":01}`, code: carmy.CodeInvalidInput},
		{name: "single quotes", body: `{'name':'x'}`, code: carmy.CodeInvalidInput},
		{name: "a comment", body: `{"name":"x"/*c*/}`, code: carmy.CodeInvalidInput},
		{name: "a hex number", body: `{"name":"x","count":0x10}`, code: carmy.CodeInvalidInput},
		{name: "a plus sign", body: `{"name":"x","count":+1}`, code: carmy.CodeInvalidInput},
		{name: "a trailing comma", body: `{"name":"x",}`, code: carmy.CodeInvalidInput},
		{name: "a string over its limit", body: `{"name":"` + strings.Repeat("a", 101) + `"}`, code: carmy.CodeInvalidInput},
		{name: "a wrong content type", body: `{"name":"x"}`, ctype: "text/plain", status: http.StatusUnsupportedMediaType, httpOK: true},
		{name: "a form body", body: `name=x`, ctype: "application/x-www-form-urlencoded", code: carmy.CodeInvalidInput, status: http.StatusUnsupportedMediaType},
	}
	var runs atomic.Int32
	tool := carmy.Tool(func(in Hostile) error { runs.Add(1); return nil }, carmy.Write, carmy.Name("hostile"), carmy.ParallelSafe(), carmy.Register(false))
	reg := build(t, carmy.New().Tool(tool).BodyLimit(16*mib))
	srv := serve(t, reg)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runs.Load()
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "hostile", Input: []byte(tt.body)})
			wantCode := tt.code
			if tt.httpOK { // an HTTP-only refusal: Execute takes the input
				wantCode = ""
			}
			if got := carmy.CodeOf(err); got != wantCode {
				t.Fatalf("Execute: code %q (%v); want %q", got, err, wantCode)
			}
			if ran := runs.Load() > before; ran != (wantCode == "") {
				t.Fatalf("Execute: ran = %v", ran)
			}
			assertHelpful(t, err)

			before = runs.Load()
			ctype := tt.ctype
			if ctype == "" {
				ctype = "application/json"
			}
			res, err := http.Post(srv.URL+"/tools/hostile", ctype, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			status := tt.status
			if status == 0 {
				status = carmy.StatusOf(errorOf(tt.code))
			}
			if res.StatusCode != status {
				t.Fatalf("HTTP: status %d; want %d (%.200s)", res.StatusCode, status, raw)
			}
			if ran := runs.Load() > before; ran != (status == http.StatusOK) {
				t.Fatalf("HTTP: ran = %v with status %d", ran, res.StatusCode)
			}
			var body struct {
				Error *carmy.Error `json:"error"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("HTTP: the response is not JSON: %v", err)
			}
			if status != http.StatusOK && (body.Error == nil || body.Error.Message == "") {
				t.Fatalf("HTTP: no error object in %.200s", raw)
			}
			if len(raw) > 64<<10 {
				t.Fatalf("HTTP: a %d-byte error response echoes the input", len(raw))
			}
		})
	}
}

func errorOf(code carmy.Code) error {
	if code == "" {
		return nil
	}
	return carmy.Errorf(code, "x")
}

// assertHelpful checks that a refusal says what is wrong, in bounded size,
// without Go internals.
func assertHelpful(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	e := err.(*carmy.Error)
	if e.Message == "" {
		t.Fatal("no message")
	}
	for _, f := range e.Fields {
		if f.Message == "" || len(f.Message) > 4096 || len(f.Path) > 1024 {
			t.Fatalf("field error %.200q at %.200q", f.Message, f.Path)
		}
		for _, leak := range []string{"goroutine", ".go:", "reflect.", "runtime."} {
			if strings.Contains(f.Message, leak) {
				t.Fatalf("field error leaks %q: %s", leak, f.Message)
			}
		}
	}
	if bytes.Contains([]byte(e.Message), []byte("panic")) {
		t.Fatalf("message mentions a panic: %s", e.Message)
	}
}
