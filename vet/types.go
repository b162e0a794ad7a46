package vet

import (
	"encoding/json"
	"go/types"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/carmy-dev/carmy/internal/shape"
	"github.com/carmy-dev/carmy/internal/toolsrc"
)

// checkTypes reports what Build would refuse of a tool's input and output
// types (a channel, a rule that cannot hold, a bad jsonschema tag...), in
// its words, with its code: each type is rebuilt with package reflect as
// an unnamed type of the same shape (fields, tags, elements) and modeled
// as Build models the declared one. A type vet cannot rebuild (one with its
// own JSON, text or schema methods, which only the program can run, or a
// recursive one) is left to Build.
func checkTypes(sig toolsrc.Signature) []string {
	type root struct {
		what string // "input" or "output", as Build says
		t    types.Type
	}
	var roots []root
	for _, in := range sig.Inputs {
		if p, ok := in.Underlying().(*types.Pointer); ok {
			in = p.Elem()
		}
		roots = append(roots, root{"input", in})
	}
	if sig.Out != nil && !toolsrc.IsNamed(sig.Out, toolsrc.CarmyPath, "Content") {
		roots = append(roots, root{"output", sig.Out})
	}
	var problems []string
	for _, root := range roots {
		r := rebuilder{names: map[string]string{}, done: map[types.Type]reflect.Type{}, busy: map[types.Type]bool{}}
		rt, ok := r.rebuild(root.t)
		if !ok {
			continue
		}
		n, err := shapeOf(rt)
		if err != nil {
			// One problem, as Build reports it: the joined errors, a line each.
			problems = append(problems, root.what+" "+r.rename(err.Error(), rt, root.t))
		}
		if n != nil && root.what == "input" {
			_, idProblems := shape.RequestIDField(n)
			for _, e := range append(idProblems, shape.HeaderProblems(n)...) {
				problems = append(problems, e.Error())
			}
		}
	}
	return problems
}

// shapeOf models a rebuilt type, as Build does; nil and no error when
// package reflect would not have it.
func shapeOf(rt reflect.Type) (n *shape.Node, err error) {
	defer func() {
		if recover() != nil {
			n, err = nil, nil
		}
	}()
	return shape.Of(rt)
}

// knownTypes are the named types carmy models by name: vet uses them as
// they are, methods included.
var knownTypes = map[string]reflect.Type{
	"time.Time":                   reflect.TypeFor[time.Time](),
	"time.Duration":               reflect.TypeFor[time.Duration](),
	"encoding/json.RawMessage":    reflect.TypeFor[json.RawMessage](),
	"github.com/google/uuid.UUID": reflect.TypeFor[uuid.UUID](),
	"github.com/go-json-experiment/json/jsontext.Value": reflect.TypeFor[jsontext.Value](),
}

// encodingMethods are the methods that give a type its own JSON, text or
// schema: carmy calls them, which vet cannot.
var encodingMethods = []string{
	"MarshalJSON", "UnmarshalJSON", "MarshalJSONTo", "UnmarshalJSONFrom",
	"MarshalText", "UnmarshalText", "JSONSchema", "JSONSchemaExtend",
}

// methodsInterface stands for every interface type with methods, which
// package reflect cannot make: carmy refuses them all alike.
type methodsInterface interface{ carmyVet() }

// A rebuilder makes reflect types of the shape of go/types types.
type rebuilder struct {
	names map[string]string // a rebuilt type's spelling, to its declared name
	done  map[types.Type]reflect.Type
	busy  map[types.Type]bool // named types being rebuilt: a cycle
}

func (r *rebuilder) rebuild(t types.Type) (rt reflect.Type, ok bool) {
	defer func() {
		if recover() != nil { // a shape package reflect does not make
			rt, ok = nil, false
		}
	}()
	return r.of(t)
}

func (r *rebuilder) of(t types.Type) (reflect.Type, bool) {
	t = types.Unalias(t)
	if rt, ok := r.done[t]; ok {
		return rt, true
	}
	if n, ok := t.(*types.Named); ok {
		obj := n.Obj()
		if obj.Pkg() != nil {
			if rt, ok := knownTypes[obj.Pkg().Path()+"."+obj.Name()]; ok {
				return rt, true
			}
		}
		if r.busy[n] || hasEncoding(n) {
			return nil, false
		}
		r.busy[n] = true
		rt, ok := r.of(n.Underlying())
		delete(r.busy, n)
		if !ok {
			return nil, false
		}
		if b, basic := n.Underlying().(*types.Basic); basic {
			// A named type of a basic kind stands for its name in
			// messages ("embedded main.Status is not a struct"), unless
			// another already does.
			if named, ok := namedBasics[b.Kind()]; ok {
				if prev, taken := r.names[named.String()]; !taken || prev == toolsrc.TypeString(n) {
					rt = named
				}
			}
		}
		r.names[rt.String()] = toolsrc.TypeString(n)
		r.done[t] = rt
		return rt, true
	}
	switch u := t.(type) {
	case *types.Basic:
		return basicType(u)
	case *types.Pointer:
		e, ok := r.of(u.Elem())
		return ptr(e, ok)
	case *types.Slice:
		e, ok := r.of(u.Elem())
		if !ok {
			return nil, false
		}
		return reflect.SliceOf(e), true
	case *types.Array:
		e, ok := r.of(u.Elem())
		if !ok {
			return nil, false
		}
		return reflect.ArrayOf(int(u.Len()), e), true
	case *types.Map:
		k, ok1 := r.of(u.Key())
		e, ok2 := r.of(u.Elem())
		if !ok1 || !ok2 {
			return nil, false
		}
		return reflect.MapOf(k, e), true
	case *types.Chan:
		e, ok := r.of(u.Elem())
		if !ok {
			return nil, false
		}
		dir := reflect.BothDir
		switch u.Dir() {
		case types.SendOnly:
			dir = reflect.SendDir
		case types.RecvOnly:
			dir = reflect.RecvDir
		}
		return reflect.ChanOf(dir, e), true
	case *types.Signature:
		return reflect.TypeFor[func()](), true // refused as a func, whatever its signature
	case *types.Interface:
		if u.Empty() {
			return reflect.TypeFor[any](), true
		}
		rt := reflect.TypeFor[methodsInterface]()
		r.names[rt.String()] = toolsrc.TypeString(t)
		return rt, true
	case *types.Struct:
		fields := make([]reflect.StructField, 0, u.NumFields())
		for i := range u.NumFields() {
			f := u.Field(i)
			sf := reflect.StructField{Name: f.Name(), Tag: reflect.StructTag(u.Tag(i)), Anonymous: f.Embedded()}
			if !f.Exported() {
				sf.PkgPath = "p"
				if !f.Embedded() {
					sf.Type = reflect.TypeFor[int]() // unexported fields carry nothing
					fields = append(fields, sf)
					continue
				}
			}
			ft, ok := r.of(f.Type())
			if !ok {
				return nil, false
			}
			sf.Type = ft
			fields = append(fields, sf)
		}
		return reflect.StructOf(fields), true
	}
	return nil, false
}

