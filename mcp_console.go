package carmy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// loopbackConsole is the registry's [Registry.Handler] served on a
// loopback port that the system picks, for the person at the client of a
// single-client transport (stdio) to decide approvals in the console:
// opened the first time such a client needs it, closed with the registry.
type loopbackConsole struct {
	once sync.Once
	base string
	err  error
}

// localConsole returns the base URL of the registry's loopback console,
// opening it on the first call.
func (r *Registry) localConsole(ctx context.Context) (string, error) {
	lc := &r.loopback
	lc.once.Do(func() {
		if r.streams.Err() != nil {
			lc.err = errors.New("the registry is closed")
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lc.err = err
			return
		}
		srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
		go func() { _ = srv.Serve(ln) }()
		context.AfterFunc(r.streams, func() { _ = srv.Close() })
		lc.base = "http://" + ln.Addr().String()
		r.logger.LogAttrs(ctx, slog.LevelInfo, "carmy: serving the console for approvals", slog.String("addr", ln.Addr().String()))
	})
	return lc.base, lc.err
}
