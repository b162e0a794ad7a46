package shape

import (
	"strconv"
	"strings"
)

// Problem is one thing wrong with one place in a value.
type Problem struct {
	Path    string
	Message string
}

// seg is one step of a path: a member name or an array index.
type seg struct {
	name  string
	index int
	isKey bool // a map key, quoted when not an identifier
}

type path []seg

// maxPath bounds a formatted path: a document nested thousands deep must
// not make an error message as large as itself.
const maxPath = 256

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		if b.Len() > maxPath {
			b.WriteString("…")
			break
		}
		switch {
		case s.name == "" && !s.isKey:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case isIdent(s.name):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(truncate(s.name))
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(truncate(s.name)))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// JoinPath appends a member name to a formatted path.
func JoinPath(base, name string) string {
	switch {
	case !isIdent(name):
		return base + "[" + strconv.Quote(name) + "]"
	case base == "":
		return name
	}
	return base + "." + name
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// closest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a plausible typo.
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if strings.EqualFold(c, s) {
			return c
		}
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Closest is closest, for the registry's unknown tool names.
func Closest(s string, candidates []string) string { return closest(s, candidates) }

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return len(a) + len(b)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
