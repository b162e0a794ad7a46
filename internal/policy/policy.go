// Package policy is carmy's Cedar engine: the model a policy is written
// against (a Principal, the actions list, call and approve, a Tool), the
// mapping of a tool's JSON input to Cedar values, the validation of a
// policy set against the schema of every tool its scope admits, and the
// decisions, which fail closed.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// The entity types and actions of the model.
const (
	PrincipalType types.EntityType = "Principal"
	ToolType      types.EntityType = "Tool"
	ActionType    types.EntityType = "Action"
)

// The actions.
const (
	List    = "list"
	Call    = "call"
	Approve = "approve"
)

// The annotations that act.
const (
	annotationID      = "id"
	annotationConfirm = "confirm"
	annotationReason  = "reason"
)

// Tool is what the model knows of a tool.
type Tool struct {
	Name     string
	Effect   string
	Requires []string
	// Server is the server the tool is mounted from; "" for a tool of the
	// registry itself.
	Server      string
	InputSchema []byte // JSON Schema
}

// Catalog is the tools policies are written about, as Cedar sees them.
type Catalog struct {
	tools map[string]*entry
	names []string // sorted
}

type entry struct {
	uid    types.EntityUID
	entity types.Entity
	in     *typ

	once      sync.Once
	schema    string
	validator *validate.Validator
	err       error
}

// NewCatalog returns the catalog of the given tools.
func NewCatalog(tools []Tool) *Catalog {
	return (&Catalog{}).With(tools...)
}

// With returns a catalog of c's tools and the tools given, which replace
// those of their names; c is unchanged. What c made of the other tools
// (their schemas and validators) is shared.
func (c *Catalog) With(tools ...Tool) *Catalog {
	n := &Catalog{tools: maps.Clone(c.tools), names: slices.Clone(c.names)}
	if n.tools == nil {
		n.tools = make(map[string]*entry, len(tools))
	}
	for _, t := range tools {
		uid := types.NewEntityUID(ToolType, types.String(t.Name))
		req := make([]types.Value, len(t.Requires))
		for i, p := range t.Requires {
			req[i] = types.String(p)
		}
		if _, ok := n.tools[t.Name]; !ok {
			n.names = append(n.names, t.Name)
		}
		n.tools[t.Name] = &entry{
			uid: uid,
			entity: types.Entity{UID: uid, Attributes: types.NewRecord(types.RecordMap{
				"effect":   types.String(t.Effect),
				"requires": types.NewSet(req...),
				"server":   types.String(t.Server),
			})},
			in: typeOf(t.InputSchema),
		}
	}
	slices.Sort(n.names)
	return n
}

// Names returns the tools' names, sorted.
func (c *Catalog) Names() []string { return slices.Clone(c.names) }

// Schema returns the Cedar schema of one tool: the entities and actions
// every tool shares, with the tool's input as call's and approve's input.
func (c *Catalog) Schema(name string) (string, bool) {
	e, ok := c.tools[name]
	if !ok {
		return "", false
	}
	e.load()
	return e.schema, true
}

// load makes the tool's schema and validator once.
func (e *entry) load() {
	e.once.Do(func() {
		e.schema = cedarSchema(e.in)
		var s schema.Schema
		if e.err = s.UnmarshalCedar([]byte(e.schema)); e.err != nil {
			return
		}
		res, err := s.Resolve()
		if err != nil {
			e.err = err
			return
		}
		e.validator = validate.New(res, validate.WithStrict())
	})
}

// Problem is one mistake in a policy set, where it is.
type Problem struct {
	File   string
	Line   int // 0 when not known
	Policy string
	Err    error
}

// Error returns "file:line: policy id: the mistake".
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
	}
	b.WriteString(": ")
	if p.Policy != "" {
		b.WriteString("policy " + strconv.Quote(p.Policy) + ": ")
	}
	b.WriteString(p.Err.Error())
	return b.String()
}

// Unwrap returns the mistake.
func (p *Problem) Unwrap() error { return p.Err }

