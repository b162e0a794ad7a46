package mcpwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ParamHeader is a tool's input member whose value clients of the
// sessionless protocol mirror in a header (SEP-2243): Mcp-Param-Header
// carries the value of the top-level argument Field.
type ParamHeader struct {
	Field, Header string
}

// CodeHeaderMismatch is the JSON-RPC error of a request whose headers do
// not say what its body says; over HTTP its status is 400.
const CodeHeaderMismatch = -32020

// CheckParamHeaders checks the Mcp-Param- headers of a tools/call against
// its arguments, as SEP-2243 has servers do: an argument present and not
// null needs its header, holding the same value (a string as is, or
// Base64-encoded inside =?base64?…?=; an integer or a boolean as JSON
// writes it); an argument absent or null has none. A header value outside
// printable ASCII, or with bad Base64, is a mismatch too. It returns nil
// when everything matches, else the error to answer with, which names the
// header.
func CheckParamHeaders(h http.Header, headers []ParamHeader, args jsontext.Value) *jsonrpc.Error {
	var members map[string]jsontext.Value
	if len(bytes.TrimSpace(args)) > 0 && jsonv2.Unmarshal(args, &members) != nil {
		return nil // arguments that are not an object: the tool refuses them
	}
	for _, p := range headers {
		name := "Mcp-Param-" + p.Header
		values := h.Values(name)
		v, present := members[p.Field]
		if !present || v.Kind() == 'n' {
			if len(values) > 0 {
				return mismatch("%s is sent but the argument %s is absent or null", name, p.Field)
			}
			continue
		}
		if len(values) != 1 {
			return mismatch("%s must be sent once, with the value of the argument %s", name, p.Field)
		}
		got, ok := decodeHeader(values[0])
		if !ok {
			return mismatch("%s is not a valid header value: a value outside printable ASCII is sent Base64-encoded, as =?base64?…?=", name)
		}
		if want, ok := headerValue(v); !ok || got != want {
			return mismatch("%s does not match the argument %s", name, p.Field)
		}
	}
	return nil
}

func mismatch(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: CodeHeaderMismatch, Message: "header mismatch: " + fmt.Sprintf(format, args...)}
}

// decodeHeader is the value a header carries: printable ASCII as is, or
// the Base64 inside =?base64?…?= decoded (strict: padding and alphabet).
func decodeHeader(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "", false
		}
	}
	if enc, ok := strings.CutPrefix(s, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.Strict().DecodeString(enc)
			return string(b), err == nil
		}
	}
	return s, true
}

// headerValue is an argument's value as its header carries it: a string
// itself, an integer in decimal, a boolean as true or false. Any other
// value has none.
func headerValue(v jsontext.Value) (string, bool) {
	switch v.Kind() {
	case '"':
		var s string
		return s, jsonv2.Unmarshal(v, &s) == nil
	case 't', 'f':
		return string(v), true
	case '0':
		var f float64
		if json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 {
			return "", false
		}
		return strconv.FormatInt(int64(f), 10), true
	}
	return "", false
}

// SchemaHeaders returns the top-level members of a tool's input schema
// that declare the header mirroring them (x-mcp-header).
func SchemaHeaders(schema json.RawMessage) []ParamHeader {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []ParamHeader
	for name, raw := range s.Properties {
		var p struct {
			Header string `json:"x-mcp-header"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Header != "" {
			out = append(out, ParamHeader{Field: name, Header: p.Header})
		}
	}
	return out
}

// ErrorStatus is the HTTP status of a JSON-RPC error answered in the
// sessionless protocol: 404 for a method not found; 400 for invalid
// params, an unsupported protocol version, a missing client capability
// and a header mismatch; 200 otherwise.
func ErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities, CodeHeaderMismatch:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
