package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// CodeTTL is how long a one-time code may wait for its first use: long
// enough for a person to open the link their client shows them, short
// enough that a link found later in a log or a browser's history grants
// nothing.
const CodeTTL = 5 * time.Minute

// maxCodes bounds the codes that wait for their use: each link a client
// is sent makes one, and a flood of them must not grow without bound. At
// the bound the oldest goes first.
const maxCodes = 256

// Codes hands out one-time codes for a console secret, which travels in a
// link only as such a code: the console's page exchanges it for the
// secret on its first load. A code counts once, and only within its
// time to live, so that a link read from a process list or a log after
// the person opened it grants nothing. Safe for concurrent use; the zero
// value is ready, with [CodeTTL].
type Codes struct {
	// TTL replaces [CodeTTL] when positive (tests shorten it).
	TTL time.Duration

	mu    sync.Mutex
	codes []code // oldest first
}

type code struct {
	value   string
	expires time.Time
}

// Mint returns a new code, good once until its time to live ends.
func (c *Codes) Mint() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	v := hex.EncodeToString(b[:])
	ttl := c.TTL
	if ttl <= 0 {
		ttl = CodeTTL
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(now)
	if len(c.codes) >= maxCodes {
		c.codes = c.codes[1:]
	}
	c.codes = append(c.codes, code{v, now.Add(ttl)})
	return v
}

// Redeem reports whether s is a code minted here, not used before and not
// expired, and uses it up.
func (c *Codes) Redeem(s string) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(now)
	for i, k := range c.codes {
		if subtle.ConstantTimeCompare([]byte(k.value), []byte(s)) == 1 {
			c.codes = append(c.codes[:i], c.codes[i+1:]...)
			return true
		}
	}
	return false
}

// prune drops the expired codes, which are the oldest.
func (c *Codes) prune(now time.Time) {
	n := 0
	for n < len(c.codes) && !now.Before(c.codes[n].expires) {
		n++
	}
	c.codes = c.codes[n:]
}
