package carmy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/carmy-dev/carmy/internal/naming"
	"github.com/carmy-dev/carmy/internal/shape"
	"github.com/carmy-dev/carmy/store"
)

// ToolDef is a tool declared with [Tool] or [Impl], ready to be added to a
// [Builder]. It holds the function and the options; schemas and names are
// resolved and checked by [Builder.Build], which reports every problem a
// declaration has. A ToolDef is immutable and may be shared by builders.
type ToolDef struct {
	site   string // file:line of the declaration
	fn     reflect.Value
	effect Effect
	opts   options
	errs   []error // problems found at declaration

	// The signature of a reflected function.
	ctxParam   int // index of the context parameter, -1 when none
	carmyCtx   bool
	stateTypes map[int]reflect.Type // parameter index → T of State[T]
	inParam    int                  // index of the input parameter, -1 when none
	inType     reflect.Type         // the input struct type (never a pointer)
	inPtr      bool                 // the parameter is *In
	outType    reflect.Type         // nil when the function returns error alone

	// A hand-written tool.
	impl *implTool
}

// autoRegistry holds every tool declared without Register(false).
var autoRegistry struct {
	sync.Mutex
	defs []*ToolDef
}

var (
	contextType      = reflect.TypeFor[context.Context]()
	carmyContextType = reflect.TypeFor[Context]()
	errorType        = reflect.TypeFor[error]()
	stateIface       = reflect.TypeFor[interface{ stateType() stateMarker }]()
)

// Tool declares a tool from a Go function. The function takes, in any
// order, at most one context (context.Context or [Context]), any number of
// [State] dependencies and at most one input struct (or pointer to one),
// and returns (Out, error) or error alone. The effect is required.
//
// Tool never panics: problems with the function or the options are
// recorded, with the file and line of the call, and reported by
// [Builder.Build]. Unless given Register(false), the tool joins the
// automatic registry used by [App].
func Tool(fn any, effect Effect, opts ...Option) *ToolDef {
	d := &ToolDef{site: callerSite(2), effect: effect, ctxParam: -1, inParam: -1}
	d.opts.register = true
	for _, o := range opts {
		if o != nil {
			o.apply(&d.opts)
		}
	}
	d.errs = append(d.errs, d.opts.conflicts...)
	d.reflectSignature(fn)
	if d.opts.register {
		autoRegistry.Lock()
		autoRegistry.defs = append(autoRegistry.defs, d)
		autoRegistry.Unlock()
	}
	return d
}

func callerSite(skip int) string {
	_, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("%s:%d", file, line)
}

func (d *ToolDef) fail(format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf(format, args...))
}

// reflectSignature checks the function once and records where each
// parameter goes.
func (d *ToolDef) reflectSignature(fn any) {
	if fn == nil {
		d.fail("has a nil function; pass a func such as func(ctx context.Context, in Input) (Output, error)")
		return
	}
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func {
		d.fail("is given a %s, not a function; pass a func such as func(ctx context.Context, in Input) (Output, error)", t)
		return
	}
	if v.IsNil() {
		d.fail("has a nil function of type %s", t)
		return
	}
	d.fn = v
	if t.IsVariadic() {
		d.fail("takes variadic parameters (%s); tools take fixed parameters: put a slice field in the input struct instead", t)
	}
	for i := range t.NumIn() {
		p := t.In(i)
		switch {
		case p == carmyContextType || p == contextType:
			if d.ctxParam >= 0 {
				d.fail("takes two contexts (parameters %d and %d); keep one: carmy.Context or context.Context", d.ctxParam+1, i+1)
				continue
			}
			d.ctxParam, d.carmyCtx = i, p == carmyContextType
		case p == reflect.PointerTo(carmyContextType):
			d.fail("takes *carmy.Context; take carmy.Context by value")
		case p.Kind() == reflect.Struct && p.Implements(stateIface):
			if d.stateTypes == nil {
				d.stateTypes = map[int]reflect.Type{}
			}
			d.stateTypes[i] = p.Field(0).Type
		case p.Kind() == reflect.Struct || (p.Kind() == reflect.Pointer && p.Elem().Kind() == reflect.Struct):
			if d.inParam >= 0 {
				d.fail("takes at most one input; combine the fields into one struct (parameters %d and %d are both inputs)", d.inParam+1, i+1)
				continue
			}
			d.inParam, d.inPtr, d.inType = i, p.Kind() == reflect.Pointer, p
			if d.inPtr {
				d.inType = p.Elem()
			}
		default:
			d.fail("parameter %d has type %s; a tool takes a context, carmy.State[T] dependencies and one input struct: wrap the value in a struct field", i+1, p)
		}
	}
	switch t.NumOut() {
	case 1:
		if t.Out(0) != errorType {
			d.fail("returns %s alone; return (%s, error) or error", t.Out(0), t.Out(0))
		}
	case 2:
		if t.Out(1) != errorType {
			d.fail("returns (%s, %s); the second result must be error", t.Out(0), t.Out(1))
		}
		d.outType = t.Out(0)
	default:
		d.fail("returns %d results; return (Out, error) or error", t.NumOut())
	}
}