// Set is a parsed, validated policy set, indexed by the tools of the
// catalog it was validated against.
type Set struct {
	// SHA256 is the hex SHA-256 of the set's text.
	SHA256 string
	ids    []string
	all    list            // every policy, in the order of the text
	file   string          // what problems name the text by
	byTool map[string]list // the policies whose scope admits each tool
	every  list            // the policies whose scope admits every tool
	// possible: the tools some @confirm permit's scope admits.
	possible map[string]bool
}

// IDs returns the ids of the set's policies, in the order of the text.
func (s *Set) IDs() []string { return slices.Clone(s.ids) }

// Possible reports whether some permit with @confirm admits the tool: a
// call of it may need a person's approval.
func (s *Set) Possible(tool string) bool { return s.possible[tool] }

type compiled struct {
	id      types.PolicyID
	p       *cedar.Policy
	line    int
	confirm bool
	reason  string
}

// list is policies in the order of the text, as Cedar iterates them.
type list []*compiled

// All implements cedar.PolicyIterator.
func (l list) All() iter.Seq2[types.PolicyID, *cedar.Policy] {
	return func(yield func(types.PolicyID, *cedar.Policy) bool) {
		for _, c := range l {
			if !yield(c.id, c.p) {
				return
			}
		}
	}
}

func (l list) find(id types.PolicyID) *compiled {
	for _, c := range l {
		if c.id == id {
			return c
		}
	}
	return nil
}

var inputPos = regexp.MustCompile(`at <input>:(\d+):(\d+)`)

// Parse parses and validates a policy set written in file, against the
// schema of every tool each policy's scope admits. Every problem is
// reported, joined, each a [*Problem].
func Parse(cat *Catalog, file string, text []byte) (*Set, error) {
	pl, err := cedar.NewPolicyListFromBytes(file, text)
	if err != nil {
		p := &Problem{File: file, Err: err}
		if m := inputPos.FindStringSubmatch(err.Error()); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Err = errors.New(strings.TrimPrefix(inputPos.ReplaceAllString(err.Error(), "at column "+m[2]), "parser error: "))
		}
		return nil, p
	}
	sum := sha256.Sum256(text)
	s := &Set{SHA256: hex.EncodeToString(sum[:]), file: file, byTool: map[string]list{}, possible: map[string]bool{}}
	var problems []error
	seen := map[string]int{}
	for _, p := range pl {
		pos := p.Position()
		id := string(p.Annotations()[annotationID])
		if id == "" {
			id = file + ":" + strconv.Itoa(pos.Line)
		}
		fail := func(err error) {
			problems = append(problems, &Problem{File: file, Line: pos.Line, Policy: id, Err: err})
		}
		if line, dup := seen[id]; dup {
			fail(fmt.Errorf("the id is taken by the policy at line %d; give each policy its own @id", line))
			continue
		}
		seen[id] = pos.Line
		s.ids = append(s.ids, id)
		c := &compiled{id: types.PolicyID(id), p: p}
		ann := p.Annotations()
		_, c.confirm = ann[annotationConfirm]
		c.reason = string(ann[annotationReason])
		if c.confirm && p.Effect() != types.Permit {
			fail(errors.New("@confirm is for a permit: a forbid refuses whatever a person would say"))
		}
		if _, ok := ann[annotationReason]; ok && p.Effect() != types.Forbid {
			fail(errors.New("@reason is for a forbid: it is the message of the refusal"))
		}
		c.line = pos.Line
		s.all = append(s.all, c)
	}
	problems = append(problems, s.admit(cat, nil)...)
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return s, nil
}

// With returns the set validated against and indexed by cat, a catalog
// of the set's own with the tools named changed or added: the other
// tools' validation and index stay as they are. It fails as [Parse]
// does when a policy does not validate against a changed tool.
func (s *Set) With(cat *Catalog, names []string) (*Set, error) {
	n := *s
	n.byTool, n.possible = maps.Clone(s.byTool), maps.Clone(s.possible)
	for _, name := range names {
		delete(n.byTool, name)
		delete(n.possible, name)
	}
	if problems := n.admit(cat, names); len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return &n, nil
}

