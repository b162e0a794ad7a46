package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/carmy-dev/carmy"
)

const proxyUsage = `usage: carmy proxy [-config FILE] [-stdio | -addr ADDRESS]

carmy proxy serves the tools of the MCP servers a configuration file mounts
([[mount]] tables) with carmy's whole governance: authentication, effects
and a person's confirmation of destructive calls, permissions, rate limits,
request ids that run a call once, audit and the store. Put it in front of
any MCP server without writing Go:

  # proxy.toml
  [[mount]]
  prefix = "fs"
  command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
  roots = ["file:///srv/data"]

  carmy proxy -config proxy.toml -stdio         # for a local agent client
  carmy proxy -config proxy.toml -addr :3000    # streamable HTTP and the HTTP API

The file is a carmy.toml: listen, tokens or oauth, audit_file, store_url,
rate_limits and the other settings apply as they do to any carmy server,
and CARMY_* variables override them. Without -stdio or -addr, the proxy
listens on the file's listen address.

Flags:
`

func runProxy(args []string, stdout, stderr io.Writer) int {
	fs, help := newFlagSet("carmy proxy", proxyUsage, stdout, stderr, args)
	config := fs.String("config", "proxy.toml", "the configuration `file`, a carmy.toml with [[mount]] tables")
	stdio := fs.Bool("stdio", false, "serve MCP on standard input and output, for a client that starts the proxy")
	addr := fs.String("addr", "", "serve streamable HTTP and the HTTP API on this `address`")
	if help {
		fs.Usage()
		return 0
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) > 0 || *stdio && *addr != "" {
		fmt.Fprintln(stderr, "carmy proxy: give -stdio or -addr, not both, and no arguments")
		fs.Usage()
		return 2
	}
	if _, err := os.Stat(*config); err != nil {
		fmt.Fprintf(stderr, "carmy proxy: %v\n", err)
		return 1
	}
	// The builder reads its file, and every CARMY_* setting, as any carmy
	// server does.
	if err := os.Setenv("CARMY_CONFIG", *config); err != nil {
		fmt.Fprintf(stderr, "carmy proxy: %v\n", err)
		return 1
	}
	b := carmy.App()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *stdio:
		err = b.RunStdio(ctx)
	case *addr != "":
		err = b.Listen(ctx, *addr)
	default:
		err = b.Run(ctx)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "carmy proxy: %v\n", err)
		return 1
	}
	return 0
}
