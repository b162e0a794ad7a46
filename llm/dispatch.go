package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/internal/policy"
	"github.com/carmy-dev/carmy/internal/shape"
)

// Dispatcher runs a model's tool calls against one registry, as [Dispatch]
// does, with each tool's input schema read once, when the Dispatcher is
// made, rather than at every call. Make one per registry with
// [NewDispatcher] and keep it for the registry's life: the registry's
// tools never change once built. A Dispatcher is safe for concurrent use.
type Dispatcher struct {
	r       *carmy.Registry
	plans   map[string]*plan // by tool name
	tasks   map[string]bool  // the tools that run only as tasks
	walkers sync.Pool        // *argWalker, whose decoder and encoder keep their buffers from call to call
}

// NewDispatcher reads what [Dispatcher.Dispatch] needs of every tool of r.
func NewDispatcher(r *carmy.Registry) *Dispatcher {
	d := &Dispatcher{r: r, plans: map[string]*plan{}, tasks: map[string]bool{}}
	for _, m := range r.Tools() {
		d.plans[m.Name] = compile(m.InputSchema)
		if m.Tasks == carmy.TaskRequired {
			d.tasks[m.Name] = true
		}
	}
	return d
}

// Dispatch runs a tool call as a model wrote it, as the package's
// [Dispatch] does.
func (d *Dispatcher) Dispatch(ctx context.Context, name, arguments string, opts ...carmy.CallOption) (carmy.Result, error) {
	return dispatch(ctx, d.r, &d.walkers, d.plans[name], d.tasks[name], name, arguments, opts)
}

// Dispatch runs a tool call as a model wrote it: the tool's name and its
// arguments, the JSON text the provider returned (OpenAI's
// "function.arguments", Anthropic's "input", Gemini's "args", encoded). It
// undoes what the exports did to the schema, then calls r's
// [carmy.Registry.Execute] with the options applied:
//
//   - a null member for a field that is optional in the tool's own schema
//     is dropped, as if the model had left it out: strict mode makes a model
//     send every field, null for those it means to omit. A null for a
//     required field stays, and validation reports it;
//   - a list of {"key", "value"} entries where the schema has a map becomes
//     that map. Entries that are not of that form, or repeat a key, are
//     [carmy.CodeInvalidInput] before the tool is reached.
//
// At every depth: in nested objects, in arrays of objects and in map
// values. Arguments that are not JSON, and calls of unknown tools, go to
// Execute as they are, which reports them. Entries that cannot become a
// map go to Execute as they are too, so that the caller's permission is
// checked, and the refusal audited, before anything about the tool's
// input is said: a caller that may call the tool then gets the entries'
// problems as [carmy.CodeInvalidInput].
//
// A tool that runs only as a task ([carmy.TaskRequired]) is started as
// one ([carmy.Registry.Start]), and Dispatch waits for its outcome, as
// long as ctx allows: in process nothing times out, so the model is never
// handed the refusal of a tool it was offered. A task that waits for a
// person's approval waits as long as the approval lives.
//
// Dispatch reads the tool's input schema from [carmy.Registry.Lookup] at
// every call, which for a large schema costs more than the rest of the
// call; a [Dispatcher] reads every schema once, and is the way to dispatch
// many calls.
func Dispatch(ctx context.Context, r *carmy.Registry, name, arguments string, opts ...carmy.CallOption) (carmy.Result, error) {
	var p *plan
	m, ok := r.Lookup(name)
	if ok {
		p = compile(m.InputSchema)
	}
	return dispatch(ctx, r, new(sync.Pool), p, ok && m.Tasks == carmy.TaskRequired, name, arguments, opts) // a pool for this call alone
}

// dispatch runs the call; taskOnly: the tool runs only as a task.
func dispatch(ctx context.Context, r *carmy.Registry, walkers *sync.Pool, p *plan, taskOnly bool, name, arguments string, opts []carmy.CallOption) (carmy.Result, error) {
	ctx = policy.WithDoor(ctx, "llm") // the door policies see
	c := carmy.Call{Tool: name, Input: json.RawMessage(arguments)}
	for _, o := range opts {
		o(&c)
	}
	c.Tool = name
	w, _ := walkers.Get().(*argWalker)
	if w == nil {
		w = &argWalker{dec: new(jsontext.Decoder), enc: new(jsontext.Encoder)} // reset for each call
	}
	in, bad := w.modelArguments(name, p, c.Input)
	walkers.Put(w) // before the call runs, which may take long
	if bad == nil {
		c.Input = in
		return adapt.Execute(ctx, r, c, taskOnly)
	}
	// Arguments that cannot be undone go to the runtime as the model
	// wrote them: it checks permission before it reads them, so a caller
	// that may not call the tool learns nothing of its input's rules, and
	// its refusal, like every other, passes the middleware and the audit.
	// A caller that may call it gets what was wrong with the entries,
	// which says more than the runtime's "must be an object".
	res, err := adapt.Execute(ctx, r, c, taskOnly)
	if carmy.CodeOf(err) == carmy.CodeInvalidInput {
		return carmy.Result{}, bad
	}
	return res, err
}

