package carmy

import (
	"errors"
	"log/slog"
	"os"

	"github.com/carmy-dev/carmy/internal/config"
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
