package llm

import (
	"encoding/json"
	"slices"
)

func (x *exporter) anthropicRoot(schema json.RawMessage) json.RawMessage {
	s, wasNullable := x.root(schema)
	switch {
	case s == nil:
		return nil
	case wasNullable:
		return s.bytes()
	}
	return slices.Clone(schema) // as carmy wrote it, byte for byte
}
