package shape

import (
	"fmt"
	"strings"
)

// CheckHeaderName reports what is wrong with name as the HTTP header that
// mirrors a field (carmy:"header=Name"): it must be an HTTP token, the
// name of a header field (letters, digits and !#$%&'*+-.^_`|~), since MCP
// clients send it as Mcp-Param-Name.
func CheckHeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("a header name cannot be empty")
	}
	for _, c := range name {
		if !tchar(c) {
			return fmt.Errorf("header name %q has %q, which a header name cannot hold; use letters, digits and !#$%%&'*+-.^_`|~", name, c)
		}
	}
	return nil
}

// tchar reports whether c may appear in an HTTP token (RFC 9110, 5.6.2).
func tchar(c rune) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// Mirrorable reports whether a field of kind k can be mirrored in a
// header: its JSON is a string, an integer or a boolean, never null.
func Mirrorable(k Kind) bool {
	switch k {
	case KindString, KindText, KindTime, KindDuration, KindInt, KindUint, KindBool:
		return true
	}
	return false
}

// HeaderProblems reports the problems with the input fields tagged
// carmy:"header=Name", whose values MCP clients mirror in Mcp-Param-Name
// headers: a field whose value no header can carry (not a
// string, an integer or a boolean, or a pointer, which may be null), one
// below the input's top level, a header named twice.
func HeaderProblems(in *Node) []error {
	var problems []error
	seen := map[string]string{}
	for _, f := range in.Deref().Fields {
		if f.Header == "" {
			continue
		}
		tag := fmt.Sprintf("carmy:\"header=%s\"", f.Header)
		switch prev, twice := seen[strings.ToLower(f.Header)]; {
		case f.Node.Kind == KindPtr:
			problems = append(problems, fmt.Errorf("input field %s is tagged %s but is a pointer; a header mirrors a value that is never null: drop the pointer", f.GoName, tag))
		case !Mirrorable(f.Node.Kind):
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
func nestedFields(in *Node) []*Field {
	var out []*Field
	seen := map[*Node]bool{}
	var below func(n *Node, top bool)
	below = func(n *Node, top bool) {
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
