package shape

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
)

var comments struct {
	sync.RWMutex
	m map[string]string
}

// AddComments registers descriptions by fully qualified Go name:
// "example.com/pkg.Type", "example.com/pkg.Type.Field" and
// "example.com/pkg.func". Later registrations win.
func AddComments(m map[string]string) {
	comments.Lock()
	if comments.m == nil {
		comments.m = make(map[string]string, len(m))
	}
	for k, v := range m {
		comments.m[k] = v
	}
	comments.Unlock()
	Reset()
}

// Comment returns the registered description of a fully qualified name.
func Comment(key string) string {
	comments.RLock()
	defer comments.RUnlock()
	return comments.m[key]
}

// comment returns the description of type t, or of its field when field is
// not "".
func comment(t reflect.Type, field string) string {
	if t.Name() == "" || t.PkgPath() == "" {
		return ""
	}
	name, _, _ := strings.Cut(t.Name(), "[") // generic types by their declared name
	key := t.PkgPath() + "." + name
	if field != "" {
		key += "." + field
	}
	return Comment(key)
}

type schemaExtender interface {
	JSONSchemaExtend(*jsonschema.Schema)
}

var extenderType = reflect.TypeFor[schemaExtender]()

// applyExtend runs a type's JSONSchemaExtend method on a schema of its
// kind and takes back what it set. Only keywords that carmy enforces (or
// that only annotate) may be set: anything else would publish a promise the
// runtime does not keep.
func applyExtend(t reflect.Type, n *Node) error {
	if t.Kind() == reflect.Pointer {
		// *T has T's methods; T's own node takes its extension.
		return nil
	}
	var ext schemaExtender
	switch {
	case t.Implements(extenderType):
		ext = reflect.Zero(t).Interface().(schemaExtender)
		if t.Kind() == reflect.Pointer {
			ext = reflect.New(t.Elem()).Interface().(schemaExtender)
		}
	case reflect.PointerTo(t).Implements(extenderType):
		ext = reflect.New(t).Interface().(schemaExtender)
	default:
		return nil
	}
	if n.Kind == KindStruct || n.Kind == KindPtr {
		return fmt.Errorf("JSONSchemaExtend on %s: carmy takes extensions on scalar types only (enums, formats, bounds); describe struct fields with tags", t)
	}
	s := &jsonschema.Schema{Type: jsonType(n), Format: n.Format}
	ext.JSONSchemaExtend(s)
	if s.Description != "" {
		n.Desc = s.Description
	}
	n.Title = s.Title
	if s.Format != "" {
		n.Format = s.Format
	}
	var err error
	if s.Pattern != "" {
		if n.Rules.Pattern, err = regexp.Compile(s.Pattern); err != nil {
			return fmt.Errorf("JSONSchemaExtend on %s: pattern: %v", t, err)
		}
	}
	for _, v := range s.Enum {
		text, _ := json.Marshal(v)
		if str, ok := v.(string); ok {
			text = []byte(str)
		}
		l, err := literalFor(n, string(text))
		if err != nil {
			return fmt.Errorf("JSONSchemaExtend on %s: enum value %v: %v", t, v, err)
		}
		n.Rules.Enum = append(n.Rules.Enum, l)
	}
	for _, b := range []struct {
		num   json.Number
		dst   **Bound
		lower bool
	}{{s.Minimum, &n.Rules.Min, true}, {s.Maximum, &n.Rules.Max, false}, {s.ExclusiveMinimum, &n.Rules.XMin, true}, {s.ExclusiveMaximum, &n.Rules.XMax, false}} {
		if b.num == "" {
			continue
		}
		v, err := ParseBound(string(b.num))
		if err != nil {
			return fmt.Errorf("JSONSchemaExtend on %s: %v", t, err)
		}
		tighten(b.dst, v, b.lower)
	}
	for _, l := range []struct {
		v     *uint64
		dst   **int
		lower bool
	}{{s.MinLength, &n.Rules.MinLen, true}, {s.MaxLength, &n.Rules.MaxLen, false}, {s.MinItems, &n.Rules.MinLen, true}, {s.MaxItems, &n.Rules.MaxLen, false}} {
		if l.v != nil {
			tightenLen(l.dst, int(*l.v), l.lower)
		}
	}
	// Whatever else was set is a keyword carmy would not enforce.
	rest := *s
	rest.Type, rest.Format, rest.Description, rest.Title, rest.Pattern, rest.Enum = "", "", "", "", "", nil
	rest.Minimum, rest.Maximum, rest.ExclusiveMinimum, rest.ExclusiveMaximum = "", "", "", ""
	rest.MinLength, rest.MaxLength, rest.MinItems, rest.MaxItems = nil, nil, nil, nil
	rest.Examples, rest.Default, rest.Deprecated = nil, nil, false
	if b, _ := json.Marshal(&rest); string(b) != "true" {
		return fmt.Errorf("JSONSchemaExtend on %s sets %s, which carmy does not enforce; use enum, pattern, bounds and lengths, or a validate tag", t, b)
	}
	if s.Type != jsonType(n) {
		return fmt.Errorf("JSONSchemaExtend on %s changes the type to %q, but values of %s encode as %q", t, s.Type, t, jsonType(n))
	}
	return nil
}

// jsonType is the JSON Schema type of a node's values.
func jsonType(n *Node) string {
	switch n.Kind {
	case KindBool:
		return "boolean"
	case KindInt, KindUint:
		return "integer"
	case KindFloat:
		return "number"
	case KindString, KindText, KindTime, KindBytes, KindDuration:
		return "string"
	case KindStruct, KindMap:
		return "object"
	case KindSlice, KindArray:
		return "array"
	case KindPtr:
		return jsonType(n.Elem)
	}
	return ""
}
