package carmy

import (
	"log/slog"
	"time"
)

// SetServerTimeouts shortens the server's read-header and idle timeouts
// for a test; the returned function restores them. Tests that call it must
// not run in parallel with others that serve.
func SetServerTimeouts(readHeader, idle time.Duration) (restore func()) {
	oldHeader, oldIdle := readHeaderTimeout, idleTimeout
	readHeaderTimeout, idleTimeout = readHeader, idle
	return func() { readHeaderTimeout, idleTimeout = oldHeader, oldIdle }
}

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
