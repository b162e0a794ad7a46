package shape

import "fmt"

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
