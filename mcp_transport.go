package carmy

import (
	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeMCP serves MCP over any transport of the official SDK
// (github.com/modelcontextprotocol/go-sdk/mcp): the registry's MCP server,
// the one that [Registry.Handler] serves at /mcp and [Registry.ServeStdio]
// over streams, connected to t. It serves one session, with the identity
// of a stdio client (the builder's stdio identity, if any), until ctx is
// done or the client closes the connection; it returns nil then.
//
// An in-memory pair (mcp.NewInMemoryTransports) connects a client in the
// same process, for tests and benchmarks:
//
//	serverT, clientT := mcp.NewInMemoryTransports()
//	go reg.ServeMCP(ctx, serverT)
//	session, err := mcp.NewClient(impl, nil).Connect(ctx, clientT, nil)
func (r *Registry) ServeMCP(ctx context.Context, t mcp.Transport) error {
	// Not mcp.Server.Run, which logs an error when ctx ends, the usual way
	// to stop serving.
	ft := &fastTransport{Transport: t, r: r}
	ss, err := r.mcpServer().Connect(ctx, ft, nil)
	if err != nil {
		return err
	}
	ft.conn.serve(ss)
	defer ft.conn.wait()
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return nil
	case err := <-ended:
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}
