package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/shape"
)

// modelArguments undoes, in a model's arguments, what the exports did to
// a tool's schema, which it only reads. It returns the arguments
// unchanged when there is nothing to undo or they are not JSON.
func modelArguments(tool string, s *jnode, args json.RawMessage) (json.RawMessage, error) {
	if s == nil || len(bytes.TrimSpace(args)) == 0 {
		return args, nil
	}
	v, err := parseJSON(args)
	if err != nil {
		return args, nil // Execute reports it
	}
	w := &argWalker{defs: s.get("$defs")}
	w.walk(s, v, "")
	if len(w.problems) > 0 {
		e := &carmy.Error{Code: carmy.CodeInvalidInput, Fields: w.problems}
		if len(w.problems) == 1 {
			e.Message = fmt.Sprintf("invalid input for %s: %s", tool, describeField(w.problems[0]))
		} else {
			e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", tool, len(w.problems))
		}
		return nil, e
	}
	if !w.changed {
		return args, nil
	}
	return v.bytes(), nil
}

type argWalker struct {
	defs     *jnode
	changed  bool
	problems []carmy.FieldError
}

// maxRefs bounds the references and unions followed in a row, against a
// schema that goes round without reaching a type.
const maxRefs = 64

// resolve follows references, and unions with null, to the schema that
// says what a value is; nil when there is none to follow.
func (w *argWalker) resolve(s *jnode) *jnode {
	for range maxRefs {
		if s == nil || s.kind != '{' {
			return nil
		}
		if ref := s.get("$ref"); ref != nil {
			name, ok := refName(ref)
			if !ok || w.defs == nil {
				return nil
			}
			s = w.defs.get(name)
			continue
		}
		anyOf := s.get("anyOf")
		if anyOf == nil {
			return s
		}
		var branch *jnode
		for _, b := range anyOf.vals {
			if !isNullSchema(b) {
				if branch != nil {
					return nil // a real union: which branch applies is the validator's business
				}
				branch = b
			}
		}
		s = branch
	}
	return nil
}

func (w *argWalker) walk(s, v *jnode, path string) {
	s = w.resolve(s)
	if s == nil {
		return
	}
	switch v.kind {
	case '[':
		if isMap(s) {
			if w.entriesToMap(v, path) {
				w.walk(s, v, path)
			}
			return
		}
		if items := s.get("items"); items != nil {
			for i, e := range v.vals {
				w.walk(items, e, path+"["+strconv.Itoa(i)+"]")
			}
		}
	case '{':
		props := s.get("properties")
		ap := s.get("additionalProperties")
		required := requiredSet(s)
		for i := 0; i < len(v.keys); i++ {
			name := v.keys[i]
			var sub *jnode
			if props != nil {
				sub = props.get(name)
			}
			switch {
			case sub == nil && ap != nil && ap.kind == '{':
				w.walk(ap, v.vals[i], shape.JoinPath(path, name)) // a map's value
			case sub == nil:
				// not a field: validation reports it
			case v.vals[i].isNull() && !required[name]:
				v.keys = slices.Delete(v.keys, i, i+1)
				v.vals = slices.Delete(v.vals, i, i+1)
				w.changed = true
				i--
			default:
				w.walk(sub, v.vals[i], shape.JoinPath(path, name))
			}
		}
	}
}

// entriesToMap turns a list of {"key", "value"} entries into the object it
// stands for, in place, or reports why it cannot.
func (w *argWalker) entriesToMap(v *jnode, path string) bool {
	m := jobj()
	var problems []carmy.FieldError
	for i, e := range v.vals {
		at := path + "[" + strconv.Itoa(i) + "]"
		key, okKey := e.get("key").str()
		value := e.get("value")
		switch {
		case e.kind != '{' || len(e.keys) != 2 || value == nil || e.get("key") == nil:
			problems = append(problems, carmy.FieldError{Path: at, Message: `must be an entry {"key": "...", "value": ...} of the map`})
		case !okKey:
			problems = append(problems, carmy.FieldError{Path: at + ".key", Message: "must be a string: it is a key of the map"})
		case m.index(key) >= 0:
			problems = append(problems, carmy.FieldError{Path: at + ".key", Message: fmt.Sprintf("repeats the key %q; give each key once", key)})
		default:
			m.set(key, value)
		}
	}
	if len(problems) > 0 {
		w.problems = append(w.problems, problems...)
		return false
	}
	*v = *m
	w.changed = true
	return true
}

// describeField says what is wrong with a field in one line, its path
// first, as the runtime's own invalid_input messages do.
func describeField(f carmy.FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + " " + f.Message
}
