// Package naming holds carmy's rules for tool names, shared by the library
// and by `carmy vet`, so that both say the same thing about a name.
package naming

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// SnakeCase lowers a Go name, keeping runs of capitals together as one
// word: getHTTPStatus → get_http_status, listV2Items → list_v2_items.
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

var valid = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,128}$`)

// Check reports a name that breaks the rule: 1 to 128 ASCII letters,
// digits, '_', '-' or '.'.
func Check(name string) error {
	if !valid.MatchString(name) {
		return fmt.Errorf("has the invalid name %q; a name is 1 to 128 ASCII letters, digits, '_', '-' or '.'", name)
	}
	return nil
}
