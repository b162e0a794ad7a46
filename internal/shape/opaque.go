package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Opaque is a schema declared for JSON that carmy neither writes nor reads
// itself: a type with its own MarshalJSON, UnmarshalJSON and JSONSchema
// methods, or a hand-written tool's input or output with its schema written
// out. carmy publishes the schema as declared, checks every value against
// it with an independent JSON Schema validator, and leaves the encoding to
// the type's own methods.
type Opaque struct {
	// Doc is the declared schema.
	Doc    json.RawMessage
	schema *validator.Schema
}

// CompileOpaque compiles a declared schema (draft 2020-12) once. name
// names it in errors.
func CompileOpaque(name string, doc []byte) (*Opaque, error) {
	v, err := validator.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %v", err)
	}
	c := validator.NewCompiler()
	c.DefaultDraft(validator.Draft2020)
	url := "mem:///" + strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %v", err)
	}
	return &Opaque{Doc: doc, schema: s}, nil
}

// OpaqueNode models t, whose JSON only the declared schema describes.
func OpaqueNode(t reflect.Type, o *Opaque) *Node {
	return &Node{Kind: KindOpaque, Type: t, Opaque: o}
}

// Validate checks data, one JSON document, against the schema, and
// reports each failure at its path in carmy's syntax.
func (o *Opaque) Validate(data []byte) []Problem { return o.problems(data, nil) }

var printer = message.NewPrinter(language.English)

func (o *Opaque) problems(data []byte, at path) []Problem {
	v, err := validator.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return []Problem{{Path: at.String(), Message: "malformed JSON: " + err.Error()}}
	}
	err = o.schema.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*validator.ValidationError)
	if !ok {
		return []Problem{{Path: at.String(), Message: "does not match its schema: " + err.Error()}}
	}
	var out []Problem
	var walk func(e *validator.ValidationError)
	walk = func(e *validator.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		p := append(at[:len(at):len(at)], instancePath(v, e.InstanceLocation)...)
		out = append(out, Problem{Path: p.String(), Message: "does not match its schema: " + e.ErrorKind.LocalizedString(printer)})
	}
	walk(ve)
	return out
}

// instancePath turns the validator's location, a list of member names and
// indexes, into path segments, looking at the document to tell an index
// from a member named by digits.
func instancePath(doc any, loc []string) path {
	var p path
	for _, tok := range loc {
		switch d := doc.(type) {
		case []any:
			var i int
			fmt.Sscan(tok, &i)
			p = append(p, seg{index: i})
			if i >= 0 && i < len(d) {
				doc = d[i]
			}
		case map[string]any:
			p = append(p, seg{name: tok})
			doc = d[tok]
		default:
			p = append(p, seg{name: tok})
		}
	}
	return p
}

// schemaMethod is invopop's interface for a type that writes its own
// schema.
type schemaMethod interface {
	JSONSchema() *jsonschema.Schema
}

var schemaMethodType = reflect.TypeFor[schemaMethod]()

// opaqueOf returns the declared schema of a type with its own JSON, or
// an error saying what it lacks.
func opaqueOf(t reflect.Type) (*Opaque, error) {
	marshaler, unmarshaler := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler]()
	p := reflect.PointerTo(t)
	if !p.Implements(schemaMethodType) {
		return nil, fmt.Errorf("type %s has its own JSON encoding, so carmy cannot derive its schema; add a JSONSchema() *jsonschema.Schema method (with MarshalJSON and UnmarshalJSON) to declare it, use plain fields, or implement encoding.TextMarshaler for a string form", t)
	}
	if !p.Implements(marshaler) || !p.Implements(unmarshaler) {
		return nil, fmt.Errorf("type %s has its own JSON encoding and a JSONSchema method, but not both MarshalJSON and UnmarshalJSON (from encoding/json); carmy needs both to write and read it", t)
	}
	s := reflect.New(t).Interface().(schemaMethod).JSONSchema()
	if s == nil {
		return nil, fmt.Errorf("type %s: JSONSchema returns nil", t)
	}
	doc, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("type %s: its JSONSchema does not encode: %v", t, err)
	}
	if bytes.Contains(doc, []byte(`"$ref"`)) || s.Definitions != nil {
		return nil, fmt.Errorf("type %s: its JSONSchema uses $ref or $defs, which cannot be embedded in another schema; write the schema out inline", t)
	}
	return CompileOpaque(t.String(), doc)
}
