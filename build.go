package carmy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"strings"

	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/guard"
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
		t.askFirst = d.opts.taskAfterInput // a mounted tool's whose upstream decides
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
	case d.impl != nil && t.meta.InputSchema != nil: // declared, and declaredSchemas said why it cannot be used
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
	case d.impl != nil && t.meta.OutputSchema != nil: // declared, and declaredSchemas said why it cannot be used
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

// commentsFor re-keys, for the binary that runs, the comments a package
// main registers. carmy gen keys a command's declarations "main.Greet",
// "main.greet", as the command's binary knows them; a test binary of the
// same package (go test, carmy schema) knows them by the package's import
// path instead, "example.com/hello.Greet". pkg is the registering
// package's path as that binary knows it; no other package can reach the
// types of a package main, so every "main." key is its own.
func commentsFor(pkg string, comments map[string]string) map[string]string {
	if pkg == "" || pkg == "main" {
		return comments
	}
	out := make(map[string]string, len(comments))
	for k, v := range comments {
		if rest, ok := strings.CutPrefix(k, "main."); ok {
			k = pkg + "." + rest
		}
		out[k] = v
	}
	return out
}

// callerPackage returns the import path of the package of the function
// that called its caller; "" when unknown.
func callerPackage() string {
	var pcs [1]uintptr
	if runtime.Callers(3, pcs[:]) == 0 { // runtime.Callers, callerPackage, its caller
		return ""
	}
	frame, _ := runtime.CallersFrames(pcs[:]).Next()
	return funcPackage(frame.Function)
}

// funcPackage is the package path of a function's full name:
// "example.com/hello" for "example.com/hello.init.0".
func funcPackage(name string) string {
	slash := strings.LastIndexByte(name, '/') + 1
	dot := strings.IndexByte(name[slash:], '.')
	if dot < 0 {
		return ""
	}
	return unescapeFuncName(name[:slash+dot])
}

// unescapeFuncName writes a function's full name with its package's import
// path as reflect and carmy gen spell it: the runtime escapes a dot in the
// path's last element as %2e ("example.com/my%2etool.greet").
func unescapeFuncName(name string) string {
	slash := strings.LastIndexByte(name, '/') + 1
	return name[:slash] + strings.ReplaceAll(name[slash:], "%2e", ".")
}

// configure applies the configuration of App (carmy.toml and CARMY_*
// variables) to the builder; problems are reported by Build, Listen and
// Run, each a *BuildError whose Site is the file and line or the variable.
func (b *Builder) configure() {
	c, err := config.FromEnv()
	for _, e := range flatten(err) {
		var p *config.Problem
		if errors.As(e, &p) {
			e = &BuildError{Site: p.Site, Err: p.Err}
		}
		b.errs = append(b.errs, e)
	}
	if c.Listen != "" {
		b.addr = c.Listen
	}
	if c.BodyLimit > 0 {
		b.bodyLimit = c.BodyLimit
	}
	if c.Timeout > 0 {
		b.timeout = c.Timeout
	}
	if c.DrainTimeout > 0 {
		b.drain = c.DrainTimeout
	}
	if c.LogLevel != "" {
		var level slog.Level
		_ = level.UnmarshalText([]byte(c.LogLevel)) // checked by the config package
		b.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	if c.AllowUnauthenticated {
		b.allowAnonymous = true
	}
	if c.StoreURL != "" {
		b.storeURL = c.StoreURL
	}
	if c.AuditFile != "" {
		b.AuditFile(c.AuditFile)
	}
	if c.AuditURL != "" {
		b.AuditURL(c.AuditURL)
	}
	if len(c.Tokens) > 0 {
		tokens := make([]Token, len(c.Tokens))
		for i, t := range c.Tokens {
			tokens[i] = Token{SHA256: t.SHA256, Principal: t.Principal, Permissions: t.Permissions}
		}
		b.auth = BearerTokens(tokens...) // the tokens that passed the checks
	}
	for _, h := range c.AllowedHosts.Values {
		k, err := guard.ParseHost(h)
		if err != nil {
			b.errs = append(b.errs, &BuildError{Site: c.AllowedHosts.Site, Err: fmt.Errorf("allowed host %q: %v", h, err)})
			continue
		}
		b.allowHosts = append(b.allowHosts, k)
	}
	for _, o := range c.AllowedOrigins.Values {
		if err := guard.CheckOrigin(o); err != nil {
			b.errs = append(b.errs, &BuildError{Site: c.AllowedOrigins.Site, Err: fmt.Errorf("allowed origin %q: %v", o, err)})
			continue
		}
		b.allowOrigins = append(b.allowOrigins, o)
	}
	if c.SessionTimeout > 0 {
		b.sessionTimeout = c.SessionTimeout
	}
	if c.MaxSessions > 0 {
		b.maxSessions = c.MaxSessions
	}
	if e := c.EffectPermissions; e.ByEffect != nil {
		perms := map[Effect]string{}
		for name, p := range e.ByEffect {
			effect, _ := ParseEffect(name) // the names were checked
			perms[effect] = p
		}
		b.effectPerms, b.effectPermsSite = perms, e.Site
	}
	b.configureRateLimits(c.RateLimits)
	b.configureMounts(c.Mounts)
	if c.IdempotencyWindow > 0 {
		b.window = c.IdempotencyWindow
	}
	if c.PublicURL != "" {
		b.publicURL = c.PublicURL
	}
	if c.StateKey != nil {
		b.StateKey(c.StateKey)
	}
	if c.ToolSearch {
		b.toolSearch = true
	}
	b.deferred = c.DeferredTools
	if c.TaskTTL > 0 {
		b.taskTTL = c.TaskTTL
	}
	if c.PolicyShadow {
		b.policy.shadow = true
	}
	if c.PolicyPoll > 0 {
		b.policy.poll = c.PolicyPoll
	}
	if c.PolicyFile != "" {
		b.PolicyFile(c.PolicyFile)
	}
	if o := c.OAuth; o.Issuer != "" && o.Audience != "" {
		b.oauth = &oauthSetting{OAuthConfig{Issuer: o.Issuer, Audience: o.Audience, Scopes: o.Scopes}, o.Site}
	}
}

// flatten undoes errors.Join, so that the builder holds one error per
// problem.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
