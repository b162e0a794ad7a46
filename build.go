package carmy

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/carmy-dev/carmy/internal/shape"
)

var (
	emptyInputType = reflect.TypeFor[struct{}]()
	nullSchema     = json.RawMessage(`{"type":"null"}`)
)

// prepare resolves one declaration into a runnable tool and reports every
// problem with it. The tool's name is set whenever it is known, so that
// problems can name it.
func (b *Builder) prepare(d *ToolDef) (*tool, []error) {
	t := &tool{def: d}
	problems := append([]error(nil), d.errs...)
	meta := &t.meta
	if d.impl != nil {
		*meta = d.impl.metadata()
		if meta.Confirmation != ConfirmationNone && meta.Confirmation != ConfirmationRequired {
			problems = append(problems, fmt.Errorf("has an unknown Confirmation %d", meta.Confirmation))
		}
		if meta.Timeout < 0 {
			problems = append(problems, fmt.Errorf("has a negative Timeout %v", meta.Timeout))
		}
		if meta.Tasks > TaskRequired {
			problems = append(problems, fmt.Errorf("has an unknown Tasks %d", meta.Tasks))
		}
		t.invoke = d.impl.invoke
	} else {
		o := d.opts
		meta.Name, meta.Description = o.name, o.description
		meta.Effect, meta.Idempotent, meta.ParallelSafe, meta.Timeout = d.effect, o.idempotent, o.parallelSafe, o.timeout
		meta.Tasks, meta.Deferred = o.tasks, o.deferred
		t.askFirst = o.taskAfterInput
		if t.askFirst && meta.Tasks == TaskForbidden {
			problems = append(problems, fmt.Errorf("has TaskAfterInput and Tasks(TaskForbidden): a tool that never runs as a task has no task to start once answered"))
		}
		if o.confirm {
			meta.Confirmation = ConfirmationRequired
		}
		if meta.Name == "" && !o.named {
			meta.Name = d.derivedName()
			if meta.Name == "" && d.fn.IsValid() {
				problems = append(problems, fmt.Errorf("is a closure or anonymous function, which has no usable name; give it one with carmy.Name"))
			}
		}
		if meta.Description == "" && d.fn.IsValid() {
			meta.Description = funcComment(d.fn)
		}
		t.invoke = t.callFunc
	}
	if meta.Name != "" || d.opts.named || d.impl != nil {
		if err := checkName(meta.Name); err != nil {
			problems = append(problems, err)
		}
	}
	if !meta.Effect.valid() && (d.impl != nil || d.fn.IsValid()) { // without a tool, its effect does not matter
		problems = append(problems, fmt.Errorf("has no effect (%s); pass one of carmy.None, Read, Write, ExternalWrite or Destructive", meta.Effect))
	}
	if meta.Timeout == 0 {
		meta.Timeout = b.timeout
	}
	// A tool that changes nothing has the effect of one call however often
	// it runs: every wire form (GET /tools, MCP's idempotentHint and _meta)
	// says so from this one field.
	if meta.Effect.ReadOnly() {
		meta.Idempotent = true
	}
	declared := d.opts.requires
	if d.impl != nil {
		declared = meta.Requires
	}
	var permProblems []error
	meta.Requires, permProblems = b.requirements(declared, meta.Effect)
	problems = append(problems, permProblems...)
	if len(d.errs) > 0 {
		return t, problems // the signature is unusable; its types may be too
	}
	problems = append(problems, t.prepareTypes(b, d)...)
	return t, problems
}

// prepareTypes models the input and output types, derives the schemas that
// the metadata leaves unset, and resolves State parameters.
func (t *tool) prepareTypes(b *Builder, d *ToolDef) []error {
	var problems []error
	t.inType = d.inType
	if t.inType == nil {
		t.inType = emptyInputType
	}
	if d.impl != nil && (t.meta.InputSchema != nil || t.meta.OutputSchema != nil) {
		problems = append(problems, t.declaredSchemas(d)...)
		if t.meta.InputSchema != nil && t.meta.OutputSchema != nil {
			return problems
		}
	}
	in, err := shape.Of(t.inType)
	switch {
	case t.in != nil: // declared
	case err != nil:
		problems = append(problems, fmt.Errorf("input %v", err))
	default:
		t.in = in
		var idProblems []error
		t.requestID, idProblems = shape.RequestIDField(in)
		problems = append(problems, idProblems...)
		problems = append(problems, shape.HeaderProblems(in)...)
		if t.meta.InputSchema == nil {
			t.meta.InputSchema = shape.Schema(in)
		}
	}
	switch {
	case t.out != nil: // declared
	case d.outType == nil:
		if t.meta.OutputSchema == nil {
			t.meta.OutputSchema = nullSchema
		}
	case d.outType == contentType: // content blocks, which bring their own JSON
		t.content = true
		if t.meta.OutputSchema == nil {
			t.meta.OutputSchema = contentSchema
		}
	default:
		out, err := shape.Of(d.outType)
		if err != nil {
			problems = append(problems, fmt.Errorf("output %v", err))
			break
		}
		t.out = out
		if t.meta.OutputSchema == nil {
			t.meta.OutputSchema = shape.Schema(out)
		}
	}
	for _, s := range [][]byte{t.meta.InputSchema, t.meta.OutputSchema} {
		if s != nil && !json.Valid(s) {
			problems = append(problems, fmt.Errorf("has a schema that is not valid JSON: %.80s", s))
		}
	}
	if d.impl != nil {
		return problems
	}
	t.args = make([]reflect.Value, d.fn.Type().NumIn())
	for i, st := range d.stateTypes {
		v, err := b.stateValue(st)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		sv := reflect.New(d.fn.Type().In(i)).Elem()
		sv.Field(0).Set(v)
		t.args[i] = sv
	}
	return problems
}

// declaredSchemas prepares the schemas a hand-written tool's metadata
// writes out: each is compiled once, checks every input or output, and
// leaves the decoding and encoding to the types' own JSON methods.
func (t *tool) declaredSchemas(d *ToolDef) []error {
	var problems []error
	for _, s := range []struct {
		what string
		doc  json.RawMessage
		typ  reflect.Type
		node **shape.Node
	}{{"input", t.meta.InputSchema, t.inType, &t.in}, {"output", t.meta.OutputSchema, d.outType, &t.out}} {
		if s.doc == nil {
			continue
		}
		o, err := shape.CompileOpaque(t.meta.Name+" "+s.what, s.doc)
		if err != nil {
			problems = append(problems, fmt.Errorf("has an %s schema that cannot be used: %v", s.what, err))
			continue
		}
		*s.node = shape.OpaqueNode(s.typ, o)
	}
	return problems
}

// funcComment returns the doc comment `carmy gen` registered for the
// function.
func funcComment(fn reflect.Value) string {
	name := funcName(fn)
	if name == "" {
		return ""
	}
	return shape.Comment(name)
}
