package carmy

import (
	"encoding/json"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
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
	Timeout      time.Duration `json:"timeout_ms"` // in integer milliseconds in JSON
	// Requires lists the permissions a call needs, every one, sorted:
	// those the tool declares with [Requires] and the one
	// [Builder.EffectPermissions] gives its effect. A hand-written tool
	// declares its own here. A caller that lacks one is refused, and does
	// not see the tool listed.
	Requires []string `json:"requires,omitempty"`
	// Tasks says whether a call may, or must, run as a task ([Tasks]);
	// task_support in JSON, left out for the default, optional.
	Tasks TaskSupport `json:"task_support,omitempty"`
	// Deferred marks a tool a model should load on demand ([Deferred]);
	// defer_loading in JSON, left out when false.
	Deferred bool `json:"defer_loading,omitempty"`
}

// metadataJSON is ToolMetadata without its methods, as its JSON form is
// written and read.
type metadataJSON ToolMetadata

// The JSON form's options: the timeout in integer milliseconds (the JSON
// library takes no unit in a field's tag for a duration), and the members
// marked omitempty left out when they hold their zero value (the default
// task support, not deferred, no requirements), as encoding/json leaves
// them out. It is read as encoding/json reads it.
var (
	metadataEncode = jsonv2.JoinOptions(encodeOptions, jsonv1.OmitEmptyWithLegacySemantics(true),
		jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, d time.Duration) error {
			return enc.WriteToken(jsontext.Int(d.Milliseconds()))
		})))
	metadataDecode = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
		jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, d *time.Duration) error {
			var ms int64
			if err := jsonv2.UnmarshalDecode(dec, &ms); err != nil {
				return err
			}
			*d = time.Duration(ms) * time.Millisecond
			return nil
		})))
)

// MarshalJSON writes the metadata with the timeout as timeout_ms.
func (m ToolMetadata) MarshalJSON() ([]byte, error) {
	return jsonv2.Marshal((*metadataJSON)(&m), metadataEncode)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *ToolMetadata) UnmarshalJSON(data []byte) error {
	var w ToolMetadata
	if err := jsonv2.Unmarshal(data, (*metadataJSON)(&w), metadataDecode); err != nil {
		return err
	}
	*m = w
	return nil
}

func (m ToolMetadata) clone() ToolMetadata {
	m.InputSchema = slices.Clone(m.InputSchema)
	m.OutputSchema = slices.Clone(m.OutputSchema)
	m.Requires = slices.Clone(m.Requires)
	return m
}
