package shape

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Numbers are compared with bounds as JSON Schema compares them: exactly,
// on the decimal that travels, not on the float it rounds to. Rounding
// moves a number by at most half a unit in the last place and never across
// a float, so a float number compares with a bound as its float does,
// except when its float is the bound's own nearest float. Those are the
// cases settled here: on the caller's decimal when decoding (settleFloat),
// on the shortest decimal that encodes the float when checking a value
// (compareNumber).

// near returns the float nearest to b in a float type of the given width.
func near(b *Bound, bits int) float64 {
	if bits == 32 {
		return b.F32
	}
	return b.F
}

// shortest returns the exact value of the shortest decimal that encodes f,
// a float of the given width: what its JSON encoding says.
func shortest(f float64, bits int) *big.Rat {
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, bits))
	return r
}

// decimalRat returns the exact value of a JSON number. An exponent below
// -1000 (past its digits) is clamped there, keeping the number's sign and
// its place between zero and every bound but absurdly small ones, so that
// an input cannot make carmy compute a huge power of ten.
func decimalRat(raw []byte) *big.Rat {
	s := string(raw)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		limit := i + 1000
		e, err := strconv.Atoi(s[i+1:])
		if err != nil { // too long for an int
			e = limit + 1
			if strings.HasPrefix(s[i+1:], "-") {
				e = -e
			}
		}
		s = s[:i] + "e" + strconv.Itoa(min(max(e, -limit), limit))
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return new(big.Rat)
	}
	return r
}

// bound is one side of a number's range.
type bound struct {
	b         *Bound
	lower     bool
	exclusive bool
}

func (s bound) holds(x *big.Rat) bool {
	c := x.Cmp(s.b.Rat)
	switch {
	case s.lower && s.exclusive:
		return c > 0
	case s.lower:
		return c >= 0
	case s.exclusive:
		return c < 0
	}
	return c <= 0
}

// message is the checker's message for the bound.
func (s bound) message() string {
	switch {
	case s.lower && s.exclusive:
		return "must be greater than " + s.b.Lit
	case s.lower:
		return "must be at least " + s.b.Lit
	case s.exclusive:
		return "must be less than " + s.b.Lit
	}
	return "must be at most " + s.b.Lit
}

// settleFloat checks f, the float that raw rounds to, against the range of
// its type and the bounds and enums of its use (r, may be nil) and of its
// type, wherever rounding may have changed the answer. It returns a
// problem, or the float to keep: f moved one unit toward the caller's
// number when f would break a bound that the number keeps (1e-400 under
// gt=0 becomes the smallest positive float, not 0), so that the rules the
// schema promises hold for the value the tool gets.
func settleFloat(n *Node, r *Rules, raw []byte, f float64) (float64, string) {
	var x *big.Rat
	exact := func() *big.Rat {
		if x == nil {
			x = decimalRat(raw)
		}
		return x
	}
	top := math.MaxFloat64
	if n.Bits == 32 {
		top = math.MaxFloat32
	}
	if f == top || f == -top {
		lo, hi := typeRange(n)
		if exact().Cmp(lo.Rat) < 0 || exact().Cmp(hi.Rat) > 0 {
			return f, fmt.Sprintf("must be between %s and %s (a %d-bit floating-point number)", lo.Lit, hi.Lit, n.Bits)
		}
	}
	ifSet := (*Rules)(nil)
	if r != nil && r.IfSet != nil && !r.IfSet.empty() {
		if f == 0 && exact().Sign() != 0 {
			// Not 0 as written, so the rules hold in the schema; 0 as
			// decoded, where they would not be checked.
			return f, "is too close to 0 for its rules; send 0 or a number that keeps them"
		}
		if f != 0 {
			ifSet = r.IfSet
		}
	}
	for _, rr := range [3]*Rules{&n.Rules, r, ifSet} {
		if rr == nil {
			continue
		}
		for _, s := range [4]bound{{rr.Min, true, false}, {rr.XMin, true, true}, {rr.Max, false, false}, {rr.XMax, false, true}} {
			if s.b == nil || near(s.b, n.Bits) != f {
				continue
			}
			if !s.holds(exact()) {
				return f, s.message()
			}
			if !s.holds(shortest(f, n.Bits)) {
				f = step(f, s.lower, n.Bits)
			}
		}
		if rr.Enum != nil && slices.ContainsFunc(rr.Enum, func(l Literal) bool { return l.N != nil && near(l.N, n.Bits) == f }) &&
			!slices.ContainsFunc(rr.Enum, func(l Literal) bool { return l.N != nil && l.N.Rat.Cmp(exact()) == 0 }) {
			return f, "must be one of " + enumList(rr.Enum)
		}
	}
	return f, ""
}

// step returns the next float after f, up or down, in the given width.
func step(f float64, up bool, bits int) float64 {
	dir := math.Inf(-1)
	if up {
		dir = math.Inf(1)
	}
	if bits == 32 {
		return float64(math.Nextafter32(float32(f), float32(dir)))
	}
	return math.Nextafter(f, dir)
}
