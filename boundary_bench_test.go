package carmy

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// discardWriter is the cheapest ResponseWriter, so that the benchmark
// measures the handlers.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header       { return d.h }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// BenchmarkBoundary measures what the checks every request goes through
// cost: the boundary around a handler that does nothing, against that
// handler alone.
func BenchmarkBoundary(b *testing.B) {
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	r := &Registry{logger: slog.New(slog.DiscardHandler), bodyLimit: DefaultBodyLimit}
	protected := r.protect(noop, nil, nil)
	local := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000})
	request := func(method, body string, header ...string) *http.Request {
		req, _ := http.NewRequestWithContext(local, method, "http://127.0.0.1:3000/tools/x", strings.NewReader(body))
		if body == "" {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	requests := []struct {
		name string
		req  *http.Request
	}{
		{"GET", request(http.MethodGet, "")},
		{"GET from the server's page", request(http.MethodGet, "", "Origin", "http://127.0.0.1:3000", "Sec-Fetch-Site", "same-origin")},
		{"POST with a body", request(http.MethodPost, `{"name":"x"}`, "Content-Type", "application/json")},
	}
	for _, rq := range requests {
		for _, h := range []struct {
			name string
			h    http.Handler
		}{{"bare", noop}, {"protected", protected}} {
			b.Run(rq.name+"/"+h.name, func(b *testing.B) {
				w := discardWriter{http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					req := *rq.req // the boundary replaces the body
					h.h.ServeHTTP(w, &req)
				}
			})
		}
	}
}
