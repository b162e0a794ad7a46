package mcpwire_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

func TestCheckMessage(t *testing.T) {
	tests := []struct {
		name, msg string
		ok        bool
	}{
		{"one request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, true},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, true},
		{"empty", ``, false},
		{"data after the message", `{"id":1} {"id":2}`, false},
		{"a member name twice", `{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}`, false},
		{"invalid UTF-8", "{\"method\":\"\xff\"}", false},
		{"truncated", `{"jsonrpc":"2.0"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mcpwire.CheckMessage([]byte(tt.msg))
			if (e == nil) != tt.ok {
				t.Fatalf("CheckMessage(%q) = %v, want ok=%v", tt.msg, e, tt.ok)
			}
			if e != nil && (e.Code != jsonrpc.CodeParseError || !strings.HasPrefix(e.Message, "Parse error: ")) {
				t.Errorf("error = %d %q, want a parse error", e.Code, e.Message)
			}
		})
	}
}

func TestReadMessage(t *testing.T) {
	const limit = 16
	t.Run("within the limit", func(t *testing.T) {
		body := http.MaxBytesReader(nil, reader(`{"id":1}`), limit)
		b, status, e := mcpwire.ReadMessage(body, limit)
		if e != nil || status != 0 || string(b) != `{"id":1}` {
			t.Fatalf("ReadMessage = %q, %d, %v", b, status, e)
		}
	})
	t.Run("too large", func(t *testing.T) {
		body := http.MaxBytesReader(nil, reader(`{"id":1,"method":"tools/list"}`), limit)
		_, status, e := mcpwire.ReadMessage(body, limit)
		if status != http.StatusRequestEntityTooLarge || e == nil || !strings.Contains(e.Message, "limit of 16 bytes") {
			t.Fatalf("ReadMessage = %d, %v; want 413 naming the limit", status, e)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, status, e := mcpwire.ReadMessage(reader(`{"id":`), limit)
		if status != http.StatusBadRequest || e == nil || e.Code != jsonrpc.CodeParseError {
			t.Fatalf("ReadMessage = %d, %v; want 400 parse error", status, e)
		}
	})
}

func reader(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

func TestParamsAnswer(t *testing.T) {
	tests := []struct {
		name, msg string
		want      string // the start of the answer; "" when the message may go on
	}{
		{"valid params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"x/y","params":{"name":1}}`, ""},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ""},
		{"a response", `{"jsonrpc":"2.0","id":1,"result":{}}`, ""},
		{"wrong type", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: the params of tools/call do not have the form the protocol gives them: name may not be a number"}}`},
		{"a notification gets no answer", `[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":"x"}}]`, `null`},
		{"id null is a notification", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":5}}`, `null`},
		{"a batch answers each bad request", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":["x"]}}]`,
			`[{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params: the params of tools/call do not have the form the protocol gives them: name may not be an array"}}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mcpwire.ParamsAnswer([]byte(tt.msg))
			if tt.want == "" {
				if got != nil {
					t.Fatalf("ParamsAnswer = %s, want nil", got)
				}
				return
			}
			if !strings.HasPrefix(string(got), tt.want) {
				t.Fatalf("ParamsAnswer =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestParamsAnswerDoesNotQuoteTheValue(t *testing.T) {
	got := mcpwire.ParamsAnswer([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":"hunter2"}}`))
	if got == nil || strings.Contains(string(got), "hunter2") {
		t.Fatalf("ParamsAnswer = %s: want an answer that does not quote the value", got)
	}
}

func TestIsSessionlessRequest(t *testing.T) {
	tests := []struct {
		name, method, version, body string
		want                        bool
	}{
		{"sessionless version header", http.MethodPost, mcpwire.SessionlessProtocol, `{}`, true},
		{"later version", http.MethodPost, "2027-01-01", `{}`, true},
		{"session-based version", http.MethodPost, "2025-11-25", `{"method":"server/discover"}`, false},
		{"discover without header", http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, true},
		{"other method without header", http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"server/discover"}}`, false},
		{"GET without header", http.MethodGet, "", `{"method":"server/discover"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/mcp", nil)
			if tt.version != "" {
				req.Header.Set("Mcp-Protocol-Version", tt.version)
			}
			if got := mcpwire.IsSessionlessRequest(req, []byte(tt.body)); got != tt.want {
				t.Errorf("IsSessionlessRequest = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWriteRPCError(t *testing.T) {
	w := httptest.NewRecorder()
	mcpwire.WriteRPCError(w, http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "Parse error: x"})
	if w.Code != http.StatusBadRequest || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if string(got["id"]) != "null" || string(got["jsonrpc"]) != `"2.0"` {
		t.Errorf("answer = %s: want a null id", w.Body)
	}
}
