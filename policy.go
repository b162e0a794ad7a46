package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/carmy-dev/carmy/internal/policy"
	"github.com/carmy-dev/carmy/store"
)

// DefaultPolicyPoll is how often a policy file is read for changes
// ([Builder.PolicyFile]).
const DefaultPolicyPoll = 2 * time.Second

// Policies installs a fixed set of Cedar policies, in the text given:
// who may list, call and approve which tool, with which arguments. With a
// policy set installed a call no policy permits is refused; see
// docs/policies.md for the model (Principal, the actions list, call and
// approve, Tool, the call's context) and the mapping of a tool's input to
// Cedar. A set that does not parse or validate against the tools' schemas
// is a Build error naming each mistake's line. Policies only tighten what
// the code declares: no policy lifts a [Requires], a limit or a
// [RequireConfirmation].
//
// Its policies' ids are their @id annotation, else "policies:<line>".
// Called again, or with [Builder.PolicyFile], the last call wins.
func (b *Builder) Policies(text string) *Builder {
	b.policy = policySource{text: []byte(text), name: "policies", poll: b.policy.poll, shadow: b.policy.shadow, set: true}
	return b
}

// PolicyFile installs the Cedar policies of the file at path, read at
// Build, as [Builder.Policies] does; then the file is read every
// [DefaultPolicyPoll] ([Builder.PolicyPoll]) and, once a change has stayed
// the same over two reads, its new set replaces the one in force. A new
// set that does not parse or validate leaves the one in force, is logged
// and audited (decision policy_rejected); a deleted file keeps the last
// set, with a warning. Policies' ids are their @id annotation, else
// "<path>:<line>". carmy.toml's policy_file and CARMY_POLICY_FILE set it.
func (b *Builder) PolicyFile(path string) *Builder {
	b.policy = policySource{file: path, name: path, poll: b.policy.poll, shadow: b.policy.shadow, set: true}
	return b
}

// PolicyMode sets how policies act: "enforce" (the default) or "shadow",
// in which every decision is evaluated, logged and audited, and none is
// enforced: a rollout's first step. carmy.toml's policy_mode sets it.
func (b *Builder) PolicyMode(mode string) *Builder {
	switch mode {
	case "enforce", "shadow":
		b.policy.shadow = mode == "shadow"
	default:
		b.errs = append(b.errs, &BuildError{Site: callerSite(2), Err: fmt.Errorf("PolicyMode: %q is not a mode; use \"enforce\" or \"shadow\"", mode)})
	}
	return b
}

// PolicyPoll sets how often the policy file is read for changes; the
// default is [DefaultPolicyPoll]. carmy.toml's policy_poll sets it.
func (b *Builder) PolicyPoll(d time.Duration) *Builder {
	if d <= 0 {
		b.errs = append(b.errs, &BuildError{Site: callerSite(2), Err: fmt.Errorf("PolicyPoll: %v is not a positive duration", d)})
		return b
	}
	b.policy.poll = d
	return b
}

// policySource is the policies given to the builder.
type policySource struct {
	set    bool
	text   []byte // Policies', or the file's as read at Build
	file   string // PolicyFile's
	name   string // what ids and problems name the text by
	shadow bool
	poll   time.Duration
}

// policies is a registry's policy engine.
type policies struct {
	eng    *policy.Engine
	shadow bool
}

// buildPolicies parses and validates the policies given to the builder
// against the registry's tools; every mistake is a *BuildError whose Site
// is the file and line.
func (b *Builder) buildPolicies(r *Registry) []error {
	src := &b.policy
	if !src.set {
		return nil
	}
	if src.file != "" {
		text, err := os.ReadFile(src.file)
		if err != nil {
			return []error{&BuildError{Site: src.file, Err: fmt.Errorf("policy file: %w", err)}}
		}
		src.text = text
	}
	tools := make([]policy.Tool, 0, len(r.tab().tools))
	for _, t := range r.tab().tools {
		tools = append(tools, policyTool(t))
	}
	cat := policy.NewCatalog(tools)
	set, err := policy.Parse(cat, src.name, src.text)
	if err != nil {
		return policyProblems(err)
	}
	r.policies = &policies{eng: policy.NewEngine(cat, set), shadow: src.shadow}
	return nil
}

// policyProblems turns the problems of a policy set into build errors.
func policyProblems(err error) []error {
	var errs []error
	for _, e := range flatten(err) {
		var p *policy.Problem
		if !errors.As(e, &p) {
			errs = append(errs, &BuildError{Err: e})
			continue
		}
		site := p.File
		if p.Line > 0 {
			site = fmt.Sprintf("%s:%d", p.File, p.Line)
		}
		msg := p.Err
		if p.Policy != "" {
			msg = fmt.Errorf("policy %q: %w", p.Policy, p.Err)
		}
		errs = append(errs, &BuildError{Site: site, Err: msg})
	}
	return errs
}

