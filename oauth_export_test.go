package carmy

import "time"

// SetKeyRefreshInterval sets the least time between two fetches of an
// OAuth issuer's keys for a test; the returned function restores it.
// Tests that call it must not run in parallel with others that use OAuth.
func SetKeyRefreshInterval(d time.Duration) (restore func()) {
	old := keyRefreshInterval
	keyRefreshInterval = d
	return func() { keyRefreshInterval = old }
}
