package carmy

import "time"

// SetBodyReadTimeout shortens the time a client has to send a request's
// body, for a test; the returned function restores it. Tests that call it
// must not run in parallel with others that serve.
func SetBodyReadTimeout(d time.Duration) (restore func()) {
	old := bodyReadTimeout
	bodyReadTimeout = d
	return func() { bodyReadTimeout = old }
}
