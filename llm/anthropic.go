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
	case describeRules(s) || wasNullable:
		return s.bytes()
	}
	return slices.Clone(schema) // as carmy wrote it, byte for byte
}

// describeRules adds to the descriptions in a schema the rules that carmy
// writes as a regular expression, in words (see words), keeping the
// keywords; it reports whether it added any.
func describeRules(s *jnode) bool {
	if s == nil || s.kind != '{' {
		return false
	}
	added := false
	var notes []string
	for i, k := range s.keys {
		v := s.vals[i]
		switch k {
		case "pattern", "not":
			if w := words(k, v); w != "" {
				notes = append(notes, w)
			}
		}
		switch k {
		case "properties", "$defs":
			if v.kind == '{' {
				for _, sub := range v.vals {
					added = describeRules(sub) || added
				}
			}
		case "items", "additionalProperties":
			added = describeRules(v) || added
		case "anyOf", "allOf", "oneOf":
			for _, sub := range v.vals {
				added = describeRules(sub) || added
			}
		}
	}
	return addNotes(s, notes) || added
}
