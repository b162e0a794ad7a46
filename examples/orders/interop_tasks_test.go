package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTypeScriptClientTasks runs interop/ts/tasks.mjs: the official
// TypeScript SDK's experimental task client (v1) starts export_orders as a
// task in a session over streamable HTTP, follows it to its result, lists
// it and reads it.
func TestTypeScriptClientTasks(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not on PATH; the TypeScript MCP client needs Node.js 20 or later (then run: npm ci --prefix interop/ts)")
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("skipping: interop/ts/node_modules does not hold the TypeScript MCP SDK (run: npm ci --prefix interop/ts)")
	}
	reg, err := newBuilder(NewStore()).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ctx, ln, 5*time.Second) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Log(runNode(t, node, tsClientDir, "tasks.mjs", "http://"+ln.Addr().String()+"/mcp"))
}