// plan is what Dispatch reads of a schema to undo the exports in the
// values it describes: its references and unions with null followed, and
// nothing else kept. A nil plan has nothing to undo.
type plan struct {
	fields  map[string]field // an object's properties
	values  *plan            // the values of a map, or of an object's other members
	entries bool             // a map, which a model may send as a list of entries
	items   *plan            // an array's items
}

// field is one property of an object.
type field struct {
	plan     *plan
	optional bool // a null for it is dropped
}

// compile reads the plan of a tool's input schema; nil when the schema
// does not parse, which leaves nothing to undo.
func compile(schema json.RawMessage) *plan {
	s, err := parseJSON(schema)
	if err != nil {
		return nil
	}
	c := compiler{defs: s.get("$defs"), plans: map[*jnode]*plan{}}
	return c.plan(s)
}

// compiler builds the plans of one schema, each schema once, so that
// recursive types make plans that refer to themselves.
type compiler struct {
	defs  *jnode
	plans map[*jnode]*plan
}

func (c *compiler) plan(s *jnode) *plan {
	s = c.resolve(s)
	if s == nil {
		return nil
	}
	if p, ok := c.plans[s]; ok {
		return p
	}
	p := &plan{}
	c.plans[s] = p
	if props := s.get("properties"); props != nil && props.kind == '{' {
		required := requiredSet(s)
		p.fields = make(map[string]field, len(props.keys))
		for i, name := range props.keys {
			p.fields[name] = field{plan: c.plan(props.vals[i]), optional: !required[name]}
		}
	}
	if ap := s.get("additionalProperties"); ap != nil && ap.kind == '{' {
		p.values = c.plan(ap)
		p.entries = isMap(s)
	}
	if items := s.get("items"); items != nil {
		p.items = c.plan(items)
	}
	return p
}

// maxRefs bounds the references and unions followed in a row, against a
// schema that goes round without reaching a type.
const maxRefs = 64

// resolve follows references, and unions with null, to the schema that
// says what a value is; nil when there is none to follow.
func (c *compiler) resolve(s *jnode) *jnode {
	for range maxRefs {
		if s == nil || s.kind != '{' {
			return nil
		}
		if ref := s.get("$ref"); ref != nil {
			name, ok := refName(ref)
			if !ok || c.defs == nil {
				return nil
			}
			s = c.defs.get(name)
			continue
		}
		anyOf := s.get("anyOf")
		if anyOf == nil {
			return s
		}
		var branch *jnode
		for _, b := range anyOf.vals {
			if !isNullSchema(b) {
				if branch != nil {
					return nil // a real union: which branch applies is the validator's business
				}
				branch = b
			}
		}
		s = branch
	}
	return nil
}

// modelArguments undoes, in a model's arguments, what the exports did to
// a tool's schema, copying them token by token. It returns the arguments
// unchanged when there is nothing to undo or they are not JSON.
func (w *argWalker) modelArguments(tool string, p *plan, args json.RawMessage) (json.RawMessage, error) {
	if p == nil || len(bytes.TrimSpace(args)) == 0 {
		return args, nil
	}
	w.in.Reset(args)
	w.dec.Reset(&w.in)
	w.out.Reset()
	w.enc.Reset(&w.out, encoderOptions)
	w.changed, w.problems = false, nil
	if err := w.value(p); err != nil {
		return args, nil // Execute reports it
	}
	if _, err := w.dec.ReadToken(); err != io.EOF {
		return args, nil // data after the value: Execute reports it
	}
	if len(w.problems) > 0 {
		e := &carmy.Error{Code: carmy.CodeInvalidInput, Fields: w.problems}
		if len(w.problems) == 1 {
			e.Message = fmt.Sprintf("invalid input for %s: %s", tool, describeField(w.problems[0]))
		} else {
			e.Message = fmt.Sprintf("invalid input for %s: %d problems; fix each field listed", tool, len(w.problems))
		}
		return nil, e
	}
	if !w.changed {
		return args, nil
	}
	return bytes.Clone(bytes.TrimSuffix(w.out.Bytes(), []byte("\n"))), nil
}

// encoderOptions: the decoder checks the names of the arguments, and
// entries checks the keys of the maps it writes.
var encoderOptions = jsontext.AllowDuplicateNames(true)

// argWalker copies a value from dec to enc, undoing the exports as its
// plan says. Once a problem is found the copy is only read through: the
// call fails before it is sent.
type argWalker struct {
	in       bytes.Reader
	dec      *jsontext.Decoder
	out      bytes.Buffer
	enc      *jsontext.Encoder
	changed  bool
	problems []carmy.FieldError // paths relative to the value being copied, until it is done
}

