package naming

import "fmt"

// MaxPermissionLen bounds a permission a tool requires.
const MaxPermissionLen = 128

// CheckPermission reports a permission that is not an OAuth scope token
// (RFC 6749 §3.3), which could not travel in a token's scope claim, nor in
// the scope of a WWW-Authenticate challenge.
func CheckPermission(p string) error {
	if p == "" || len(p) > MaxPermissionLen {
		return fmt.Errorf("permission %q must be 1 to %d characters long", p, MaxPermissionLen)
	}
	for _, c := range []byte(p) {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return fmt.Errorf("permission %q may hold only printable ASCII characters other than space, '\"' and '\\'", p)
		}
	}
	return nil
}
