package shape

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
)

var (
	validateOnce sync.Once
	validate     *validator.Validate
)

// Validator returns the validator that enforces the rules JSON Schema cannot
// say. Custom rules registered on it before Build are available to tags.
func Validator() *validator.Validate {
	validateOnce.Do(func() {
		validate = validator.New()
		validate.RegisterTagNameFunc(validatorName)
	})
	return validate
}

// validatorName is how the validator names a field in its namespaces: by
// its JSON name, else its Go name.
func validatorName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// probeRuntime fails when the validator does not know a rule of tag: it
// would otherwise panic on the first call.
func probeRuntime(t reflect.Type, tag string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("validate rule %q: %v", tag, r)
		}
	}()
	_ = Validator().Var(reflect.Zero(t).Interface(), tag)
	return nil
}

// Check reports every rule that v, a value of the type n models, breaks.
// Paths in skip already have a problem and are not reported again.
func Check(n *Node, v reflect.Value, skip []Problem) []Problem {
	return check(n, v, skip, false)
}

// CheckOutput reports every rule that v, an output of the type n models,
// breaks in the form [Encode] writes it, which the output schema
// describes: a member Encode leaves out is not checked, and a nil slice or
// map, written as [] or {}, is checked as one. (An input's nil collection
// is an absent member, which the rules after omitempty let through, as the
// validator does.)
func CheckOutput(n *Node, v reflect.Value) []Problem {
	return check(n, v, nil, true)
}

func check(n *Node, v reflect.Value, skip []Problem, output bool) []Problem {
	if !n.checked {
		return nil
	}
	pp := paths.Get().(*path)
	c := checker{skip: skip, path: (*pp)[:0], output: output}
	c.value(n, nil, v)
	clear(c.path[:cap(c.path)]) // keep no map keys alive in the pool
	*pp = c.path[:0]
	paths.Put(pp)
	return c.problems
}

// paths recycles the checker's path, which every call needs.
var paths = sync.Pool{New: func() any { p := make(path, 0, 16); return &p }}

type checker struct {
	problems []Problem
	path     path
	skip     []Problem
	output   bool // checking what Encode writes: see CheckOutput
}

func (c *checker) add(msg string) {
	p := c.path.String()
	if covered(p, c.skip) {
		return
	}
	c.problems = append(c.problems, Problem{Path: p, Message: msg})
}

// covered reports whether a problem at path p is already said by one in
// skip: at p itself, or at a value that contains p. A member that is
// missing or of the wrong type decodes to a zero value whose own rules
// would only repeat the problem, misleadingly.
func covered(p string, skip []Problem) bool {
	for _, s := range skip {
		if p == s.Path || s.Path != "" && strings.HasPrefix(p, s.Path) && (p[len(s.Path)] == '.' || p[len(s.Path)] == '[') {
			return true
		}
	}
	return false
}

// value checks v against the rules of its use (r, may be nil) and of its
// type, then everything below it.
func (c *checker) value(n *Node, r *Rules, v reflect.Value) {
	for n.Kind == KindPtr {
		if v.IsNil() {
			if r != nil && r.NonNull {
				c.add("must not be null")
			}
			return
		}
		n, v = n.Elem, v.Elem()
	}
	if r != nil {
		for _, m := range ruleProblems(r, n, v) {
			c.add(m)
		}
		if r.IfSet != nil && !c.empty(n, v) {
			for _, m := range ruleProblems(r.IfSet, n, v) {
				c.add(m)
			}
		}
	}
	for _, m := range ruleProblems(&n.Rules, n, v) {
		c.add(m)
	}
	var items *Rules
	if r != nil {
		items = r.Items
	}
	switch n.Kind {
	case KindStruct:
		c.fields(n, v)
	case KindSlice, KindArray:
		if !n.Elem.checked && items == nil {
			return
		}
		for i := range v.Len() {
			c.path = append(c.path, seg{index: i})
			c.value(n.Elem, items, v.Index(i))
			c.path = c.path[:len(c.path)-1]
		}
	case KindMap:
		if !n.Elem.checked && items == nil {
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) })
		for _, k := range keys {
			c.path = append(c.path, seg{name: k.String(), isKey: true})
			c.value(n.Elem, items, v.MapIndex(k))
			c.path = c.path[:len(c.path)-1]
		}
	}
}