// policyTool is a tool as policies see it; server is the one place the
// Tool entity's server attribute comes from.
func policyTool(t *tool) policy.Tool {
	return policy.Tool{Name: t.meta.Name, Effect: t.meta.Effect.String(), Requires: t.meta.Requires, Server: t.server(), InputSchema: t.meta.InputSchema}
}

// recatalog validates the policies in force against ts, tools that come
// or change while the registry serves, and puts them in the policies'
// catalog, so that they are governed at once; without policies it does
// nothing. When the policies fail to validate against one of them,
// nothing changes: the tools stay out, and the error says why.
func (p *policies) recatalog(ts []*tool) error {
	if p == nil {
		return nil
	}
	tools := make([]policy.Tool, len(ts))
	for i, t := range ts {
		tools[i] = policyTool(t)
	}
	if err := p.eng.Recatalog(tools...); err != nil {
		return fmt.Errorf("%w: %w", errPoliciesRefuse, err)
	}
	return nil
}

// errPoliciesRefuse is why a tool is not served: the policies in force do
// not validate against it. A new set of policies may.
var errPoliciesRefuse = errors.New("the policies in force do not validate against it")

// watchPolicies starts reading the policy file for changes, until the
// registry closes.
func (b *Builder) watchPolicies(r *Registry) {
	if r.policies == nil || b.policy.file == "" {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	poll := b.policy.poll
	if poll == 0 {
		poll = DefaultPolicyPoll
	}
	go func() {
		defer close(done)
		r.policies.eng.Watch(ctx, b.policy.file, b.policy.text, poll, r.policyChanged)
	}()
	r.closers = append(r.closers, func() error { stop(); <-done; return nil })
}

// The audit decisions of a policy file's changes.
const (
	// AuditPolicyReloaded: the policy file changed and its new set is in
	// force ([AuditRecord.PolicySet]).
	AuditPolicyReloaded AuditDecision = "policy_reloaded"
	// AuditPolicyRejected: the policy file changed to a set that does not
	// parse or validate ([AuditRecord.Detail] says why); the set named by
	// PolicySet stays in force.
	AuditPolicyRejected AuditDecision = "policy_rejected"
)

// policyChanged logs and audits what the policy file did.
func (r *Registry) policyChanged(ev policy.Event) {
	rec := AuditRecord{Time: time.Now(), PolicySet: ev.Set.SHA256}
	switch ev.Kind {
	case policy.Reloaded:
		r.logger.Info("carmy: policies reloaded", "policy_set", ev.Set.SHA256, "policies", len(ev.Set.IDs()))
		rec.Decision = AuditPolicyReloaded
		defer r.remount() // the tools the old set refused may fit the new one
	case policy.Rejected:
		r.logger.Error("carmy: the changed policy file is refused; the policies in force stay", "policy_set", ev.Set.SHA256, "error", ev.Err)
		rec.Decision, rec.Detail = AuditPolicyRejected, ev.Err.Error()
	default:
		r.logger.Warn("carmy: the policy file cannot be read; the policies in force stay", "policy_set", ev.Set.SHA256, "error", ev.Err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.writeAudit(ctx, rec) // a failure is logged and counted
}

// policyOutcome is what the policies decided about a call, for its audit
// record.
type policyOutcome struct {
	set     *policy.Set // the set that decided
	ids     []string
	detail  string // shadow mode: what enforcing would have done
	confirm bool   // a determining permit asks for a person's approval
}

// doorOf is the door a call or list came by, as the policies name it.
func doorOf(ctx context.Context) string {
	if d := policy.DoorOf(ctx); d != "" {
		return d
	}
	if httpRequestOf(ctx) != nil {
		return "http"
	}
	return "go"
}

// callRequest is the question of whether req may call t.
func callRequest(ctx context.Context, t *tool, req *Request) policy.Request {
	c := &req.Call
	return policy.Request{Action: policy.Call, Principal: c.Principal, Permissions: c.Permissions, Metadata: c.Metadata,
		Tool: t.meta.Name, Input: inputOrEmpty(c.Input), Door: doorOf(ctx), Task: req.task != nil}
}

func inputOrEmpty(in []byte) []byte {
	if len(in) == 0 || strings.TrimSpace(string(in)) == "null" {
		return []byte("{}")
	}
	return in
}

// policyCall is the policy stage: whether the policies in force let the
// caller call t with its validated input. A permit with @confirm makes
// the call need a person's approval, as [RequireConfirmation] does.
func (r *Registry) policyCall(ctx context.Context, t *tool, req *Request) error {
	d, set := r.policies.eng.Decide(callRequest(ctx, t, req))
	o := &policyOutcome{set: set, ids: d.Policies}
	req.policy = o
	if d.Allow && len(d.Errors) == 0 {
		o.confirm = d.Confirm && !r.policies.shadow
		return nil
	}
	e := policyRefusal(t.meta.Name, "call", d)
	if r.policies.shadow {
		o.detail = "shadow: " + e.Message
		r.logger.LogAttrs(ctx, slog.LevelWarn, "carmy: the policies would refuse the call (shadow mode)",
			slog.String("principal", req.Call.Principal), slog.String("tool", t.meta.Name), slog.Any("policies", d.Policies))
		return nil
	}
	return r.refused(ctx, t, &req.Call, e)
}

// policyAgain decides a call again as it uses its approval, when the
// policies changed since it was decided: a call approved under a set
// since replaced runs only if the set in force lets it.
func (r *Registry) policyAgain(ctx context.Context, t *tool, req *Request) error {
	if r.policies == nil || req.policy != nil && req.policy.set == r.policies.eng.Set() {
		return nil
	}
	return r.policyCall(ctx, t, req)
}

// policyRefusal is the refusal of what d decided against: a
// permission_denied naming the determining policies (details.policy).
func policyRefusal(tool, action string, d policy.Decision) *Error {
	ids := d.Policies
	if ids == nil {
		ids = []string{}
	}
	e := &Error{Code: CodePermissionDenied, Details: map[string]any{"policy": ids}}
	switch {
	case len(d.Errors) > 0:
		e.Message = fmt.Sprintf("the policies refuse to %s %s: policy %s failed to evaluate (%s), and a policy that fails refuses; tell the user", action, tool, strings.Join(ids, ", "), strings.Join(d.Errors, "; "))
	case d.Reason != "":
		e.Message = d.Reason
	case len(ids) > 0:
		e.Message = fmt.Sprintf("the policies refuse to %s %s: forbidden by %s; tell the user, who can ask for access", action, tool, strings.Join(ids, ", "))
	default:
		e.Message = fmt.Sprintf("no policy permits this caller to %s %s; tell the user, who can ask for access", action, tool)
	}
	return e
}

// policyListed reports whether the policies let the caller cc see t in a
// list that came by door.
func (r *Registry) policyListed(cc *Context, t *tool, door string) bool {
	if r.policies == nil || r.policies.shadow {
		return true
	}
	return r.policies.eng.Listed(policy.Request{Principal: cc.Principal, Permissions: cc.Permissions.sorted, Metadata: cc.Metadata, Tool: t.meta.Name, Door: door})
}

// confirmationFor is what a list says of the confirmation a call of t
// needs: [ConfirmationRequired] when the tool declares it,
// [ConfirmationPossible] when some permit with @confirm admits the tool,
// else [ConfirmationNone]. Every list and search says it from here.
func (r *Registry) confirmationFor(t *tool) Confirmation {
	if t.meta.Confirmation == ConfirmationNone && r.policies != nil && !r.policies.shadow && r.policies.eng.Set().Possible(t.meta.Name) {
		return ConfirmationPossible
	}
	return t.meta.Confirmation
}

// policyApprove is the approve decision: whether decider may decide
// approval a, asked by door. It never lets the call's own principal
// decide: that is refused before the policies are asked.
func (r *Registry) policyApprove(ctx context.Context, a store.Approval, decider Identity, door string) *Error {
	if r.policies == nil {
		return nil
	}
	d, set := r.policies.eng.Decide(policy.Request{Action: policy.Approve, Principal: decider.Principal, Permissions: decider.Permissions,
		Metadata: decider.Metadata, Tool: a.Tool, Input: inputOrEmpty(a.Input), Door: door, Requester: a.Principal})
	if d.Allow && len(d.Errors) == 0 {
		return nil
	}
	e := policyRefusal(a.Tool, "decide an approval of", d)
	e.Details["approval_id"] = a.ID
	refused := a
	refused.Approver = ""
	if r.policies.shadow {
		r.logger.LogAttrs(ctx, slog.LevelWarn, "carmy: the policies would refuse the decision (shadow mode)",
			slog.String("approval_id", a.ID), slog.String("decider", decider.Principal), slog.Any("policies", d.Policies))
		return nil
	}
	r.auditApproval(ctx, refused, AuditRefused, decider.Principal, CodePermissionDenied, func(rec *AuditRecord) {
		rec.PolicySet, rec.Policies = set.SHA256, d.Policies
	})
	return e
}
