package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestSchema(t *testing.T) {
	dir := copyModule(t, "genapp")
	code, stdout, stderr := output(t, carmyCmd(t, dir, "schema", "."))
	if code != 0 {
		t.Fatalf("carmy schema: exit %d\n%s", code, stderr)
	}
	var tools []struct {
		Name         string         `json:"name"`
		InputSchema  map[string]any `json:"input_schema"`
		OutputSchema map[string]any `json:"output_schema"`
		Requires     []string       `json:"requires"`
	}
	if err := json.Unmarshal([]byte(stdout), &tools); err != nil {
		t.Fatalf("output is not a JSON list of tools: %v\n%s", err, stdout)
	}
	var names []string
	byName := map[string]int{}
	for i, tool := range tools {
		names = append(names, tool.Name)
		byName[tool.Name] = i
	}
	if want := []string{"cancel_order", "create_order", "described_one", "list_items", "ping"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (sorted; carmy.Impl left out)", names, want)
	}
	create := tools[byName["create_order"]]
	if props, _ := create.InputSchema["properties"].(map[string]any); props["sku"] == nil || create.OutputSchema["type"] != "object" {
		t.Errorf("create_order schemas: %v %v", create.InputSchema, create.OutputSchema)
	}
	if got := tools[byName["ping"]]; got.OutputSchema["type"] != "boolean" || got.InputSchema["type"] != "object" {
		t.Errorf("ping schemas: %v %v", got.InputSchema, got.OutputSchema)
	}
	if got := tools[byName["cancel_order"]].OutputSchema; got["type"] != "null" {
		t.Errorf("cancel_order output schema %v, want {\"type\":\"null\"}", got)
	}
	if got := tools[byName["cancel_order"]].Requires; !slices.Equal(got, []string{"orders:admin", "orders:write"}) {
		t.Errorf("cancel_order requires %v, want the permissions it declares", got)
	}
	if got := tools[byName["ping"]].Requires; got != nil {
		t.Errorf("ping requires %v, want none", got)
	}

	code, stdout, _ = output(t, carmyCmd(t, dir, "schema", "-tool", "ping", "."))
	if err := json.Unmarshal([]byte(stdout), &tools); code != 0 || err != nil || len(tools) != 1 || tools[0].Name != "ping" {
		t.Errorf("carmy schema -tool ping: exit %d, %s", code, stdout)
	}
	if code, _, _ := output(t, carmyCmd(t, dir, "schema", "-tool", "nope", ".")); code != 1 {
		t.Errorf("carmy schema -tool nope: exit %d, want 1", code)
	}
	if code, _, stderr := output(t, carmyCmd(t, dir, "schema", ".", ".")); code != 2 || !strings.Contains(stderr, "usage: carmy schema") {
		t.Errorf("carmy schema . .: exit %d, %s; want 2 and the usage", code, stderr)
	}
}
