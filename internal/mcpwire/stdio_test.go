package mcpwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// syncBuffer is the output stream, read by the test while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveLines serves in over a StdioTransport until the input ends and
// returns the answers written, one decoded message a line.
func serveLines(t *testing.T, in string, fast func(*mcpwire.StdioConn, []byte) bool) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := &syncBuffer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	tr := &fastHook{StdioTransport: &mcpwire.StdioTransport{In: strings.NewReader(in), Out: out, Limit: 256, Logger: slog.New(slog.DiscardHandler)}, fast: fast}
	ss, err := srv.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Wait(); err != nil && err != io.EOF && !strings.Contains(err.Error(), "EOF") {
		t.Logf("Wait: %v", err)
	}
	var answers []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("an answer that is not one JSON line: %q", line)
		}
		answers = append(answers, m)
	}
	return answers
}

// fastHook installs fast on the connection, as carmy's fast path does.
type fastHook struct {
	*mcpwire.StdioTransport
	fast func(*mcpwire.StdioConn, []byte) bool
}

func (h *fastHook) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := h.StdioTransport.Connect(ctx)
	if err == nil && h.fast != nil {
		sc := c.(*mcpwire.StdioConn)
		sc.SetFast(func(line []byte) bool { return h.fast(sc, line) })
	}
	return c, err
}

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
	`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}` + "\n"

func TestStdioTransportSurvivesBadLines(t *testing.T) {
	in := initLine +
		"{not json\n" +
		`{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"ping","pad":"` + strings.Repeat("x", 300) + `"}` + "\r\n" +
		"   \r\n" +
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":5}}` + "\n" +
		`{"jsonrpc":"2.0","id":9,"method":"ping"}` + "\r\n"
	answers := serveLines(t, in, nil)
	// The filter's answers and the SDK's may come in any order: count
	// them by id.
	got := map[string]int{}
	for _, a := range answers {
		code := 0.0
		if e, ok := a["error"].(map[string]any); ok {
			code = e["code"].(float64)
		}
		got[fmt.Sprintf("id %v code %v", a["id"], code)]++
	}
	want := map[string]int{
		"id 0 code 0":          1, // initialize
		"id <nil> code -32700": 3, // not JSON, a member twice, too long
		"id 8 code -32602":     1,
		"id 9 code 0":          1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answers = %v, want %v", got, want)
	}
}

func TestStdioConnFastAnswersBeforeTheSDK(t *testing.T) {
	in := initLine + `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"fast":true}}}` + "\n"
	answers := serveLines(t, in, func(sc *mcpwire.StdioConn, line []byte) bool {
		if !bytes.Contains(line, []byte(`"fast"`)) {
			return false
		}
		sc.StartRequest()
		go func() {
			// The end of the input must wait for this answer.
			time.Sleep(50 * time.Millisecond)
			sc.WriteLine([]byte(`{"jsonrpc":"2.0","id":3,"result":{"fast":true}}`))
			sc.EndRequest()
		}()
		return true
	})
	last := answers[len(answers)-1]
	if r, _ := last["result"].(map[string]any); r["fast"] != true {
		t.Fatalf("answers = %v, want the fast answer last", answers)
	}
}
