package carmy

import (
	"fmt"
	"strings"

	"github.com/carmy-dev/carmy/internal/shape"
)

// headerProblems reports the problems with the input fields tagged
// carmy:"header=Name", whose values MCP clients mirror in Mcp-Param-Name
// headers: a field whose value no header can carry (not a
// string, an integer or a boolean, or a pointer, which may be null), one
// below the input's top level, a header named twice.
func headerProblems(in *shape.Node) []error {
	var problems []error
	seen := map[string]string{}
	for _, f := range in.Deref().Fields {
		if f.Header == "" {
			continue
		}
		tag := fmt.Sprintf("carmy:\"header=%s\"", f.Header)
		switch prev, twice := seen[strings.ToLower(f.Header)]; {
		case f.Node.Kind == shape.KindPtr:
			problems = append(problems, fmt.Errorf("input field %s is tagged %s but is a pointer; a header mirrors a value that is never null: drop the pointer", f.GoName, tag))
		case !shape.Mirrorable(f.Node.Kind):
			problems = append(problems, fmt.Errorf("input field %s is tagged %s but is not a string, an integer or a boolean; a header mirrors only those", f.GoName, tag))
		case twice:
			problems = append(problems, fmt.Errorf("input fields %s and %s mirror the same header %s; give each its own", prev, f.GoName, f.Header))
		default:
			seen[strings.ToLower(f.Header)] = f.GoName
		}
	}
	for _, f := range nestedFields(in) {
		if f.Header != "" {
			problems = append(problems, fmt.Errorf("input field %s, tagged carmy:\"header=%s\", is not at the input's top level; move it there", f.GoName, f.Header))
		}
	}
	return problems
}

// nestedFields returns the struct fields below the input's top level, each
// once, for the tags that only a top-level field may carry.
func nestedFields(in *shape.Node) []*shape.Field {
	var out []*shape.Field
	seen := map[*shape.Node]bool{}
	var below func(n *shape.Node, top bool)
	below = func(n *shape.Node, top bool) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		for _, f := range n.Fields {
			if !top {
				out = append(out, f)
			}
			below(f.Node, false)
		}
		below(n.Elem, false)
	}
	below(in.Deref(), true)
	return out
}
