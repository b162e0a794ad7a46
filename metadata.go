package carmy

import (
	"encoding/json"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// ToolMetadata is what a registry publishes about a tool. Its JSON form is
// the one every wire form uses (GET /tools, MCP's _meta): the timeout is
// timeout_ms, in integer milliseconds.
type ToolMetadata struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Effect       Effect          `json:"effect"`
	// Idempotent is true for tools declared with [Idempotent] and for every
	// tool whose effect is [None] or [Read], which change nothing.
	Idempotent   bool          `json:"idempotent"`
	ParallelSafe bool          `json:"parallel_safe"`
	Confirmation Confirmation  `json:"confirmation"`
	Timeout      time.Duration `json:"-"` // timeout_ms in JSON
	// Requires lists the permissions a call needs, every one, sorted:
	// those the tool declares with [Requires] and the one
	// [Builder.EffectPermissions] gives its effect. A hand-written tool
	// declares its own here. A caller that lacks one is refused, and does
	// not see the tool listed.
	Requires []string `json:"requires,omitempty"`
	// Tasks says whether a call may, or must, run as a task ([Tasks]);
	// task_support in JSON, left out for the default, optional.
	Tasks TaskSupport `json:"task_support,omitempty"`
}

// toolMetadataJSON is the JSON form of ToolMetadata, in the order GET
// /tools has always sent its members.
type toolMetadataJSON struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Effect       Effect          `json:"effect"`
	Idempotent   bool            `json:"idempotent"`
	ParallelSafe bool            `json:"parallel_safe"`
	Confirmation Confirmation    `json:"confirmation"`
	TimeoutMS    int64           `json:"timeout_ms"`
	Requires     []string        `json:"requires,omitempty"`
	Tasks        TaskSupport     `json:"task_support,omitzero"`
}

// MarshalJSON writes the metadata with the timeout as timeout_ms.
func (m ToolMetadata) MarshalJSON() ([]byte, error) {
	return jsonv2.Marshal(toolMetadataJSON{m.Name, m.Description, m.InputSchema, m.OutputSchema, m.Effect,
		m.Idempotent, m.ParallelSafe, m.Confirmation, m.Timeout.Milliseconds(), m.Requires, m.Tasks}, encodeOptions)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *ToolMetadata) UnmarshalJSON(data []byte) error {
	var w toolMetadataJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = ToolMetadata{w.Name, w.Description, w.InputSchema, w.OutputSchema, w.Effect, w.Idempotent, w.ParallelSafe,
		w.Confirmation, time.Duration(w.TimeoutMS) * time.Millisecond, w.Requires, w.Tasks}
	return nil
}

func (m ToolMetadata) clone() ToolMetadata {
	m.InputSchema = slices.Clone(m.InputSchema)
	m.OutputSchema = slices.Clone(m.OutputSchema)
	m.Requires = slices.Clone(m.Requires)
	return m
}
