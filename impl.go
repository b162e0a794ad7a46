package carmy

import (
	"reflect"
)

// ToolHandler is a tool written by hand, for when a function's signature
// cannot say enough: metadata computed at run time, schemas written out,
// or a type that serves several tools.
//
// Execute is called with a decoded and validated input, under the same
// rules as a function declared with [Tool]; it must honour ctx's
// cancellation.
type ToolHandler[In, Out any] interface {
	Metadata() ToolMetadata
	Execute(ctx Context, in In) (Out, error)
}

// implTool is the type-erased form of a ToolHandler, prepared once.
type implTool struct {
	metadata func() ToolMetadata
	invoke   func(ctx *Context, in reflect.Value) (any, error)
}

// Impl declares a tool from a [ToolHandler]. Metadata is read at Build; nil
// schemas in it default to [SchemaFor] of In and Out. In must be a struct
// or a pointer to one. The tool is not registered automatically: add it to
// a [Builder] with [Builder.Tool].
//
// A schema written out in the metadata is the tool's contract: it is
// compiled once, at Build, and every input and output is checked against
// it, with field errors at carmy's paths (items[2].sku); the values are
// read and written by their types' own JSON methods. So In and Out may be
// types carmy cannot model, which without a written-out schema are a Build
// error.
//
// The handler's types are erased once, here; calls go through a prepared
// invoker with no reflection on the handler.
func Impl[In, Out any](h ToolHandler[In, Out]) *ToolDef {
	d := &ToolDef{site: callerSite(2), ctxParam: -1, inParam: 0}
	if h == nil {
		d.fail("has a nil ToolHandler")
		return d
	}
	d.inType = reflect.TypeFor[In]()
	d.outType = reflect.TypeFor[Out]()
	if d.inType.Kind() == reflect.Pointer && d.inType.Elem().Kind() == reflect.Struct {
		d.inType, d.inPtr = d.inType.Elem(), true
	} else if d.inType.Kind() != reflect.Struct {
		d.fail("has input type %s; a tool's input must be a struct or a pointer to one", d.inType)
	}
	d.impl = &implTool{metadata: h.Metadata}
	if d.inPtr {
		d.impl.invoke = func(ctx *Context, in reflect.Value) (any, error) {
			return h.Execute(*ctx, in.Interface().(In))
		}
	} else {
		d.impl.invoke = func(ctx *Context, in reflect.Value) (any, error) {
			return h.Execute(*ctx, *in.Interface().(*In))
		}
	}
	return d
}
