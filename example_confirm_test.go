package carmy_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// A person confirms their own agent's call through their MCP client. Over
// stdio, or in memory as here, a client that can show its user a form is
// asked, with the call's canonical input; accepted, the call runs once.
func ExampleRegistry_ServeMCP_confirmation() {
	del := carmy.Tool(func(in DeleteNote) (uint64, error) { return in.ID, nil }, carmy.Destructive,
		carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	// A host that cannot trust its clients to show forms to a person would
	// add .NoFormConfirmation() here: the client would not be asked.
	reg, err := carmy.New().Tool(del).Logger(slog.New(slog.DiscardHandler)).Build()
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverT, clientT := mcp.NewInMemoryTransports()
	go func() { _ = reg.ServeMCP(ctx, serverT) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, &mcp.ClientOptions{
		// The client's own UI shows the form to its user.
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			fmt.Println(req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
	})
	s, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
	if err != nil {
		panic(err)
	}
	fmt.Println("error:", res.IsError, "output:", res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// Allow delete_note to run with this input?
	// {
	//   "id": 7
	// }
	// error: false output: 7
}

// Every host of a deployment that shares no store is given the same key,
// here as `openssl rand -hex 32` wrote it into CARMY_STATE_KEY (or
// state_key in carmy.toml): a confirmation a person gave in one round of a
// sessionless call then verifies on whichever host the next round reaches.
func ExampleBuilder_StateKey() {
	hexKey := strings.Repeat("5e", carmy.MinStateKeySize) // os.Getenv("CARMY_STATE_KEY")
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	var done atomic.Int32
	reg, err := carmy.New().Tool(askThenBurn(&done)).StateKey(key).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	fmt.Println(len(reg.Tools()), "tool, state signed with the deployment's key")
	// Output: 1 tool, state signed with the deployment's key
}