// derivedName returns the snake_case name of the function, or "" for a
// closure, which has none worth using.
func (d *ToolDef) derivedName() string {
	if !d.fn.IsValid() {
		return ""
	}
	f := runtime.FuncForPC(d.fn.Pointer())
	if f == nil {
		return ""
	}
	full := f.Name() // pkg/path.name, pkg/path.(*T).Method-fm, pkg.outer.func1
	full = strings.TrimSuffix(full, "-fm")
	full = strings.ReplaceAll(full, "[...]", "") // pkg.Generic[...], pkg.(*Box[...]).Method
	base := full[strings.LastIndexByte(full, '/')+1:]
	parts := strings.Split(base, ".")
	last := parts[len(parts)-1]
	if closureName.MatchString(last) || last == "" {
		return ""
	}
	return naming.SnakeCase(last)
}

// closureName matches the last element of a closure's name: outer.func1,
// outer.func1.2 for closures nested in closures, outer-range1 for the body
// of a range-over-func loop.
var closureName = regexp.MustCompile(`^(func|gowrap)?\d+$|-range\d+$`)

func checkName(name string) error { return naming.Check(name) }

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

// SchemaFor returns the JSON Schema that carmy derives for T, the same one
// a tool publishes for an input or output of that type; nil when T has no
// schema (a channel, a func, a type with its own JSON encoding and no
// JSONSchema method to declare it).
func SchemaFor[T any]() json.RawMessage {
	n, err := shape.Of(reflect.TypeFor[T]())
	if err != nil {
		return nil
	}
	return slices.Clone(shape.Schema(n)) // the cached bytes are shared
}

// RegisterComments registers Go doc comments as schema descriptions and
// tool descriptions. Keys are fully qualified names: "example.com/pkg.Type",
// "example.com/pkg.Type.Field" and "example.com/pkg.function". The file
// that `carmy gen` writes calls it from init; tags and Description options
// win over comments. In a package main, keys "main.Name" name the package's
// own declarations in every binary built from it, its test binary
// included (which knows the package by its import path). It is safe for
// concurrent use.
func RegisterComments(comments map[string]string) {
	shape.AddComments(commentsFor(callerPackage(), comments))
}

// tool is a prepared, runnable tool.
type tool struct {
	meta    ToolMetadata
	def     *ToolDef
	inType  reflect.Type // the input struct, struct{} for tools without one
	in      *shape.Node
	out     *shape.Node // nil for tools that return error alone
	args    []reflect.Value
	invoke  func(c *Context, in reflect.Value) (any, error)
	handler CallFunc // the middleware chain around Registry.call
	direct  bool     // no middleware: dispatch calls Registry.call itself
	confirm string   // "confirm:<name>"
	content bool     // the output is Content: MCP content blocks
	// requestID is the input field tagged carmy:"request_id", if any.
	requestID *shape.Field
	// rate and maxInFlight are the tool's limits per principal; zero for
	// none.
	rate        store.Rate
	maxInFlight int
	// askFirst: its questions come before its task ([TaskAfterInput]).
	askFirst bool
	// server is the server the tool is mounted from, "" for the
	// registry's own: the Tool entity's server attribute for policies.
	server string
}
