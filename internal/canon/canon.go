// Package canon computes the canonical form of a JSON input, RFC 8785
// (JCS), with one deliberate difference: every number is written exactly,
// never rounded to the nearest float64 as JCS would. Two documents have the
// same form exactly when they hold the same values: key order, white space,
// string escapes and number notation (1, 1.0, 1e0, 10e-1) do not count,
// while 1000000 and 1000000.000000000001 differ. Given a [Model], a null
// member where the model says null means absent is dropped, so that the
// form is one per validated input.
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
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Model describes the document Form reads, so that an optional member
// sent as null has the form of an absent one. A nil Model keeps every
// member.
type Model interface {
	// Member returns the model of an object's member by name, and
	// whether null there is the same input as no member at all.
	Member(name string) (m Model, nullIsAbsent bool)
	// Items returns the model of an array's items.
	Items() Model
}

// Form returns the canonical form of a JSON document read with the model m
// (nil for none). Empty input and null are the empty object, as carmy
// treats an absent input.
func Form(doc []byte, m Model) ([]byte, error) {
	if t := trimJSONSpace(doc); len(t) == 0 || string(t) == "null" {
		return []byte("{}"), nil
	}
	dec := reading(doc)
	defer done(dec)
	out, err := value(make([]byte, 0, len(doc)), dec.Decoder, m)
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

// Sum returns the digest of a canonical form: its hex SHA-256.
func Sum(form []byte) string {
	sum := sha256.Sum256(form)
	return hex.EncodeToString(sum[:])
}

// pooledDecoder is a decoder kept with the reader it reads, so that
// neither is made per document.
type pooledDecoder struct {
	*jsontext.Decoder
	r bytes.Reader
}

var decoders = sync.Pool{New: func() any {
	d := new(pooledDecoder)
	d.Decoder = jsontext.NewDecoder(&d.r)
	return d
}}

// reading returns a pooled decoder reading doc; done gives it back.
func reading(doc []byte) *pooledDecoder {
	d := decoders.Get().(*pooledDecoder)
	d.r.Reset(doc)
	d.Reset(&d.r)
	return d
}

func done(d *pooledDecoder) {
	d.r.Reset(nil) // the pool keeps no document
	decoders.Put(d)
}

type member struct {
	key   string
	value []byte
}

func value(dst []byte, dec *jsontext.Decoder, m Model) ([]byte, error) {
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
			var sub Model
			if m != nil {
				var nullIsAbsent bool
				if sub, nullIsAbsent = m.Member(key); nullIsAbsent && dec.PeekKind() == 'n' {
					if _, err := dec.ReadValue(); err != nil {
						return nil, err
					}
					continue
				}
			}
			v, err := value(nil, dec, sub)
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
		var items Model
		if m != nil {
			items = m.Items()
		}
		dst = append(dst, '[')
		for i := 0; dec.PeekKind() != ']'; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = value(dst, dec, items); err != nil {
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
		return appendNumber(dst, raw), nil
	}
	return append(dst, raw...), nil // true, false, null
}

// appendNumber writes a valid JSON number exactly, in the notation
// ECMAScript's Number.prototype.toString uses, which RFC 8785 adopts:
// plain digits from 1e-6 up to 1e21, an exponent outside. Applied to the
// exact decimal value instead of the nearest float64, it agrees with JCS
// wherever the number is a float64 written in its shortest form, and keeps
// every other number as written: the same value in any notation has one
// form, and two values never share one.
func appendNumber(dst []byte, lit []byte) []byte {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if plainInteger(lit) {
		// The common case, already in its form: JSON integers have no
		// leading zeros.
		if len(lit) == 1 && lit[0] == '0' {
			return append(dst, '0') // -0 is 0
		}
		if len(lit) <= maxPlainDigits {
			if neg {
				dst = append(dst, '-')
			}
			return append(dst, lit...)
		}
	}
	// lit is digits, then maybe a fraction, then maybe an exponent: its
	// value is digits × 10^(exp - len(fraction)).
	end := bytes.IndexAny(lit, "eE")
	mant, expLit := lit, []byte(nil)
	if end >= 0 {
		mant, expLit = lit[:end], lit[end+1:]
	}
	intPart, frac, _ := bytes.Cut(mant, []byte{'.'})
	digits := make([]byte, 0, len(intPart)+len(frac))
	digits = append(append(digits, intPart...), frac...)
	shift := -len(frac) // added to the exponent
	start := 0
	for start < len(digits) && digits[start] == '0' {
		start++
	}
	digits = digits[start:]
	if len(digits) == 0 {
		return append(dst, '0') // every zero is 0
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		shift++
	}
	// value = 0.digits × 10^n, n = exp + shift + len(digits); ECMAScript's
	// notation depends on n, and writes n-1 as the exponent.
	k := len(digits)
	if neg {
		dst = append(dst, '-')
	}
	exp, ok := smallExponent(expLit)
	if !ok {
		return appendExponent(dst, digits, bigExponent(expLit, shift+k-1))
	}
	n := exp + int64(shift) + int64(k)
	switch {
	case int64(k) <= n && n <= maxPlainDigits:
		dst = append(dst, digits...)
		for range n - int64(k) {
			dst = append(dst, '0')
		}
		return dst
	case 0 < n && n <= maxPlainDigits:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		return append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	return appendExponent(dst, digits, strconv.AppendInt(nil, n-1, 10))
}

// maxPlainDigits is where ECMAScript turns to exponents: 1e21 is the
// first number it writes with one.
const maxPlainDigits = 21

// appendExponent writes digits as d.ddd, then e, the sign and exp, a
// decimal integer.
func appendExponent(dst, digits, exp []byte) []byte {
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if exp[0] != '-' {
		dst = append(dst, '+')
	}
	return append(dst, exp...)
}

// maxSmallExponent bounds the exponents computed with int64: far from
// overflow whatever the document's length.
const maxSmallExponent = 1e15

// smallExponent reads the exponent of a number, 0 when it has none; ok is
// false when it is too large for int64 arithmetic.
func smallExponent(lit []byte) (int64, bool) {
	if len(lit) == 0 {
		return 0, true
	}
	e, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil || e > maxSmallExponent || e < -maxSmallExponent {
		return 0, false
	}
	return e, true
}

// bigExponent returns exp+offset in decimal, for an exponent beyond
// smallExponent's range. Such a number is written with an exponent.
func bigExponent(exp []byte, offset int) []byte {
	e, _ := new(big.Int).SetString(string(exp), 10) // digits with a sign: valid JSON
	return e.Add(e, big.NewInt(int64(offset))).Append(nil, 10)
}

func plainInteger(lit []byte) bool {
	for _, c := range lit {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