// empty reports whether the rules after omitempty (IfSet) skip v. Encode
// writes a nil collection as an empty one, which an output's rules see.
func (c *checker) empty(n *Node, v reflect.Value) bool {
	if c.output && collection(n) {
		return false
	}
	return emptyValue(n, v)
}

func (c *checker) fields(n *Node, v reflect.Value) {
	cross := false
	for _, f := range n.Fields {
		if !f.Node.checked && f.Rules.empty() && f.Runtime == "" {
			continue
		}
		fv := fieldOf(v, f)
		if c.output && !f.Required && f.Omit != OmitNever && omitted(f, fv) {
			continue // not written, so not in the output
		}
		c.path = append(c.path, seg{name: f.Name})
		c.value(f.Node, &f.Rules, fv)
		if f.Runtime != "" && !f.Cross {
			c.validatorErrors(Validator().Var(fv.Interface(), f.Runtime))
		}
		c.path = c.path[:len(c.path)-1]
		cross = cross || f.Cross
	}
	if cross {
		c.crossFields(n, v)
	}
}

// crossFields runs the rules that compare fields of one struct, and only
// those: every other rule has been checked already. The filter and
// StructNamespace name a field by its Go names from the struct down,
// through embedded structs ("Base.Password"), after the struct type's
// name, which an unnamed struct type does not have.
func (c *checker) crossFields(n *Node, v reflect.Value) {
	allowed := map[string]bool{} // the cross fields and the embedded structs that lead to them
	names := map[string]string{} // Go path → JSON name
	for _, f := range n.Fields {
		if !f.Cross {
			continue
		}
		var p string
		t := n.Type
		for i, x := range f.Index {
			sf := t.Field(x)
			if i > 0 {
				p += "."
			}
			p += sf.Name
			allowed[p] = true
			t = sf.Type
		}
		names[p] = f.Name
	}
	prefix := ""
	if name := n.Type.Name(); name != "" {
		prefix = name + "."
	}
	ptr := reflect.New(n.Type)
	ptr.Elem().Set(v)
	err := Validator().StructFiltered(ptr.Interface(), func(ns []byte) bool {
		return !allowed[strings.TrimPrefix(string(ns), prefix)]
	})
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return
	}
	for _, fe := range verrs {
		name, ok := names[strings.TrimPrefix(fe.StructNamespace(), prefix)]
		if !ok {
			continue
		}
		c.path = append(c.path, seg{name: name})
		c.add(validatorMessage(fe))
		c.path = c.path[:len(c.path)-1]
	}
}

func (c *checker) validatorErrors(err error) {
	if err == nil {
		return // before verrs, which escapes to the heap
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return
	}
	base := c.path.String()
	for _, fe := range verrs {
		p := base + fe.Namespace()
		dup := false
		for _, q := range c.problems {
			dup = dup || q.Path == p
		}
		dup = dup || covered(p, c.skip)
		if !dup {
			c.problems = append(c.problems, Problem{Path: p, Message: validatorMessage(fe)})
		}
	}
}

// validatorMessage words a validator failure as a fix, from the rule
// table that carmy vet reads too.
func validatorMessage(fe validator.FieldError) string {
	tag := fe.Tag()
	if p := fe.Param(); p != "" && !strings.Contains(tag, "|") {
		tag += "=" + p // alternatives carry their parameters in the tag
	}
	return RuleMessage(tag, fe.Kind())
}

// zeroBreaks reports whether the zero value of a field breaks a rule: its
// own, its type's, or one anywhere inside it.
func zeroBreaks(f *Field) bool {
	zero := reflect.Zero(f.Node.Type)
	c := checker{}
	c.value(f.Node, &f.Rules, zero)
	if len(c.problems) == 0 && f.Runtime != "" && !f.Cross {
		c.validatorErrors(Validator().Var(zero.Interface(), f.Runtime))
	}
	return len(c.problems) > 0
}