func ptr(e reflect.Type, ok bool) (reflect.Type, bool) {
	if !ok {
		return nil, false
	}
	return reflect.PointerTo(e), true
}

// hasEncoding reports whether a named type, or a pointer to it, has one
// of the encodingMethods.
func hasEncoding(n *types.Named) bool {
	for _, t := range []types.Type{n, types.NewPointer(n)} {
		ms := types.NewMethodSet(t)
		for m := range ms.Methods() {
			if slices.Contains(encodingMethods, m.Obj().Name()) {
				return true
			}
		}
	}
	return false
}

var basicTypes = map[types.BasicKind]reflect.Type{
	types.Bool: reflect.TypeFor[bool](), types.String: reflect.TypeFor[string](),
	types.Int: reflect.TypeFor[int](), types.Int8: reflect.TypeFor[int8](), types.Int16: reflect.TypeFor[int16](),
	types.Int32: reflect.TypeFor[int32](), types.Int64: reflect.TypeFor[int64](),
	types.Uint: reflect.TypeFor[uint](), types.Uint8: reflect.TypeFor[uint8](), types.Uint16: reflect.TypeFor[uint16](),
	types.Uint32: reflect.TypeFor[uint32](), types.Uint64: reflect.TypeFor[uint64](), types.Uintptr: reflect.TypeFor[uintptr](),
	types.Float32: reflect.TypeFor[float32](), types.Float64: reflect.TypeFor[float64](),
	types.Complex64: reflect.TypeFor[complex64](), types.Complex128: reflect.TypeFor[complex128](),
	types.UnsafePointer: reflect.TypeFor[unsafe.Pointer](),
}

// Named types of the basic kinds, for the named types of the source that
// have those kinds: carmy treats them as their kinds, and names them in
// its messages.
type (
	namedBool    bool
	namedString  string
	namedInt     int
	namedInt8    int8
	namedInt16   int16
	namedInt32   int32
	namedInt64   int64
	namedUint    uint
	namedUint8   uint8
	namedUint16  uint16
	namedUint32  uint32
	namedUint64  uint64
	namedFloat32 float32
	namedFloat64 float64
)

var namedBasics = map[types.BasicKind]reflect.Type{
	types.Bool: reflect.TypeFor[namedBool](), types.String: reflect.TypeFor[namedString](),
	types.Int: reflect.TypeFor[namedInt](), types.Int8: reflect.TypeFor[namedInt8](), types.Int16: reflect.TypeFor[namedInt16](),
	types.Int32: reflect.TypeFor[namedInt32](), types.Int64: reflect.TypeFor[namedInt64](),
	types.Uint: reflect.TypeFor[namedUint](), types.Uint8: reflect.TypeFor[namedUint8](), types.Uint16: reflect.TypeFor[namedUint16](),
	types.Uint32: reflect.TypeFor[namedUint32](), types.Uint64: reflect.TypeFor[namedUint64](),
	types.Float32: reflect.TypeFor[namedFloat32](), types.Float64: reflect.TypeFor[namedFloat64](),
}

func basicType(b *types.Basic) (reflect.Type, bool) {
	rt, ok := basicTypes[b.Kind()]
	return rt, ok
}

// rename writes a message of Build's about a rebuilt type with the names
// the source declares: the root's, and those of the named types in it.
func (r *rebuilder) rename(msg string, rt reflect.Type, root types.Type) string {
	r.names[rt.String()] = toolsrc.TypeString(root)
	spellings := make([]string, 0, len(r.names))
	for s := range r.names {
		spellings = append(spellings, s)
	}
	// The longest first: a struct's spelling holds its fields' types.
	slices.SortFunc(spellings, func(a, b string) int { return len(b) - len(a) })
	for _, s := range spellings {
		msg = strings.ReplaceAll(msg, s, r.names[s])
	}
	return msg
}
