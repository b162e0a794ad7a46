package carmy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// Forecast is the input of forecast: its region and days are mirrored in
// headers.
type Forecast struct {
	Region string `json:"region" carmy:"header=Region"`
	Days   int    `json:"days,omitempty" carmy:"header=Days"`
	Note   string `json:"note,omitempty"`
}

// TestHeaderSchema: a field tagged carmy:"header=Name" is published with
// x-mcp-header, and the others are not.
func TestHeaderSchema(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Tool(carmy.Tool(func(in Forecast) error { return nil }, carmy.Read, carmy.Name("forecast"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(reg.Tools()[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	p := schema.Properties
	if p["region"]["x-mcp-header"] != "Region" || p["days"]["x-mcp-header"] != "Days" || p["note"]["x-mcp-header"] != nil {
		t.Fatalf("schema properties %v", p)
	}
}

// TestHeaderBuild: Build refuses a field that no header can mirror, and a
// header name that is not an HTTP token.
func TestHeaderBuild(t *testing.T) {
	t.Parallel()
	type zone struct {
		Zone string `json:"zone" carmy:"header=Zone"`
	}
	tests := []struct {
		name string
		fn   any
		want string
	}{
		{"float", func(in struct {
			Amount float64 `json:"amount" carmy:"header=Amount"`
		}) error {
			return nil
		}, "input field Amount is tagged carmy:\"header=Amount\" but is not a string, an integer or a boolean"},
		{"list", func(in struct {
			Tags []string `json:"tags" carmy:"header=Tags"`
		}) error {
			return nil
		}, "input field Tags is tagged carmy:\"header=Tags\" but is not a string, an integer or a boolean"},
		{"pointer", func(in struct {
			Region *string `json:"region,omitempty" carmy:"header=Region"`
		}) error {
			return nil
		}, "is a pointer"},
		{"twice", func(in struct {
			A string `json:"a" carmy:"header=Same"`
			B string `json:"b" carmy:"header=same"`
		}) error {
			return nil
		}, "input fields A and B mirror the same header same"},
		{"nested", func(in struct {
			In zone `json:"in"`
		}) error {
			return nil
		}, "input field Zone, tagged carmy:\"header=Zone\", is not at the input's top level"},
		{"bad name", func(in struct {
			Region string `json:"region" carmy:"header=Re:gion"`
		}) error {
			return nil
		}, `header name "Re:gion" has ':'`},
		{"empty name", func(in struct {
			Region string `json:"region" carmy:"header="`
		}) error {
			return nil
		}, "a header name cannot be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := carmy.New().Tool(carmy.Tool(tt.fn, carmy.Read, carmy.Name("t"), carmy.Register(false))).Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build: %v; want %q", err, tt.want)
			}
		})
	}
}

// TestMCPParamHeaders: in the sessionless protocol the server checks each
// mirrored header against its argument before anything runs; a mismatch
// is the protocol's header mismatch error (-32020) with status 400, and
// the tool does not run.
func TestMCPParamHeaders(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	reg, err := carmy.New().Logger(quietLogger()).Tool(carmy.Tool(func(in Forecast) (string, error) {
		runs.Add(1)
		return in.Region, nil
	}, carmy.Read, carmy.Name("forecast"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := serve(t, reg)
	tests := []struct {
		name    string
		args    string
		headers map[string]string
		ok      bool
	}{
		{"the same value", `{"region":"eu-west"}`, map[string]string{"Mcp-Param-Region": "eu-west"}, true},
		{"the header's name in another case", `{"region":"eu-west"}`, map[string]string{"mcp-param-region": "eu-west"}, true},
		{"Base64", `{"region":"Zürich"}`, map[string]string{"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="}, true},
		{"an integer", `{"region":"x","days":7}`, map[string]string{"Mcp-Param-Region": "x", "Mcp-Param-Days": "7"}, true},
		{"no header for an absent argument", `{"region":"x"}`, map[string]string{"Mcp-Param-Region": "x"}, true},
		{"a missing header", `{"region":"eu-west"}`, nil, false},
		{"another value", `{"region":"eu-west"}`, map[string]string{"Mcp-Param-Region": "us-east"}, false},
		{"another case of the value", `{"region":"eu-west"}`, map[string]string{"Mcp-Param-Region": "EU-WEST"}, false},
		{"a header for an absent argument", `{"region":"x"}`, map[string]string{"Mcp-Param-Region": "x", "Mcp-Param-Days": "7"}, false},
		{"another integer", `{"region":"x","days":7}`, map[string]string{"Mcp-Param-Region": "x", "Mcp-Param-Days": "8"}, false},
		{"bad Base64 padding", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}, false},
		{"bad Base64 characters", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}, false},
		{"a value outside printable ASCII", `{"region":"Zürich"}`, map[string]string{"Mcp-Param-Region": "Zürich"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runs.Load()
			status, body := sessionlessPost(t, srv.URL, "forecast", tt.args, tt.headers)
			var msg struct {
				Result map[string]any `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(body, &msg)
			ran := runs.Load() - before
			if tt.ok && (status != http.StatusOK || msg.Result == nil || msg.Result["isError"] == true || ran != 1) {
				t.Fatalf("status %d, %s, ran %d times; want the result", status, body, ran)
			}
			if !tt.ok && (status != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != -32020 || ran != 0) {
				t.Fatalf("status %d, %s, ran %d times; want 400 and -32020, and no run", status, body, ran)
			}
		})
	}
}

// sessionlessPost sends a tools/call of the sessionless protocol with the
// headers the protocol requires and extra ones, and returns the status and
// the body (the message, out of an event stream).
func sessionlessPost(t *testing.T, url, tool, args string, extra map[string]string) (int, []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	res, msg := mcpExchange(t, url, body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}, extra)
	return res.StatusCode, msg
}

// TestMCPParamHeadersSDKClient: the official Go SDK's client reads
// x-mcp-header from the tool list and mirrors the arguments, which the
// server takes, in the sessionless protocol; in a session nothing is
// mirrored and nothing is checked.
func TestMCPParamHeadersSDKClient(t *testing.T) {
	t.Parallel()
	reg, err := carmy.New().Logger(quietLogger()).Tool(carmy.Tool(func(in Forecast) (string, error) {
		return fmt.Sprintf("%s for %d days", in.Region, in.Days), nil
	}, carmy.Read, carmy.Name("forecast"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := serve(t, reg)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			s := mcpConnect(t, srv.URL, version, nil)
			if _, err := s.ListTools(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"region": "Zürich", "days": 3}})
			if err != nil || r.IsError || !strings.Contains(fmt.Sprint(r.StructuredContent), "Zürich for 3 days") {
				t.Fatalf("forecast: %+v, %v", r, err)
			}
		})
	}
}
