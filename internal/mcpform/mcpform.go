// Package mcpform turns the JSON Schema of a struct into the form MCP's
// elicitation takes: a flat object of primitive properties (strings,
// numbers, integers, booleans, single-choice enums of strings, and lists of
// string choices), with none of the keywords that schema forbids (anyOf,
// oneOf, allOf, not, $ref, pattern...).
//
// The form says less than the schema it comes from: what it drops (a
// pattern, an exclusive bound, the choices of a number) is checked when
// the answer is decoded and validated against the full schema, as an input
// is. What a form cannot hold at all (an object, a list of free values) is
// an error: the person could not answer it.
package mcpform

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Form returns the form of a struct's schema, an object schema as carmy
// derives for a tool's input.
func Form(schema json.RawMessage) (map[string]any, error) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("mcpform: the schema is not an object schema: %w", err)
	}
	if t, _ := s.Type.(string); t != "object" {
		return nil, fmt.Errorf("mcpform: the schema is of type %v, not an object", s.Type)
	}
	props := make(map[string]any, len(s.Properties))
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is always the same one
	optional := map[string]bool{}
	for _, name := range names {
		p, opt, err := property(s.Properties[name])
		if err != nil {
			return nil, fmt.Errorf("mcpform: field %q: %w", name, err)
		}
		props[name] = p
		optional[name] = opt
	}
	var required []string
	for _, name := range s.Required {
		if _, ok := props[name]; ok && !optional[name] {
			required = append(required, name)
		}
	}
	form := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		form["required"] = required
	}
	return form, nil
}

// node is the part of a property's schema that a form can use.
type node struct {
	Type        any               `json:"type"`
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Default     json.RawMessage   `json:"default"`
	Enum        []any             `json:"enum"`
	Format      string            `json:"format"`
	MinLength   *int              `json:"minLength"`
	MaxLength   *int              `json:"maxLength"`
	Minimum     *float64          `json:"minimum"`
	Maximum     *float64          `json:"maximum"`
	MinItems    *int              `json:"minItems"`
	MaxItems    *int              `json:"maxItems"`
	Items       json.RawMessage   `json:"items"`
	AnyOf       []json.RawMessage `json:"anyOf"`
	OneOf       []json.RawMessage `json:"oneOf"`
}

// formats are the string formats a form may name.
var formats = []string{"email", "uri", "date", "date-time"}

// property is one property as a form holds it. optional reports a string
// whose schema also takes "" (omitempty with choices): the person may
// leave it out.
func property(raw json.RawMessage) (p map[string]any, optional bool, err error) {
	var n node
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, false, err
	}
	typ, err := primitive(n.Type)
	if err != nil {
		return nil, false, err
	}
	p = map[string]any{"type": typ}
	if n.Title != "" {
		p["title"] = n.Title
	}
	if n.Description != "" {
		p["description"] = n.Description
	}
	if len(n.Default) > 0 {
		p["default"] = n.Default
	}
	switch typ {
	case "string":
		choices, emptyToo := stringChoices(n)
		if choices != nil {
			p["enum"] = choices
			return p, emptyToo, nil
		}
		if slices.Contains(formats, n.Format) {
			p["format"] = n.Format
		}
		if n.MinLength != nil {
			p["minLength"] = *n.MinLength
		}
		if n.MaxLength != nil {
			p["maxLength"] = *n.MaxLength
		}
	case "number", "integer":
		// A bound beyond 2^53, such as a type's own limit, is one that a
		// client's JavaScript number may not hold exactly: the check of the
		// answer keeps it.
		if n.Minimum != nil && math.Abs(*n.Minimum) <= 1<<53 {
			p["minimum"] = *n.Minimum
		}
		if n.Maximum != nil && math.Abs(*n.Maximum) <= 1<<53 {
			p["maximum"] = *n.Maximum
		}
	case "array":
		var items node
		if len(n.Items) == 0 || json.Unmarshal(n.Items, &items) != nil {
			return nil, false, fmt.Errorf("a form's list holds choices, and this one says none")
		}
		if t, _ := primitive(items.Type); t != "string" {
			return nil, false, fmt.Errorf("a form's list holds choices of strings, not %v", items.Type)
		}
		choices, _ := stringChoices(items)
		if choices == nil {
			return nil, false, fmt.Errorf("a form's list holds choices, and this one says none")
		}
		p["items"] = map[string]any{"type": "string", "enum": choices}
		if n.MinItems != nil {
			p["minItems"] = *n.MinItems
		}
		if n.MaxItems != nil {
			p["maxItems"] = *n.MaxItems
		}
	}
	return p, false, nil
}

// primitive is the one type of a property a form can hold, the null of a
// nullable one aside.
func primitive(t any) (string, error) {
	var types []string
	switch t := t.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				types = append(types, s)
			}
		}
	}
	if len(types) != 1 {
		return "", fmt.Errorf("a form holds strings, numbers, booleans and lists of choices, not %v", t)
	}
	switch types[0] {
	case "string", "number", "integer", "boolean", "array":
		return types[0], nil
	}
	return "", fmt.Errorf("a form holds strings, numbers, booleans and lists of choices, not %s", types[0])
}

// stringChoices are the strings a string property takes, when it names
// them: its enum, or the enums of the alternatives of its anyOf or oneOf.
// emptyToo reports an alternative that takes the empty string, which
// omitempty adds: the field is then optional, not a choice.
func stringChoices(n node) (choices []string, emptyToo bool) {
	add := func(values []any) {
		for _, v := range values {
			if s, ok := v.(string); ok && !slices.Contains(choices, s) {
				choices = append(choices, s)
			}
		}
	}
	add(n.Enum)
	for _, raw := range append(slices.Clip(n.AnyOf), n.OneOf...) {
		var alt node
		if json.Unmarshal(raw, &alt) != nil {
			continue
		}
		add(alt.Enum)
		if alt.MaxLength != nil && *alt.MaxLength == 0 {
			emptyToo = true
		}
	}
	if slices.Contains(choices, "") {
		choices = slices.DeleteFunc(choices, func(s string) bool { return s == "" })
		emptyToo = true
	}
	if len(choices) == 0 {
		return nil, emptyToo
	}
	return choices, emptyToo
}
