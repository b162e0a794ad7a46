package canon

import (
	"bytes"
	"io"
)

// UnsignZeros returns doc, a valid JSON document, with every negative zero
// (-0, -0.0, -0e5) written as 0. The canonical form writes every zero as
// 0, so a person approving an input is shown 0 there: a tool that reads
// the JSON itself must then get 0, not a -0 it would read as a negative
// float. doc is returned as it is when it holds no negative zero.
func UnsignZeros(doc []byte) []byte {
	if !bytes.Contains(doc, []byte("-0")) {
		return doc
	}
	dec := reading(doc)
	defer done(dec)
	var out []byte
	last := 0
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return doc // not valid JSON: not for this function to judge
		}
		if tok.Kind() != '0' {
			continue
		}
		lit := tok.String()
		if !negativeZero(lit) {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(lit)
		out = append(append(out, doc[last:start]...), '0')
		last = end
	}
	if out == nil {
		return doc
	}
	return append(out, doc[last:]...)
}

// negativeZero reports a JSON number that is a zero with a minus sign.
func negativeZero(lit string) bool {
	if len(lit) < 2 || lit[0] != '-' {
		return false
	}
	for _, c := range lit[1:] {
		switch c {
		case '0', '.':
		case 'e', 'E':
			return true
		default:
			return false
		}
	}
	return true
}
