package carmy

import (
	"context"
	"log/slog"
	"net"
	"time"
)

// BuilderSettings shows what a builder's configuration set, for tests of
// App's mapping of carmy.toml and CARMY_* variables.
type BuilderSettings struct {
	Addr                 string
	BodyLimit            int64
	Timeout, Drain       time.Duration
	Logger               *slog.Logger
	AllowUnauthenticated bool
	Authenticator        Authenticator
	Signals              bool
	StoreURL             string
	Errs                 []error
}

func SettingsOf(b *Builder) BuilderSettings {
	return BuilderSettings{b.addr, b.bodyLimit, b.timeout, b.drain, b.logger, b.allowAnonymous, b.auth, b.signals, b.storeURL, b.errs}
}

// ServeAsHost serves r on ln as [Builder.Listen] does, its tasks drained
// at the shutdown, for tests of a host's shutdown with a registry built
// beforehand.
func ServeAsHost(ctx context.Context, r *Registry, ln net.Listener, drain time.Duration) error {
	return r.http.serve(ctx, ln, drain, true)
}
