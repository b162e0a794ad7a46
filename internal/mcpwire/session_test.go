package mcpwire_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// openSession connects an in-memory client and returns the server's
// session, whose ID the test chooses.
func openSession(t *testing.T, id string) *mcp.ServerSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	ss, err := srv.Connect(ctx, idTransport{st, id}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return ss
}

// idTransport gives its connection a session ID.
type idTransport struct {
	mcp.Transport
	id string
}

func (t idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return idConn{c, t.id}, err
}

type idConn struct {
	mcp.Connection
	id string
}

func (c idConn) SessionID() string { return c.id }

func TestSessionTable(t *testing.T) {
	var ended []string // the ids the hook was told of, in order
	tab := mcpwire.NewSessionTable(time.Hour, 2, func(s mcpwire.SessionSpan) {
		if s.Principal != "alice" || s.ProtocolVersion != "2025-11-25" || s.Transport != "tcp" || s.Start.IsZero() || s.End.Before(s.Start) {
			t.Errorf("ended session %+v", s)
		}
		ended = append(ended, s.ID)
	})
	a, b, c := openSession(t, "a"), openSession(t, "b"), openSession(t, "c")
	tab.Open(a, "alice", "2025-11-25")
	tab.Open(b, "alice", "2025-11-25")
	if s, ok := tab.Acquire("a", "mallory"); s != nil || ok {
		t.Fatalf("another principal acquired alice's session")
	}
	if s, ok := tab.Acquire("unknown", "alice"); s != nil || !ok {
		t.Fatalf("an unknown session is the SDK's to refuse")
	}
	s, ok := tab.Acquire("a", "alice") // a is now the most recently used
	if !ok || s == nil || s.ServerSession() != a {
		t.Fatalf("Acquire(a) = %v, %v", s, ok)
	}
	tab.Release(s)
	tab.Open(c, "alice", "2025-11-25") // beyond the limit of 2: b, the least recently used, goes
	if tab.Get("b") != nil || tab.Get("a") == nil || tab.Get("c") == nil || tab.Len() != 2 {
		t.Fatalf("after eviction: a %v b %v c %v len %d", tab.Get("a"), tab.Get("b"), tab.Get("c"), tab.Len())
	}
	tab.Forget(tab.Get("c"))
	if tab.Get("c") != nil || tab.Len() != 1 {
		t.Fatalf("Forget left the session")
	}
	tab.CloseAll()
	if tab.Len() != 0 {
		t.Fatalf("CloseAll left %d sessions", tab.Len())
	}
	// Evicted, deleted by its client, closed with the table: each told once.
	if want := []string{"b", "c", "a"}; !slices.Equal(ended, want) {
		t.Fatalf("the ended hook was told of %v, want %v", ended, want)
	}
}

func TestSessionTableExpiresIdleSessions(t *testing.T) {
	expired := make(chan mcpwire.SessionSpan, 1)
	tab := mcpwire.NewSessionTable(20*time.Millisecond, 10, func(s mcpwire.SessionSpan) { expired <- s })
	tab.Open(openSession(t, "x"), "p", "2025-06-18")
	s, _ := tab.Acquire("x", "p")
	time.Sleep(60 * time.Millisecond)
	if tab.Get("x") == nil {
		t.Fatal("a session with a request in progress expired")
	}
	tab.Release(s)
	deadline := time.Now().Add(5 * time.Second)
	for tab.Get("x") != nil {
		if time.Now().After(deadline) {
			t.Fatal("an idle session did not expire")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := <-expired; s.ID != "x" || s.End.Sub(s.Start) < 60*time.Millisecond {
		t.Fatalf("the expired session was told as %+v; it lasted at least 60ms", s)
	}
}

func TestCallSet(t *testing.T) {
	var set mcpwire.CallSet
	ctx, cancel := context.WithCancel(context.Background())
	id, _ := jsonrpc.MakeID(float64(4))
	if !set.Add(id, cancel) || set.Add(id, cancel) {
		t.Fatal("Add must take an id once")
	}
	set.Cancel([]byte(`{"requestId":5}`))
	if ctx.Err() != nil {
		t.Fatal("another id cancelled the call")
	}
	set.Cancel([]byte(`{"requestId":4}`))
	if ctx.Err() == nil {
		t.Fatal("the call was not cancelled")
	}
	set.Remove(id)
	if !set.Add(id, cancel) {
		t.Fatal("a removed id cannot be added again")
	}
}
