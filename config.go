package carmy

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/carmy-dev/carmy/internal/config"
	"github.com/carmy-dev/carmy/internal/guard"
)

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
	if c.IdempotencyWindow > 0 {
		b.window = c.IdempotencyWindow
	}
	if c.PublicURL != "" {
		b.publicURL = c.PublicURL
	}
	if c.StateKey != nil {
		b.StateKey(c.StateKey)
	}
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
