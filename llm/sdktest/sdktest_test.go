package sdktest

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3/responses"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

type In struct {
	Month string `json:"month" jsonschema:"description=The month such as 2026-01"`
}

func registry(t *testing.T) *carmy.Registry {
	t.Helper()
	fn := func(In) (string, error) { return "", nil }
	reg, err := carmy.New().Tool(
		carmy.Tool(fn, carmy.Read, carmy.Name("export_invoices"), carmy.Description("Export invoices as CSV"), carmy.Deferred(), carmy.Register(false)),
		carmy.Tool(fn, carmy.Read, carmy.Name("get_invoice"), carmy.Description("One invoice"), carmy.Register(false)),
	).ToolSearch().Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestAnthropicTools: every definition is a tool of the Messages API as
// anthropic-sdk-go types it: carmy's tools as ToolParam, defer_loading
// where deferred, and the tool search exactly as the SDK writes
// ToolSearchToolBm25_20251119Param.
func TestAnthropicTools(t *testing.T) {
	defs, err := llm.AnthropicTools(registry(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 4 {
		t.Fatalf("%d definitions: %+v", len(defs), defs)
	}
	for _, d := range defs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var u anthropic.ToolUnionParam
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatalf("%s does not decode as a ToolUnionParam: %v", b, err)
		}
		if d.Type == llm.AnthropicToolSearchType {
			sdk, err := json.Marshal(anthropic.ToolUnionParam{OfToolSearchToolBm25_20251119: &anthropic.ToolSearchToolBm25_20251119Param{
				Type: anthropic.ToolSearchToolBm25_20251119TypeToolSearchToolBm25_20251119,
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, b, sdk) {
				t.Errorf("the tool search is %s; the SDK writes %s", b, sdk)
			}
			continue
		}
		tool := u.OfTool
		if tool == nil || tool.Name != d.Name || tool.Description.Value != d.Description || tool.InputSchema.Properties == nil {
			t.Fatalf("%s decodes as %+v", b, u)
		}
		if tool.DeferLoading.Value != (d.Name == "export_invoices") {
			t.Errorf("%s: the SDK reads defer_loading %v", d.Name, tool.DeferLoading)
		}
		again, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, b, again) {
			t.Errorf("the SDK writes %s back as %s", b, again)
		}
	}
}

// TestOpenAIResponsesTools: every definition is a tool of the Responses
// API as openai-go types it: FunctionToolParam in strict mode, with
// defer_loading where deferred, and the tool search exactly as the SDK
// writes ToolSearchToolParam.
func TestOpenAIResponsesTools(t *testing.T) {
	defs, err := llm.OpenAIResponsesTools(registry(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 4 {
		t.Fatalf("%d definitions: %+v", len(defs), defs)
	}
	for _, d := range defs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var u responses.ToolUnionParam
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatalf("%s does not decode as a ToolUnionParam: %v", b, err)
		}
		if d.Type == "tool_search" {
			sdk, err := json.Marshal(responses.ToolUnionParam{OfToolSearch: &responses.ToolSearchToolParam{}})
			if err != nil {
				t.Fatal(err)
			}
			if u.OfToolSearch == nil || !sameJSON(t, b, sdk) {
				t.Errorf("the tool search is %s; the SDK writes %s", b, sdk)
			}
			continue
		}
		fn := u.OfFunction
		if fn == nil || fn.Name != d.Name || fn.Description.Value != d.Description || !fn.Strict.Value || fn.Parameters == nil {
			t.Fatalf("%s decodes as %+v", b, u)
		}
		if fn.DeferLoading.Value != (d.Name == "export_invoices") {
			t.Errorf("%s: the SDK reads defer_loading %v", d.Name, fn.DeferLoading)
		}
		again, err := json.Marshal(fn)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, b, again) {
			t.Errorf("the SDK writes %s back as %s", b, again)
		}
	}
}
