package main

import (
	"slices"
	"testing"
)

// TestBuild: the server builds, with every fixture tool carmy serves
// itself.
func TestBuild(t *testing.T) {
	reg, err := newBuilder().Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var names []string
	for _, m := range reg.Tools() {
		names = append(names, m.Name)
	}
	want := []string{"confirm_delete", "failing_job", "greet", "json_schema_2020_12_tool", "multi_input", "protocol_error_job", "slow_compute", "test_audio_content", "test_custom_headers", "test_elicitation", "test_elicitation_sep1034_defaults",
		"test_embedded_resource", "test_error_handling", "test_image_content", "test_input_required_result_elicitation",
		"test_input_required_result_multi_round", "test_input_required_result_request_state", "test_input_required_result_tampered_state",
		"test_logging_tool", "test_multiple_content_types", "test_simple_text", "test_streaming_elicitation",
		"test_tool_with_logging", "test_tool_with_progress", "test_tool_with_task"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v", names)
	}
}
