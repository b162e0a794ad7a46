package llm

import (
	"encoding/json"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// jnode is a JSON value that keeps the order of object members and the
// exact text of scalars, so that schemas read as carmy wrote them and
// numbers keep every digit. The exports rewrite schema documents that may
// be written by hand, with any keywords in any order: they look members
// up, inline $defs entries, wrap and reorder schemas, which a stream of
// tokens cannot do and a struct of known keywords would reorder or lose.
// jsontext reads the tree and quotes its names; scalars are printed as
// they were read, escapes included, which a jsontext.Encoder would not
// keep.
type jnode struct {
	kind byte     // '{', '[', or the kind of a scalar: '"', '0', 't', 'f', 'n'
	raw  []byte   // the text of a scalar
	keys []string // the member names of an object
	vals []*jnode // the member values of an object, the items of an array
}

func parseJSON(b []byte) (*jnode, error) {
	n := new(jnode)
	return n, jsonv2.Unmarshal(b, n)
}

// UnmarshalJSONFrom reads the next value into the tree.
func (n *jnode) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	k := d.PeekKind()
	if k != '{' && k != '[' {
		v, err := d.ReadValue()
		n.kind, n.raw = byte(v.Kind()), slices.Clone(v)
		return err
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	n.kind = byte(k)
	end := jsontext.Kind('}')
	if k == '[' {
		end = ']'
	}
	for d.PeekKind() != end {
		if k == '{' {
			name, err := d.ReadToken()
			if err != nil {
				return err
			}
			n.keys = append(n.keys, name.String())
		}
		v := new(jnode)
		if err := v.UnmarshalJSONFrom(d); err != nil {
			return err
		}
		n.vals = append(n.vals, v)
	}
	_, err := d.ReadToken()
	return err
}

func (n *jnode) appendTo(b []byte) []byte {
	switch n.kind {
	case '{':
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = jsontext.AppendQuote(b, k) // names are valid UTF-8: they were read as JSON or written here
			b = append(b, ':')
			b = n.vals[i].appendTo(b)
		}
		return append(b, '}')
	case '[':
		b = append(b, '[')
		for i, v := range n.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.appendTo(b)
		}
		return append(b, ']')
	}
	return append(b, n.raw...)
}

func (n *jnode) bytes() json.RawMessage { return n.appendTo(nil) }

func (n *jnode) index(k string) int {
	if n.kind != '{' {
		return -1
	}
	return slices.Index(n.keys, k)
}

func (n *jnode) get(k string) *jnode {
	if i := n.index(k); i >= 0 {
		return n.vals[i]
	}
	return nil
}

// set replaces a member's value, or adds the member at the end.
func (n *jnode) set(k string, v *jnode) {
	if i := n.index(k); i >= 0 {
		n.vals[i] = v
		return
	}
	n.keys = append(n.keys, k)
	n.vals = append(n.vals, v)
}

// del removes a member and returns its value.
func (n *jnode) del(k string) *jnode {
	i := n.index(k)
	if i < 0 {
		return nil
	}
	v := n.vals[i]
	n.keys = slices.Delete(n.keys, i, i+1)
	n.vals = slices.Delete(n.vals, i, i+1)
	return v
}

// str returns the value of a JSON string.
func (n *jnode) str() (string, bool) {
	if n == nil || n.kind != '"' {
		return "", false
	}
	s, err := jsontext.AppendUnquote(nil, n.raw)
	return string(s), err == nil
}

func (n *jnode) isNull() bool  { return n != nil && n.kind == 'n' }
func (n *jnode) isFalse() bool { return n != nil && n.kind == 'f' }

func jstr(s string) *jnode {
	b, _ := jsontext.AppendQuote(nil, s)
	return &jnode{kind: '"', raw: b}
}

func jfalse() *jnode { return &jnode{kind: 'f', raw: []byte("false")} }
func jtrue() *jnode  { return &jnode{kind: 't', raw: []byte("true")} }

func jarr(items ...*jnode) *jnode { return &jnode{kind: '[', vals: items} }

func jstrs(s []string) *jnode {
	a := jarr()
	for _, v := range s {
		a.vals = append(a.vals, jstr(v))
	}
	return a
}

// jobj builds an object from name, value pairs.
func jobj(kv ...any) *jnode {
	o := &jnode{kind: '{'}
	for i := 0; i < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1].(*jnode))
	}
	return o
}
