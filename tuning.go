package carmy

import (
	"io"
	"os"
	"time"
)

// tuning holds the serving settings that no option sets, because their
// defaults suit every host: the server's timeouts against slow clients and
// where the console URL is announced. Tests shorten the timeouts and catch
// the announcement; the settings belong to each builder, and to the
// registry it builds, rather than to the package, so that those tests run
// in parallel with the others. The zero value is the defaults.
type tuning struct {
	bodyReadTimeout   time.Duration // 0: bodyReadTimeout
	readHeaderTimeout time.Duration // 0: readHeaderTimeout
	idleTimeout       time.Duration // 0: idleTimeout

	// consoleOut receives the console URL when consoleTerminal says a
	// person reads it; nil is standard error, a terminal when it is one.
	consoleOut      io.Writer
	consoleTerminal bool
}

func (t *tuning) bodyRead() time.Duration {
	if t.bodyReadTimeout > 0 {
		return t.bodyReadTimeout
	}
	return bodyReadTimeout
}

func (t *tuning) readHeader() time.Duration {
	if t.readHeaderTimeout > 0 {
		return t.readHeaderTimeout
	}
	return readHeaderTimeout
}

func (t *tuning) idle() time.Duration {
	if t.idleTimeout > 0 {
		return t.idleTimeout
	}
	return idleTimeout
}

// console returns where the console URL is announced, and whether a
// person reads it there.
func (t *tuning) console() (w io.Writer, terminal bool) {
	if t.consoleOut != nil {
		return t.consoleOut, t.consoleTerminal
	}
	return os.Stderr, isTerminal(os.Stderr)
}
