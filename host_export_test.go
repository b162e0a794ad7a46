package carmy

import (
	"log/slog"
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
