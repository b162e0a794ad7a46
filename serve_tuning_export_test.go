package carmy

import (
	"context"
	"io"
	"time"
)

// SetConsoleOut makes the servers of b's registry print their console URL
// to w, taking w for a terminal or not.
func SetConsoleOut(b *Builder, w io.Writer, terminal bool) *Builder {
	b.tuning.consoleOut, b.tuning.consoleTerminal = w, terminal
	return b
}

// SetBodyReadTimeout sets the time a client of b's registry has to send a
// request's body.
func SetBodyReadTimeout(b *Builder, d time.Duration) *Builder {
	b.tuning.bodyReadTimeout = d
	return b
}

// SetServerTimeouts sets the read-header and idle timeouts of the servers
// of b's registry.
func SetServerTimeouts(b *Builder, readHeader, idle time.Duration) *Builder {
	b.tuning.readHeaderTimeout, b.tuning.idleTimeout = readHeader, idle
	return b
}

// OAuthKeyRefresh is [OAuth] with the least time between two fetches of
// the issuer's keys; 0 lets every fetch through.
func OAuthKeyRefresh(ctx context.Context, cfg OAuthConfig, interval time.Duration) (Authenticator, error) {
	return oauth(ctx, cfg, interval)
}

// SetLimitClock makes the in-process limiter of b's registry read the time
// from now.
func SetLimitClock(b *Builder, now func() time.Time) *Builder {
	b.tuning.limitClock = now
	return b
}

// SetCodeTTL sets how long the one-time codes of console links that b's
// registry sends wait for their use.
func SetCodeTTL(b *Builder, d time.Duration) *Builder {
	b.tuning.codeTTL = d
	return b
}

// SetTaskLease sets the lease of the tasks b's registry runs: a task whose
// host stops renewing it is lost that long after.
func SetTaskLease(b *Builder, d time.Duration) *Builder {
	b.tuning.taskLease = d
	return b
}

// SetPersonProgress sets how often a call of b's registry that waits for
// a person over a connection sends its client progress.
func SetPersonProgress(b *Builder, d time.Duration) *Builder {
	b.tuning.personProgress = d
	return b
}