// ruleProblems checks one value, already past any pointer, against r. It
// does not look into elements or fields.
func ruleProblems(r *Rules, n *Node, v reflect.Value) []string {
	if r.empty() {
		return nil
	}
	if n.Kind == KindPtr {
		if v.IsNil() {
			if r.NonNull {
				return []string{"must not be null"}
			}
			return nil
		}
		return ruleProblems(r, n.Elem, v.Elem())
	}
	var out []string
	if r.NonZero && isZeroValue(n, v) {
		out = append(out, "must not be "+zeroNoun(n)+": it is required")
	}
	switch n.Kind {
	case KindInt, KindUint, KindFloat:
		c := func(b *Bound) int { return compareNumber(n, v, b) }
		if r.Min != nil && c(r.Min) < 0 {
			out = append(out, "must be at least "+r.Min.Lit)
		}
		if r.XMin != nil && c(r.XMin) <= 0 {
			out = append(out, "must be greater than "+r.XMin.Lit)
		}
		if r.Max != nil && c(r.Max) > 0 {
			out = append(out, "must be at most "+r.Max.Lit)
		}
		if r.XMax != nil && c(r.XMax) >= 0 {
			out = append(out, "must be less than "+r.XMax.Lit)
		}
		if r.Enum != nil && !slices.ContainsFunc(r.Enum, func(l Literal) bool { return l.N != nil && c(l.N) == 0 }) {
			out = append(out, "must be one of "+enumList(r.Enum))
		}
	case KindString, KindSlice, KindArray, KindMap, KindBytes:
		if (r.MinLen != nil || r.MaxLen != nil) && !(n.Kind == KindString && lengthHolds(r, v.Len())) {
			count := v.Len()
			if n.Kind == KindString {
				count = runeCount(v.String())
			}
			noun := countNoun(n)
			if r.MinLen != nil && count < *r.MinLen {
				if *r.MinLen == 1 {
					out = append(out, "must not be empty")
				} else {
					out = append(out, fmt.Sprintf("must have at least %d %s, not %d", *r.MinLen, noun, count))
				}
			}
			if r.MaxLen != nil && count > *r.MaxLen {
				out = append(out, fmt.Sprintf("must have at most %d %s, not %d", *r.MaxLen, noun, count))
			}
		}
		if n.Kind == KindString {
			s := v.String()
			if r.Enum != nil && !slices.ContainsFunc(r.Enum, func(l Literal) bool { return l.N == nil && l.S == s }) {
				out = append(out, "must be one of "+enumList(r.Enum))
			}
			if r.Pattern != nil && !r.Pattern.MatchString(s) {
				out = append(out, "must match the pattern "+r.Pattern.String())
			}
		}
	case KindBool:
		if r.Enum != nil && !slices.ContainsFunc(r.Enum, func(l Literal) bool { return l.N == nil && l.B == v.Bool() }) {
			out = append(out, "must be one of "+enumList(r.Enum))
		}
	}
	return out
}

// zeroNoun names the zero value that required refuses.
func zeroNoun(n *Node) string {
	switch {
	case n.Kind == KindTime:
		return "the zero time (0001-01-01T00:00:00Z)"
	case n.Type == uuidType:
		return "the nil UUID"
	case n.Kind == KindArray:
		return "an array of zeros"
	}
	return "the zero value"
}

// lengthHolds reports whether a string of size bytes certainly keeps the
// length rules of r, without counting its characters: there are never more
// characters than bytes, and a string of one byte or more has at least one.
func lengthHolds(r *Rules, size int) bool {
	return (r.MaxLen == nil || size <= *r.MaxLen) &&
		(r.MinLen == nil || *r.MinLen <= 0 || (*r.MinLen == 1 && size > 0))
}

func enumList(enum []Literal) string {
	parts := make([]string, len(enum))
	for i, l := range enum {
		parts[i] = l.JSON
	}
	return strings.Join(parts, ", ")
}

// compareNumber compares a number value exactly with a bound.
func compareNumber(n *Node, v reflect.Value, b *Bound) int {
	switch n.Kind {
	case KindInt:
		x := v.Int()
		if b.IOK {
			return cmp.Compare(x, b.I)
		}
	case KindUint:
		x := v.Uint()
		if b.UOK {
			return cmp.Compare(x, b.U)
		}
		if b.IOK { // a negative bound
			return 1
		}
	case KindFloat:
		// Exact where rounding could matter: see floats.go.
		x := v.Float()
		if bf := near(b, n.Bits); x != bf {
			return cmp.Compare(x, bf)
		}
		return shortest(x, n.Bits).Cmp(b.Rat)
	}
	return ratOf(n, v).Cmp(b.Rat)
}
func ratOf(n *Node, v reflect.Value) *big.Rat {
	if n.Kind == KindUint {
		return new(big.Rat).SetInt(new(big.Int).SetUint64(v.Uint()))
	}
	return new(big.Rat).SetInt64(v.Int())
}
