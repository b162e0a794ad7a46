package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

type transportGreet struct {
	Name string `json:"name" validate:"required"`
}

type transportGreeting struct {
	Text      string `json:"text"`
	Principal string `json:"principal"`
}

// TestServeMCPInMemory serves a registry over the SDK's in-memory
// transport: the tool is listed with its schema, a call runs with the stdio
// identity, an invalid input is a tool error with carmy's error object, and
// ServeMCP returns nil when the client goes away.
func TestServeMCPInMemory(t *testing.T) {
	t.Parallel()
	greet := func(ctx carmy.Context, in transportGreet) (transportGreeting, error) {
		return transportGreeting{Text: "hello " + in.Name, Principal: ctx.Principal}, nil
	}
	reg, err := carmy.New().
		Tool(carmy.Tool(greet, carmy.Read, carmy.Name("greet"), carmy.Register(false))).
		StdioIdentity(carmy.Identity{Principal: "local"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	ctx := context.Background()
	serverT, clientT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- reg.ServeMCP(ctx, serverT) }()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}

	list, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "greet" {
		t.Fatalf("tools/list: %+v", list.Tools)
	}
	var want any
	if err := json.Unmarshal(carmy.SchemaFor[transportGreet](), &want); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(list.Tools[0].InputSchema, want) {
		t.Errorf("input schema %v, want %v", list.Tools[0].InputSchema, want)
	}

	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("call failed: %+v", res.Content[0])
	}
	if got := structured(t, res); got["text"] != "hello Ada" || got["principal"] != "local" {
		t.Errorf("structured content %v, want hello Ada from principal local", got)
	}

	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada", "extra": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if e := errorObject(t, res); e["code"] != string(carmy.CodeInvalidInput) {
		t.Errorf("error object %v, want code invalid_input", e)
	}

	if err := session.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeMCP returned %v after the client closed, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeMCP did not return after the client closed")
	}
}

// TestServeMCPContextDone: ServeMCP returns nil when its context ends, the
// usual way to stop it, and logs nothing about it.
func TestServeMCPContextDone(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	reg, err := carmy.New().Logger(slog.New(slog.NewTextHandler(&logs, nil))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	serverT, clientT := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- reg.ServeMCP(ctx, serverT) }()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, nil).Connect(context.Background(), clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeMCP returned %v after its context ended, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeMCP did not return after its context ended")
	}
	if logs.Len() > 0 {
		t.Errorf("stopping logged:\n%s", logs.String())
	}
}

// TestMCPStreamResumes: in a session, a call's event stream carries event
// ids, so a stream cut in the middle of the call (a proxy's idle timeout,
// a server that closes it to have the client poll) is resumed by the
// client with Last-Event-ID, and the call gets its answer rather than
// being lost.
func TestMCPStreamResumes(t *testing.T) {
	t.Parallel()
	reg := build(t, carmy.New().
		ConfigureMCP(func(s *mcp.Server) {
			s.AddTool(&mcp.Tool{Name: "cut", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					if req.Extra == nil || req.Extra.CloseSSEStream == nil {
						return nil, errors.New("the call's stream cannot be closed: it has no event ids")
					}
					req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
					time.Sleep(100 * time.Millisecond) // the client reconnects meanwhile
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered after the cut"}}}, nil
				})
		}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A client that reconnects, as the SDK's does by default.
	tr := &mcp.StreamableClientTransport{Endpoint: serve(t, reg).URL + "/mcp"}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "carmy-test", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "cut", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "answered after the cut" {
		t.Fatalf("the call whose stream was cut: %+v, %v; want its answer, resumed", res, err)
	}
}
