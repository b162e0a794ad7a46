package naming

import (
	"errors"
	"time"
)

// CheckRate says why n calls per period is not a rate limit. Build and carmy
// vet both ask it, so that vet reports a bad RateLimit in Build's words.
func CheckRate(n int64, per time.Duration) error {
	switch {
	case n <= 0:
		return errors.New("the number of calls must be positive")
	case per <= 0:
		return errors.New("the period must be positive")
	case per/time.Duration(n) < time.Microsecond:
		return errors.New("that is more than one call per microsecond; limit calls over a longer period")
	}
	return nil
}
