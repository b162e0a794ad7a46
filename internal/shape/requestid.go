package shape

import "fmt"

// RequestIDField finds the input field tagged carmy:"request_id", if any,
// and reports the problems with the tag: more than one such field, a field
// that is not a string, one below the input's top level.
func RequestIDField(in *Node) (*Field, []error) {
	var found *Field
	var problems []error
	for _, f := range in.Deref().Fields {
		if !f.RequestID {
			continue
		}
		switch {
		case f.Node.Kind != KindString:
			problems = append(problems, fmt.Errorf("input field %s is tagged carmy:\"request_id\" but is not a string; a request id is a string", f.GoName))
		case found != nil:
			problems = append(problems, fmt.Errorf("input fields %s and %s are both tagged carmy:\"request_id\"; tag one", found.GoName, f.GoName))
		default:
			found = f
		}
	}
	for _, f := range nestedFields(in) {
		if f.RequestID {
			problems = append(problems, fmt.Errorf("input field %s, tagged carmy:\"request_id\", is not at the input's top level; move it there", f.GoName))
		}
	}
	return found, problems
}
