// Package canon computes the canonical form of a JSON document, RFC 8785
// (JCS), with one deliberate difference: integers are written exactly,
// however large, where JCS would round them to the nearest float64. Two
// inputs that differ only in key order, white space or number notation
// (2, 2.0, 2e0) have the same canonical form and digest.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Form returns the canonical form of a JSON document. Empty input and null
// are the empty object, as carmy treats an absent input.
func Form(doc []byte) ([]byte, error) {
	if t := trimJSONSpace(doc); len(t) == 0 || string(t) == "null" {
		return []byte("{}"), nil
	}
	dec := decoders.Get().(*jsontext.Decoder)
	defer decoders.Put(dec)
	dec.Reset(bytes.NewReader(doc))
	out, err := value(make([]byte, 0, len(doc)), dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("canon: trailing data after the document")
	}
	return out, nil
}

// trimJSONSpace trims the four characters JSON counts as white space, and
// no others.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// Digest returns the hex SHA-256 of the canonical form.
func Digest(doc []byte) (string, error) {
	f, err := Form(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(f)
	return hex.EncodeToString(sum[:]), nil
}

var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}

type member struct {
	key   string
	value []byte
}

func value(dst []byte, dec *jsontext.Decoder) ([]byte, error) {
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		var members []member
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := tok.String() // the token is void after the next read
			v, err := value(nil, dec)
			if err != nil {
				return nil, err
			}
			members = append(members, member{key: key, value: v})
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, m.key)
			dst = append(dst, ':')
			dst = append(dst, m.value...)
		}
		return append(dst, '}'), nil
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		dst = append(dst, '[')
		for i := 0; dec.PeekKind() != ']'; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = value(dst, dec); err != nil {
				return nil, err
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return append(dst, ']'), nil
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	switch raw.Kind() {
	case '"':
		s, err := jsontext.AppendUnquote(nil, raw)
		if err != nil {
			return nil, err
		}
		return appendString(dst, string(s)), nil
	case '0':
		return appendNumber(dst, string(raw))
	}
	return append(dst, raw...), nil // true, false, null
}

// maxExactDigits bounds the integers written digit by digit: below 10^21
// JCS writes integers without an exponent too, so the two agree wherever
// float64 is exact.
const maxExactDigits = 21

func appendNumber(dst []byte, lit string) ([]byte, error) {
	if plainInteger(lit) {
		if lit == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil // JSON integers have no leading zeros
	}
	// A huge exponent would make big.Rat compute a huge power of ten.
	if len(lit) <= 64 && smallExponent(lit) {
		if r, ok := new(big.Rat).SetString(lit); ok && r.IsInt() {
			if digits := r.Num().Text(10); len(strings.TrimPrefix(digits, "-")) <= maxExactDigits {
				return append(dst, digits...), nil
			}
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		// Beyond float64: no two notations are reconciled, the literal
		// stands for itself.
		return append(dst, lit...), nil
	}
	return jsontext.AppendFloat(dst, f, 64), nil
}

func plainInteger(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; (c < '0' || c > '9') && !(c == '-' && i == 0) {
			return false
		}
	}
	return true
}

func smallExponent(lit string) bool {
	i := bytes.IndexAny([]byte(lit), "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(lit[i+1:])
	return err == nil && e > -64 && e < 64
}

// appendString quotes s as RFC 8785 requires: only '"', '\' and control
// characters are escaped, with the short escapes where JSON has them.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, size := utf8.DecodeRuneInString(s[i:])
			dst = append(dst, s[i:i+size]...)
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}

// compareUTF16 orders keys by their UTF-16 code units, as RFC 8785 sorts.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}
