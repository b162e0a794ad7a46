package carmy

import (
	"crypto/rand"
	"sync"

	"github.com/google/uuid"
)

// newExecutionID returns a fresh UUIDv7 (RFC 9562): time-ordered, with its
// random bits from the operating system's generator, read in blocks so that
// an id costs no system call.
func newExecutionID() (string, error) {
	id, err := uuid.NewV7FromReader(&entropy)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

var entropy randomBlocks

// randomBlocks serves crypto/rand bytes from a refilled buffer.
type randomBlocks struct {
	mu  sync.Mutex
	buf [4096]byte
	pos int
}

func (r *randomBlocks) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for n < len(p) {
		if r.pos == 0 || r.pos == len(r.buf) {
			if _, err := rand.Read(r.buf[:]); err != nil {
				return n, err
			}
			r.pos = 0
		}
		c := copy(p[n:], r.buf[r.pos:])
		r.pos += c
		n += c
	}
	return n, nil
}
