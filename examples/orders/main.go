// Command orders is carmy's example: a small order service whose tools an
// agent can call. It keeps its orders in memory.
//
//	go run ./examples/orders              # serve HTTP and MCP on 127.0.0.1:3000
//	go run ./examples/orders -addr :8080  # another address (loopback only: no auth here)
//	go run ./examples/orders -stdio       # serve MCP on stdin/stdout, for local clients
//	go run ./examples/orders -demo        # print the tools and make a few calls from Go
//
// Served, the tools answer GET /tools, POST /tools/{name} and MCP at /mcp
// until the program is interrupted (Ctrl-C). The "carmy: serving" log line
// says the address is bound; when it is not (a taken port), the program
// exits with status 1 and the error instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/carmy-dev/carmy"
)

func main() {
	addr := flag.String("addr", carmy.DefaultAddr, "address to serve HTTP and MCP on")
	stdio := flag.Bool("stdio", false, "serve MCP on standard input and output instead")
	demo := flag.Bool("demo", false, "print the tools and make a few calls, then exit")
	flag.Parse()
	// Logs go to standard error: over stdio, standard output is the protocol.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *demo:
		err = run(ctx, os.Stdout)
	case *stdio:
		err = newBuilder(NewStore()).RunStdio(ctx)
	default:
		// Listen logs "carmy: serving" with the address once it is bound,
		// and only then: a taken port is an error and no such line.
		err = newBuilder(NewStore()).Listen(ctx, *addr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// call is one call main makes, as a host would pass it to the registry.
type call struct {
	tool        string
	input       string
	principal   string
	permissions []string
}

// demo is what run shows: successes first, then the errors a model sees.
var demo = []call{
	{tool: "create_order", input: `{"sku":"A-100","quantity":2,"note":"leave at the door"}`, principal: "alice"},
	{tool: "create_order", input: `{"sku":"B-7","quantity":1}`, principal: "alice"},
	{tool: "get_order", input: `{"order_id":1}`},
	// cancel_order requires confirmation. Without a grant it is refused,
	// and the error tells the host what to ask the user; once the user has
	// agreed, the host grants confirm:cancel_order (or the grant bound to
	// this one input).
	{tool: "cancel_order", input: `{"order_id":2,"reason":"ordered by mistake"}`, principal: "alice"},
	{tool: "cancel_order", input: `{"order_id":2,"reason":"ordered by mistake"}`, principal: "alice", permissions: []string{"confirm:cancel_order"}},
	{tool: "list_orders", input: `{"status":"placed"}`},
	{tool: "whoami", principal: "alice"},
	{tool: "whoami"},
	// What goes wrong, and what the model is told.
	{tool: "create_order", input: `{"sku":"","quantity":0,"colour":"red"}`},
	{tool: "get_order", input: `{"order_id":42}`},
	{tool: "create_ordr", input: `{"sku":"A-100","quantity":1}`},
}

// run builds the registry, lists its tools and makes the demo calls.
func run(ctx context.Context, w io.Writer) error {
	reg, err := newRegistry(NewStore())
	if err != nil {
		return err
	}
	defer reg.Close()

	fmt.Fprintln(w, "Tools:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, m := range reg.Tools() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Name, m.Effect, traits(m), m.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nCalls:")
	for _, c := range demo {
		input := c.input
		if input == "" {
			input = "{}"
		}
		who := "anonymous"
		if c.principal != "" {
			who = c.principal
		}
		if len(c.permissions) > 0 {
			who += ", granted " + strings.Join(c.permissions, " ")
		}
		fmt.Fprintf(w, "\n%s %s (as %s)\n", c.tool, input, who)
		res, err := reg.Execute(ctx, carmy.Call{
			Tool:        c.tool,
			Input:       json.RawMessage(c.input),
			Principal:   c.principal,
			Permissions: c.permissions,
		})
		if err != nil {
			printError(w, err)
			continue
		}
		fmt.Fprintf(w, "  ok: %s\n", res.Output)
	}
	return nil
}

// traits sums up the rules carmy applies to a tool's calls.
func traits(m carmy.ToolMetadata) string {
	var t []string
	if m.Idempotent {
		t = append(t, "idempotent")
	}
	if m.ParallelSafe {
		t = append(t, "parallel")
	} else {
		t = append(t, "serialized")
	}
	if m.Confirmation == carmy.ConfirmationRequired {
		t = append(t, "confirm")
	}
	return strings.Join(t, ",")
}

// printError shows an error as a caller sees it: the code, the message and,
// for invalid input, every field that needs fixing.
func printError(w io.Writer, err error) {
	var e *carmy.Error
	if !errors.As(err, &e) {
		fmt.Fprintf(w, "  error: %v\n", err)
		return
	}
	fmt.Fprintf(w, "  %s: %s\n", e.Code, e.Message)
	for _, f := range e.Fields {
		path := f.Path
		if path == "" {
			path = "(input)"
		}
		fmt.Fprintf(w, "    %s: %s\n", path, f.Message)
	}
	keys := slices.Sorted(maps.Keys(e.Details))
	for _, k := range keys {
		fmt.Fprintf(w, "    details.%s: %v\n", k, e.Details[k])
	}
}
