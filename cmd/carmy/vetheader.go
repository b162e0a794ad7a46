package main

import (
	"fmt"
	"go/types"
	"reflect"
	"strings"

	"github.com/carmy-dev/carmy/internal/shape"
)

// headerProblems are the problems Build reports with an input's fields
// tagged carmy:"header=Name", in its words: a name that is not an HTTP
// token (which Build reports alone, as it fails to model the input), a
// field no header can carry (not a string, an integer or a boolean, or a
// pointer), a header named twice, a tagged field below the top level.
func headerProblems(in types.Type) []string {
	st, named := inputStruct(in)
	if st == nil {
		return nil
	}
	var bad, problems []string
	seen := map[string]string{}
	nested := map[types.Type]bool{}
	var top func(st *types.Struct, owner string)
	top = func(st *types.Struct, owner string) {
		for i := range st.NumFields() {
			f := st.Field(i)
			tag := reflect.StructTag(st.Tag(i))
			jsonName, _, _ := strings.Cut(tag.Get("json"), ",")
			if !f.Exported() || jsonName == "-" {
				continue
			}
			if sub, ok := types.Unalias(deref(f.Type())).Underlying().(*types.Struct); f.Embedded() && jsonName == "" && ok {
				top(sub, owner) // promoted fields are the input's own
				continue
			}
			walkNested(f.Type(), nested, func(g *types.Var, header string) {
				problems = append(problems, fmt.Sprintf("input field %s, tagged carmy:\"header=%s\", is not at the input's top level; move it there", g.Name(), header))
			})
			name, ok := strings.CutPrefix(tag.Get("carmy"), "header=")
			if !ok {
				continue
			}
			if err := shape.CheckHeaderName(name); err != nil {
				bad = append(bad, fmt.Sprintf("input %s.%s: carmy tag %q: %v", owner, f.Name(), "header="+name, err))
				continue
			}
			ctag := fmt.Sprintf("carmy:\"header=%s\"", name)
			switch prev, twice := seen[strings.ToLower(name)]; {
			case isPointer(f.Type()):
				problems = append(problems, fmt.Sprintf("input field %s is tagged %s but is a pointer; a header mirrors a value that is never null: drop the pointer", f.Name(), ctag))
			case !mirrorable(f.Type()):
				problems = append(problems, fmt.Sprintf("input field %s is tagged %s but is not a string, an integer or a boolean; a header mirrors only those", f.Name(), ctag))
			case twice:
				problems = append(problems, fmt.Sprintf("input fields %s and %s mirror the same header %s; give each its own", prev, f.Name(), name))
			default:
				seen[strings.ToLower(name)] = f.Name()
			}
		}
	}
	top(st, named)
	if bad != nil {
		return bad
	}
	return problems
}

// inputStruct is the struct of an input type, and the name Build gives the
// type in its messages (package.Type).
func inputStruct(in types.Type) (*types.Struct, string) {
	t := types.Unalias(deref(in))
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return nil, ""
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		return st, n.Obj().Pkg().Name() + "." + n.Obj().Name()
	}
	return st, typeString(t)
}

// walkNested calls report for every field tagged carmy:"header=..."
// reachable below a top-level field of type t.
func walkNested(t types.Type, seen map[types.Type]bool, report func(f *types.Var, header string)) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch u := types.Unalias(t).Underlying().(type) {
	case *types.Pointer:
		walkNested(u.Elem(), seen, report)
	case *types.Slice:
		walkNested(u.Elem(), seen, report)
	case *types.Array:
		walkNested(u.Elem(), seen, report)
	case *types.Map:
		walkNested(u.Elem(), seen, report)
	case *types.Struct:
		for i := range u.NumFields() {
			f := u.Field(i)
			if name, ok := strings.CutPrefix(reflect.StructTag(u.Tag(i)).Get("carmy"), "header="); ok && f.Exported() {
				report(f, name)
			}
			walkNested(f.Type(), seen, report)
		}
	}
}

// mirrorable reports whether a value of type t is written as a JSON
// string, integer or boolean: a Go string, integer or boolean kind, or a
// type that writes itself as text.
func mirrorable(t types.Type) bool {
	switch kindOf(t) {
	case reflect.String, reflect.Int, reflect.Uint, reflect.Bool:
		return true
	}
	if isNamed(types.Unalias(t), "time", "Time") {
		return true
	}
	ms := types.NewMethodSet(types.NewPointer(t))
	return ms.Lookup(nil, "MarshalText") != nil
}