// under places the problems found from the n-th on inside the member of
// that name, or the item of that index when index >= 0. Paths are built
// as the walk returns, so that a call without problems builds none.
func (w *argWalker) under(n int, name string, index int) {
	if len(w.problems) == n {
		return
	}
	seg := shape.JoinPath("", name)
	if index >= 0 {
		seg = "[" + strconv.Itoa(index) + "]"
	}
	for i := n; i < len(w.problems); i++ {
		switch p := &w.problems[i].Path; {
		case *p == "":
			*p = seg
		case (*p)[0] == '[':
			*p = seg + *p
		default:
			*p = seg + "." + *p
		}
	}
}

// value copies the next value under a plan.
func (w *argWalker) value(p *plan) error {
	switch k := w.dec.PeekKind(); {
	case k == '[' && p != nil && p.entries:
		return w.entries(p.values)
	case k == '[' && p != nil && p.items != nil:
		return w.array(p.items)
	case k == '{' && p != nil && (p.fields != nil || p.values != nil):
		return w.object(p)
	}
	v, err := w.dec.ReadValue()
	if err != nil {
		return err
	}
	return w.enc.WriteValue(v)
}

// copyToken copies the next token, which opens or closes an array or an
// object.
func (w *argWalker) copyToken() error {
	t, err := w.dec.ReadToken()
	if err != nil {
		return err
	}
	return w.enc.WriteToken(t)
}

func (w *argWalker) array(items *plan) error {
	if err := w.copyToken(); err != nil {
		return err
	}
	for i := 0; w.dec.PeekKind() != ']'; i++ {
		n := len(w.problems)
		if err := w.value(items); err != nil {
			return err
		}
		w.under(n, "", i)
	}
	return w.copyToken()
}

func (w *argWalker) object(p *plan) error {
	if err := w.copyToken(); err != nil {
		return err
	}
	for w.dec.PeekKind() != '}' {
		t, err := w.dec.ReadToken()
		if err != nil {
			return err
		}
		name := t.String()
		f, isField := p.fields[name]
		if isField && f.optional && w.dec.PeekKind() == 'n' {
			if _, err := w.dec.ReadToken(); err != nil {
				return err
			}
			w.changed = true
			continue
		}
		if !isField {
			f.plan = p.values // nil, when it is not a field: validation reports it
		}
		if err := w.enc.WriteToken(jsontext.String(name)); err != nil {
			return err
		}
		n := len(w.problems)
		if err := w.value(f.plan); err != nil {
			return err
		}
		w.under(n, name, -1)
	}
	return w.copyToken()
}

// entries turns a list of {"key", "value"} entries into the map it stands
// for, or reports why it cannot.
func (w *argWalker) entries(values *plan) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return err
	}
	type entry struct {
		key   string
		value jsontext.Value
	}
	var list []entry
	seen := map[string]bool{}
	failed := false
	for i := 0; w.dec.PeekKind() != ']'; i++ {
		var e map[string]jsontext.Value
		v, err := w.dec.ReadValue()
		if err != nil {
			return err
		}
		at := "[" + strconv.Itoa(i) + "]"
		if v.Kind() == '{' {
			_ = jsonv2.Unmarshal(v, &e) // it is valid JSON: the decoder read it
		}
		key, value := e["key"], e["value"]
		var name string
		var problem carmy.FieldError
		switch {
		case len(e) != 2 || key == nil || value == nil:
			problem = carmy.FieldError{Path: at, Message: `must be an entry {"key": "...", "value": ...} of the map`}
		case key.Kind() != '"' || jsonv2.Unmarshal(key, &name) != nil:
			problem = carmy.FieldError{Path: at + ".key", Message: "must be a string: it is a key of the map"}
		case seen[name]:
			problem = carmy.FieldError{Path: at + ".key", Message: fmt.Sprintf("repeats the key %q; give each key once", name)}
		default:
			seen[name] = true
			list = append(list, entry{name, value})
			continue
		}
		w.problems = append(w.problems, problem)
		failed = true
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return err
	}
	w.changed = true
	if failed {
		return w.enc.WriteToken(jsontext.Null) // stands for the map: the call fails anyway
	}
	if err := w.enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	dec := w.dec
	defer func() { w.dec = dec }()
	for _, e := range list {
		if err := w.enc.WriteToken(jsontext.String(e.key)); err != nil {
			return err
		}
		w.dec = jsontext.NewDecoder(bytes.NewReader(e.value))
		n := len(w.problems)
		if err := w.value(values); err != nil {
			return err
		}
		w.under(n, e.key, -1)
	}
	return w.enc.WriteToken(jsontext.EndObject)
}

// describeField says what is wrong with a field in one line, its path
// first, as the runtime's own invalid_input messages do.
func describeField(f carmy.FieldError) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + " " + f.Message
}