// admit validates the set's policies against the tools named (every tool
// of cat when names is nil) and indexes them by those tools.
func (s *Set) admit(cat *Catalog, names []string) []error {
	var problems []error
	for _, c := range s.all {
		id := string(c.id)
		fail := func(err error) {
			problems = append(problems, &Problem{File: s.file, Line: c.line, Policy: id, Err: err})
		}
		ast := (*xast.Policy)(c.p.AST())
		tools, all, err := cat.admitted(ast)
		if err != nil {
			fail(err)
			continue
		}
		if names != nil {
			tools = slices.DeleteFunc(slices.Clone(tools), func(t string) bool { return !slices.Contains(names, t) })
		}
		for _, err := range cat.validate(id, ast, tools) {
			fail(err)
		}
		if all && names == nil {
			s.every = append(s.every, c)
		}
		for _, name := range tools {
			s.byTool[name] = append(s.byTool[name], c)
			if c.confirm {
				s.possible[name] = true
			}
		}
	}
	return problems
}

// admitted returns the tools a policy's resource scope admits; all
// reports a scope that admits any tool, those of the catalog and any
// other.
func (c *Catalog) admitted(p *xast.Policy) (tools []string, all bool, err error) {
	one := func(uid types.EntityUID) ([]string, bool, error) {
		if uid.Type != ToolType {
			return nil, false, fmt.Errorf("the resource is a Tool, not a %s", uid.Type)
		}
		if _, ok := c.tools[string(uid.ID)]; !ok {
			return nil, false, fmt.Errorf("unknown tool %q", string(uid.ID))
		}
		return []string{string(uid.ID)}, false, nil
	}
	switch r := p.Resource.(type) {
	case xast.ScopeTypeEq:
		return one(r.Entity)
	case xast.ScopeTypeIn:
		return one(r.Entity)
	case xast.ScopeTypeIsIn:
		return one(r.Entity)
	case xast.ScopeTypeIs:
		if r.Type != ToolType {
			return nil, false, fmt.Errorf("the resource is a Tool, not a %s", r.Type)
		}
	}
	return c.names, true, nil
}

// validate checks a policy against the schema of each tool; a mistake
// found for several tools is reported once, naming them.
func (c *Catalog) validate(id string, p *xast.Policy, tools []string) []error {
	byMsg := map[string][]string{}
	var order []string
	for _, name := range tools {
		e := c.tools[name]
		e.load()
		err := e.err
		if err == nil {
			err = e.validator.Policy(id, p)
		}
		if err == nil {
			continue
		}
		for _, msg := range messages(err) {
			if _, ok := byMsg[msg]; !ok {
				order = append(order, msg)
			}
			byMsg[msg] = append(byMsg[msg], name)
		}
	}
	var errs []error
	for _, msg := range order {
		names := byMsg[msg]
		what := "tool " + strconv.Quote(names[0])
		if len(names) > 1 {
			what = fmt.Sprintf("%d tools (%s)", len(names), strings.Join(names, ", "))
		}
		errs = append(errs, fmt.Errorf("%s (against the schema of %s)", msg, what))
	}
	return errs
}

// messages flattens a validation error into its lines.
func messages(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, messages(e)...)
		}
		return out
	}
	// The validator names the policy by the id it was given, which the
	// problem names already.
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, "`, "); ok && strings.HasPrefix(msg, "for policy `") {
		msg = rest
	}
	return []string{msg}
}

// Request is one question to the policies.
type Request struct {
	Action      string // List, Call or Approve
	Principal   string
	Permissions []string
	Metadata    map[string]string
	Tool        string
	Input       []byte // JSON: the validated input of call and approve
	Door        string
	Task        bool   // call: it runs as a task
	Requester   string // approve: the call's principal
}

