package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// TestEquivalence: every implementation the benchmarks compare does the
// same work. For the benchmarks' arguments they all give the same output;
// each input that breaks a rule of the schema is refused by all of them.
func TestEquivalence(t *testing.T) {
	ctx := context.Background()
	reg := carmyRegistry(t)
	floors := Floors()
	plain := httptest.NewServer(PlainHandler())
	defer plain.Close()
	carmyHTTP := httptest.NewServer(reg.Handler())
	defer carmyHTTP.Close()
	client := loopbackClient()
	defer client.CloseIdleConnections()

	type call func(tool, input string) (json.RawMessage, error)
	impls := map[string]call{
		"floor": func(tool, input string) (json.RawMessage, error) {
			return floors[tool](ctx, []byte(input))
		},
		"carmy": func(tool, input string) (json.RawMessage, error) {
			res, err := reg.Execute(ctx, carmy.Call{Tool: tool, Input: []byte(input)})
			return res.Output, err
		},
		"http/plain": func(tool, input string) (json.RawMessage, error) {
			return httpOutput(postRead(client, plain.URL+"/tools/"+tool, []byte(input)))
		},
		"http/carmy": func(tool, input string) (json.RawMessage, error) {
			return httpOutput(postRead(client, carmyHTTP.URL+"/tools/"+tool, []byte(input)))
		},
	}
	for _, impl := range mcpImpls {
		// Each implementation is measured in the generation its name says.
		want := "2026-07-28"
		if _, opts := splitImpl(impl); opts != nil {
			want = sessionsVersion
		}
		for kind, session := range map[string]*mcp.ClientSession{
			"mcp-memory":     inMemorySession(t, impl),
			"mcp-streamable": streamableSession(t, impl),
		} {
			if got := session.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("%s/%s: protocol version %s, want %s", kind, impl, got, want)
			}
			impls[kind+"/"+impl] = func(tool, input string) (json.RawMessage, error) {
				return callSDK(ctx, session, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(input)})
			}
		}
	}
	inproc := mcpgoInProcess(t)
	impls["mcp-inprocess/mcpgo"] = func(tool, input string) (json.RawMessage, error) {
		req := mcpgomcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = json.RawMessage(input)
		res, err := inproc.CallTool(ctx, req)
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("tool error: %+v", res.Content)
		}
		return json.Marshal(res.StructuredContent)
	}

	for _, c := range Cases {
		want, err := floors[c.Tool](ctx, []byte(c.Input))
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range impls {
			got, err := f(c.Tool, c.Input)
			if err != nil {
				t.Errorf("%s %s: %v", name, c.Tool, err)
				continue
			}
			if !sameJSON(t, got, want) {
				t.Errorf("%s %s: output %s, want %s", name, c.Tool, got, want)
			}
		}
	}

	invalid := []struct{ tool, input string }{
		{"create_order", `{"sku":"A-1","quantity":3,"note":"unknown member"}`},
		{"create_order", `{"sku":"","quantity":3}`},
		{"create_order", `{"quantity":3}`},
		{"create_order", `{"sku":"A-1","quantity":0}`},
		{"create_order", `{"sku":"A-1","quantity":101}`},
		{"create_order", `{"sku":"A-1","quantity":-1}`},
		{"create_order", `{"sku":"A-1","quantity":"3"}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"JPY","shipping":{"street":"s","city":"c","country":"GB"},"items":[{"sku":"A","quantity":1,"price_cents":1}],"priority":0,"gift":false,"channel":"web","discount":0,"attempt":0,"reference":""}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"EUR","shipping":{"street":"s","city":"c","country":"GBR"},"items":[{"sku":"A","quantity":1,"price_cents":1}],"priority":0,"gift":false,"channel":"web","discount":0,"attempt":0,"reference":""}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"EUR","shipping":{"street":"s","city":"c","country":"GB"},"items":[],"priority":0,"gift":false,"channel":"web","discount":0,"attempt":0,"reference":""}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"EUR","shipping":{"street":"s","city":"c","country":"GB"},"items":[{"sku":"A","quantity":1,"price_cents":-1}],"priority":0,"gift":false,"channel":"web","discount":0,"attempt":0,"reference":""}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"EUR","shipping":{"street":"s","city":"c","country":"GB"},"items":[{"sku":"A","quantity":1,"price_cents":1}],"priority":0,"gift":false,"channel":"web","discount":1.5,"attempt":0,"reference":""}`},
		{"place_order", `{"customer_id":"c","email":"a@b.c","currency":"EUR","shipping":{"street":"s","city":"c","country":"GB","extra":1},"items":[{"sku":"A","quantity":1,"price_cents":1}],"priority":0,"gift":false,"channel":"web","discount":0,"attempt":0,"reference":""}`},
	}
	for _, in := range invalid {
		for name, f := range impls {
			if out, err := f(in.tool, in.input); err == nil {
				t.Errorf("%s %s accepted %s: %s", name, in.tool, in.input, out)
			}
		}
	}
}

// httpOutput is the output member of an HTTP answer.
func httpOutput(body []byte, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	var res struct {
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, err
	}
	return res.Output, nil
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
