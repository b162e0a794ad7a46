package matrix_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/carmy-dev/carmy/bench/internal/matrix"
)

// TestEveryCellAnswers: every server of the matrix answers the matrix's
// call correctly on every door it serves, from two callers of their own
// (connections and sessions), so that a throughput counts correct answers
// only.
func TestEveryCellAnswers(t *testing.T) {
	for _, c := range matrix.Cells() {
		t.Run(c.Impl+"/"+c.Door, func(t *testing.T) {
			s, err := matrix.NewServer(c.Impl, filepath.Join(t.TempDir(), "audit.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			srv := httptest.NewServer(s.Handler)
			t.Cleanup(srv.Close)
			l := matrix.Load{URL: srv.URL, MCPPath: s.MCPPath, Door: c.Door, Callers: 2}
			if c.Impl == matrix.CarmyGoverned {
				l.Token = matrix.Token
			}
			if err := matrix.Probe(context.Background(), l, 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGovernedRefusesWithoutToken: the governed server governs: a caller
// without the permission's token gets no tool output on any door.
func TestGovernedRefusesWithoutToken(t *testing.T) {
	s, err := matrix.NewServer(matrix.CarmyGoverned, filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	srv := httptest.NewServer(s.Handler)
	t.Cleanup(srv.Close)
	for _, door := range matrix.Doors {
		l := matrix.Load{URL: srv.URL, MCPPath: s.MCPPath, Door: door, Callers: 1}
		if err := matrix.Probe(context.Background(), l, 1); err == nil {
			t.Errorf("%s: a call without the token was answered", door)
		}
	}
}

// TestCheck: only the tool's output, with status 200 and no error, is a
// correct answer.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		door, body string
		status     int
		ok         bool
	}{
		{matrix.API, `{"output":{"order_id":8}}`, 200, true},
		{matrix.API, `{"output":{"order_id":9}}`, 200, false},
		{matrix.API, `{"output":{"order_id":8}}`, 500, false},
		{matrix.Sessions, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"order_id":8}}}`, 200, true},
		{matrix.Sessions, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"structuredContent\":{\"order_id\":8}}}\n\n", 200, true},
		{matrix.Sessionless, `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"\"order_id\":8"}]}}`, 200, false},
		{matrix.Sessionless, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"\"order_id\":8"}}`, 200, false},
	} {
		if err := matrix.Check(tc.door, tc.status, []byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("Check(%s, %d, %s) = %v, want ok=%v", tc.door, tc.status, tc.body, err, tc.ok)
		}
	}
}

// BenchmarkCell: carmy's cells of the matrix, bare and governed, one
// caller calling one call at a time over loopback, client and server in
// this process: a benchstat-able, profilable view of what governance adds
// on each door (the matrix itself measures the server's CPU alone).
//
//	go test -run '^$' -bench Cell -benchmem -count 6 ./internal/matrix
func BenchmarkCell(b *testing.B) {
	for _, door := range matrix.Doors {
		for _, impl := range []string{matrix.CarmyBare, matrix.CarmyGoverned} {
			b.Run("door="+door+"/impl="+impl, func(b *testing.B) {
				s, err := matrix.NewServer(impl, filepath.Join(b.TempDir(), "audit.jsonl"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				srv := httptest.NewServer(s.Handler)
				b.Cleanup(srv.Close)
				l := matrix.Load{URL: srv.URL, MCPPath: s.MCPPath, Door: door, Callers: 1}
				if impl == matrix.CarmyGoverned {
					l.Token = matrix.Token
				}
				b.ReportAllocs()
				if err := matrix.Probe(context.Background(), l, b.N); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