// Decision is the answer.
type Decision struct {
	Allow bool
	// Policies are the ids of the determining policies: the forbids that
	// refused, the permits that allowed, or the policies that failed to
	// evaluate; none when no policy permits.
	Policies []string
	// Confirm: a determining permit carries @confirm.
	Confirm bool
	// Reason is the @reason of a determining forbid; "" for none.
	Reason string
	// Errors are the evaluation errors, "id: message", which refuse a call
	// or an approval and hide a tool from a list.
	Errors []string
}

// entities holds the two entities a request reads: no map to make.
type entities struct{ principal, tool types.Entity }

func (e *entities) Get(uid types.EntityUID) (types.Entity, bool) {
	switch uid {
	case e.principal.UID:
		return e.principal, true
	case e.tool.UID:
		return e.tool, true
	}
	return types.Entity{}, false
}

var actions = map[string]types.EntityUID{
	List:    types.NewEntityUID(ActionType, List),
	Call:    types.NewEntityUID(ActionType, Call),
	Approve: types.NewEntityUID(ActionType, Approve),
}

// Decide answers one request; it fails closed: an evaluation error
// refuses whatever the other policies say, and no permit refuses.
func (s *Set) Decide(cat *Catalog, req Request) Decision {
	return s.decide(cat, req, principalEntity(req.Principal, req.Permissions, req.Metadata))
}

func (s *Set) decide(cat *Catalog, req Request, principal types.Entity) Decision {
	ents := &entities{principal: principal}
	policies, ok := s.byTool[req.Tool]
	e := cat.tools[req.Tool]
	var in *typ
	if e != nil {
		ents.tool, in = e.entity, e.in
	} else {
		uid := types.NewEntityUID(ToolType, types.String(req.Tool))
		ents.tool = types.Entity{UID: uid}
		in = anyType
	}
	if !ok {
		policies = s.every
	}
	ctx := types.RecordMap{"door": types.String(req.Door)}
	switch req.Action {
	case Call, Approve:
		ctx["input"] = input(in, req.Input)
		ctx["input_json"] = types.String(req.Input)
		if req.Action == Call {
			ctx["task"] = types.Boolean(req.Task)
		} else {
			ctx["requester"] = types.NewEntityUID(PrincipalType, types.String(req.Requester))
		}
	}
	dec, diag := cedar.Authorize(policies, ents, cedar.Request{
		Principal: ents.principal.UID,
		Action:    actions[req.Action],
		Resource:  ents.tool.UID,
		Context:   types.NewRecord(ctx),
	})
	var d Decision
	if len(diag.Errors) > 0 {
		for _, e := range diag.Errors {
			d.Policies = append(d.Policies, string(e.PolicyID))
			d.Errors = append(d.Errors, string(e.PolicyID)+": "+e.Message)
		}
		return d
	}
	d.Allow = dec == cedar.Allow
	for _, r := range diag.Reasons {
		d.Policies = append(d.Policies, string(r.PolicyID))
		c := policies.find(r.PolicyID)
		if c == nil {
			continue
		}
		if c.confirm && d.Allow {
			d.Confirm = true
		}
		if c.reason != "" && !d.Allow && d.Reason == "" {
			d.Reason = c.reason
		}
	}
	return d
}

// principalEntity is the caller: its permissions, and its metadata as
// tags.
func principalEntity(name string, perms []string, meta map[string]string) types.Entity {
	ps := make([]types.Value, len(perms))
	for i, p := range perms {
		ps[i] = types.String(p)
	}
	var tags types.Record
	if len(meta) > 0 {
		m := make(types.RecordMap, len(meta))
		for _, k := range slices.Sorted(maps.Keys(meta)) {
			m[types.String(k)] = types.String(meta[k])
		}
		tags = types.NewRecord(m)
	}
	return types.Entity{
		UID:        types.NewEntityUID(PrincipalType, types.String(name)),
		Attributes: types.NewRecord(types.RecordMap{"permissions": types.NewSet(ps...)}),
		Tags:       tags,
	}
}
