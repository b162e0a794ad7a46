package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgo "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"

	"github.com/carmy-dev/carmy/internal/benchtools"
)

// Benchmark names are key=value pairs (size=small/impl=carmy), so that
// benchstat can put the implementations side by side: -col /impl.

// BenchmarkInProcess: carmy's Registry.Execute against the floor, the same
// work written by hand (strict decode, validator, call, encode).
func BenchmarkInProcess(b *testing.B) {
	ctx := context.Background()
	floors := Floors()
	reg := carmyRegistry(b)
	for _, c := range Cases {
		input := []byte(c.Input)
		b.Run("size="+c.Size+"/impl=floor", func(b *testing.B) {
			floor := floors[c.Tool]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := floor(ctx, input); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("size="+c.Size+"/impl=carmy", func(b *testing.B) {
			call := carmy.Call{Tool: c.Tool, Input: input}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Execute(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMCPInMemory: one tools/call through an MCP server, from the
// official SDK's client over an in-memory connection (net.Pipe with
// newline-delimited JSON-RPC), one session reused across iterations, in
// both protocol generations: the sessionless 2026-07-28, which the client
// speaks by default, and the session-based 2025-11-25 (impl=…-sessions,
// the client pinned to it).
//
//   - carmy: the registry's stdio server (Registry.ServeStdio) over a
//     net.Pipe, the path of a desktop client that starts a local server;
//     the same framing and wire work as the SDK's in-memory transports;
//   - carmy-servemcp: the registry's MCP server on
//     mcp.NewInMemoryTransports (Registry.ServeMCP, which answers a call
//     after the SDK's transport has decoded it), for reference;
//   - gosdk: a go-sdk server with the tools added by typed mcp.AddTool, on
//     mcp.NewInMemoryTransports;
//   - mcpgo: an mcp-go server with input validation, served by its stdio
//     server over the same kind of pipe, with the same framing; mcp-go has
//     no transport of the official SDK's, and this is the same wire work;
//   - mcpgo-inprocess: mcp-go's own in-process client, which hands the
//     server the request bytes directly (no pipe, no reader goroutines). It
//     is the closest thing mcp-go offers to an in-memory transport, shown for
//     reference, not part of the targets.
func BenchmarkMCPInMemory(b *testing.B) {
	for _, c := range Cases {
		args := json.RawMessage(c.Input)
		for _, impl := range append(mcpImpls, "carmy-servemcp", "carmy-servemcp-sessions") {
			b.Run("size="+c.Size+"/impl="+impl, func(b *testing.B) {
				session := inMemorySession(b, impl)
				benchSDKCalls(b, session, c.Tool, args)
			})
		}
		b.Run("size="+c.Size+"/impl=mcpgo-inprocess", func(b *testing.B) {
			cl := mcpgoInProcess(b)
			ctx := context.Background()
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = c.Tool
			req.Params.Arguments = args
			b.ReportAllocs()
			for b.Loop() {
				res, err := cl.CallTool(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					b.Fatalf("tool error: %+v", res.Content)
				}
			}
		})
	}
}

// BenchmarkHTTP: POST /tools/{name} on loopback, from 8 concurrent callers
// sharing one http.Client: carmy's Handler against PlainHandler, a plain
// net/http handler doing the floor's work. ns/op is wall time per call
// (the inverse of throughput); calls/s is the throughput. Allocations count
// the client's side too, which is the same for both.
func BenchmarkHTTP(b *testing.B) {
	for _, c := range Cases {
		for _, impl := range []string{"plain", "carmy"} {
			b.Run("size="+c.Size+"/impl="+impl, func(b *testing.B) {
				var h http.Handler
				if impl == "plain" {
					h = PlainHandler()
				} else {
					h = carmyRegistry(b).Handler()
				}
				srv := httptest.NewServer(h)
				defer srv.Close()
				client := loopbackClient()
				defer client.CloseIdleConnections()
				url := srv.URL + "/tools/" + c.Tool
				body := []byte(c.Input)
				if err := post(client, url, body); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetParallelism(benchtools.Callers8())
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := post(client, url, body); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			})
		}
	}
}

// BenchmarkMCPStreamable: one tools/call over MCP's streamable HTTP on
// loopback, one session reused, from the official SDK's client, in both
// protocol generations as BenchmarkMCPInMemory: carmy's /mcp endpoint
// against go-sdk's mcp.NewStreamableHTTPHandler (stateless for 2026-07-28,
// its default, stateful, for 2025-11-25) and mcp-go's
// StreamableHTTPServer, each otherwise with default options. For the floor
// a transport could reach, the same call, one at a time, to the HTTP API:
// POST /tools/{name} to carmy's Handler (http-carmy) and to PlainHandler
// (http-plain).
func BenchmarkMCPStreamable(b *testing.B) {
	for _, c := range Cases {
		args := json.RawMessage(c.Input)
		for _, impl := range mcpImpls {
			b.Run("size="+c.Size+"/impl="+impl, func(b *testing.B) {
				session := streamableSession(b, impl)
				benchSDKCalls(b, session, c.Tool, args)
			})
		}
		for _, impl := range []string{"http-carmy", "http-plain"} {
			b.Run("size="+c.Size+"/impl="+impl, func(b *testing.B) {
				h := PlainHandler()
				if impl == "http-carmy" {
					h = carmyRegistry(b).Handler()
				}
				srv := httptest.NewServer(h)
				defer srv.Close()
				client := loopbackClient()
				defer client.CloseIdleConnections()
				url, body := srv.URL+"/tools/"+c.Tool, []byte(c.Input)
				if err := post(client, url, body); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := post(client, url, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// mcpImpls are the MCP servers compared, in each protocol generation.
var mcpImpls = []string{"gosdk", "carmy", "mcpgo", "gosdk-sessions", "carmy-sessions", "mcpgo-sessions"}

// sessionsVersion is the session-based protocol version that an impl named
// …-sessions pins the client to.
const sessionsVersion = "2025-11-25"

// splitImpl parses an implementation's name: the server, and the client's
// session options (nil for the client's default, the sessionless
// 2026-07-28).
func splitImpl(impl string) (server string, opts *mcp.ClientSessionOptions) {
	server, sessions := strings.CutSuffix(impl, "-sessions")
	if sessions {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: sessionsVersion}
	}
	return server, opts
}

// BenchmarkBuild1000: a server of 1,000 tools, each with its own input
// type made by reflect.StructOf, all new to the process (made outside the
// timer for every iteration, so neither library's caches of types help).
//
//   - gosdk: what mcp.AddTool does for each tool (infer and resolve the
//     input and output schemas, Server.AddTool), written out because
//     AddTool's type parameters need types known at compile time;
//   - carmy: carmy.New().Tool(…1,000…).Build();
//   - carmy-serving: the same, then Registry.Handler, which also builds
//     the MCP server: the registry ready to serve, as go-sdk's is.
func BenchmarkBuild1000(b *testing.B) {
	const tools = 1000
	gen := 0
	for _, impl := range []string{"gosdk", "carmy", "carmy-serving"} {
		b.Run("impl="+impl, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				gen++
				set := newToolSet(fmt.Sprintf("%s-%d", impl, gen), tools)
				runtime.GC()
				b.StartTimer()
				var err error
				switch impl {
				case "gosdk":
					err = set.buildGoSDK()
				case "carmy":
					err = set.buildCarmy(false)
				case "carmy-serving":
					err = set.buildCarmy(true)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRules: what carmy's runtime rules cost on the small tool
// (benchtools.Rules, which the root package's BenchmarkRules runs too).
func BenchmarkRules(b *testing.B) { benchtools.Rules(b) }

func carmyRegistry(tb testing.TB) *carmy.Registry {
	tb.Helper()
	reg, err := CarmyRegistry()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = reg.Close() })
	return reg
}

// benchSDKCalls calls a tool through an official-SDK client session.
func benchSDKCalls(b *testing.B, session *mcp.ClientSession, tool string, args json.RawMessage) {
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if _, err := callSDK(ctx, session, params); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := session.CallTool(ctx, params)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("tool error: %+v", res.Content)
		}
	}
}

// callSDK calls a tool and returns its structured content as JSON, or the
// tool's error.
func callSDK(ctx context.Context, session *mcp.ClientSession, params *mcp.CallToolParams) (json.RawMessage, error) {
	res, err := session.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		text := ""
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				text = t.Text
			}
		}
		return nil, &toolError{text}
	}
	return json.Marshal(res.StructuredContent)
}

type toolError struct{ text string }

func (e *toolError) Error() string { return "tool error: " + e.text }

var sdkClient = &mcp.Implementation{Name: "bench-client", Version: "1"}

// inMemorySession connects an official-SDK client to the implementation's
// server over an in-memory pipe; everything is closed with the test.
func inMemorySession(tb testing.TB, impl string) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	var clientT mcp.Transport
	server, opts := splitImpl(impl)
	switch server {
	case "carmy":
		reg := carmyRegistry(tb)
		serverEnd, clientEnd := net.Pipe()
		clientT = &mcp.IOTransport{Reader: clientEnd, Writer: clientEnd}
		go func() {
			err := reg.ServeStdio(ctx, serverEnd, serverEnd)
			serverEnd.Close()
			served <- err
		}()
	case "carmy-servemcp":
		reg := carmyRegistry(tb)
		serverT, ct := mcp.NewInMemoryTransports()
		clientT = ct
		go func() { served <- reg.ServeMCP(ctx, serverT) }()
	case "gosdk":
		s, err := GoSDKServer()
		if err != nil {
			tb.Fatal(err)
		}
		serverT, ct := mcp.NewInMemoryTransports()
		clientT = ct
		go func() { served <- s.Run(ctx, serverT) }()
	case "mcpgo":
		serverEnd, clientEnd := net.Pipe()
		clientT = &mcp.IOTransport{Reader: clientEnd, Writer: clientEnd}
		go func() {
			err := MCPGoStdio(ctx, MCPGoServer(), serverEnd, serverEnd)
			serverEnd.Close()
			served <- err
		}()
	default:
		tb.Fatalf("no implementation %q", impl)
	}
	session, err := mcp.NewClient(sdkClient, nil).Connect(ctx, clientT, opts)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Closing the client ends the server's session; ctx is the
		// fallback for a server that would not notice.
		_ = session.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			cancel()
			<-served
		}
		cancel()
	})
	return session
}

// streamableSession connects an official-SDK client to the
// implementation's streamable HTTP endpoint on a loopback server.
func streamableSession(tb testing.TB, impl string) *mcp.ClientSession {
	tb.Helper()
	var h http.Handler
	path := "/mcp"
	server, opts := splitImpl(impl)
	switch server {
	case "carmy":
		h = carmyRegistry(tb).Handler()
	case "gosdk":
		s, err := GoSDKServer()
		if err != nil {
			tb.Fatal(err)
		}
		// Stateless for the sessionless protocol: the default handler,
		// stateful, answers server/discover with an error, and the client
		// falls back to 2025-11-25.
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: opts == nil})
		path = ""
	case "mcpgo":
		h = mcpgo.NewStreamableHTTPServer(MCPGoServer())
	default:
		tb.Fatalf("no implementation %q", impl)
	}
	srv := httptest.NewServer(h)
	client := loopbackClient()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + path, HTTPClient: client, MaxRetries: -1}
	session, err := mcp.NewClient(sdkClient, nil).Connect(context.Background(), tr, opts)
	if err != nil {
		srv.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = session.Close()
		client.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
	})
	return session
}

// mcpgoInProcess is mcp-go's in-process client, initialized, on a server
// of the reference tools.
func mcpgoInProcess(tb testing.TB) *mcpgoclient.Client {
	tb.Helper()
	cl, err := mcpgoclient.NewInProcessClient(MCPGoServer())
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	init := mcpgomcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgomcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgomcp.Implementation{Name: "bench-client", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// loopbackClient is an HTTP client that keeps a connection per caller.
func loopbackClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 0}}
}

// post sends one call and reads the whole answer.
func post(client *http.Client, url string, body []byte) error {
	_, err := postRead(client, url, body)
	return err
}

func postRead(client *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("%s: %s: %s", url, resp.Status, out)
	}
	return out, nil
}

// toolSet is n tools, each with an input type of its own.
type toolSet struct {
	types []reflect.Type
	fns   []any
}

func newToolSet(generation string, n int) *toolSet {
	s := benchtools.NewToolSet(generation, n)
	return &toolSet{types: s.Types, fns: s.Funcs}
}

func (s *toolSet) buildCarmy(serving bool) error {
	bld := carmy.New()
	for i, fn := range s.fns {
		bld.Tool(carmy.Tool(fn, carmy.Read, carmy.Name("tool_"+strconv.Itoa(i)), carmy.Register(false)))
	}
	reg, err := bld.Build()
	if err != nil {
		return err
	}
	defer reg.Close()
	if serving {
		_ = reg.Handler()
	}
	if got := len(reg.Tools()); got != len(s.fns) {
		return fmt.Errorf("built %d tools, want %d", got, len(s.fns))
	}
	return nil
}

// buildGoSDK does for every tool what mcp.AddTool[In, Out] does: infer the
// input and output schemas, resolve them, and add the tool with a handler
// that validates the arguments, decodes them into the input type, calls
// the function and returns its output as structured content.
func (s *toolSet) buildGoSDK() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, nil)
	for i, in := range s.types {
		inSchema, err := jsonschema.ForType(in, &jsonschema.ForOptions{})
		if err != nil {
			return err
		}
		inResolved, err := inSchema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			return err
		}
		outSchema, err := jsonschema.ForType(reflect.TypeOf(s.fns[i]).Out(0), &jsonschema.ForOptions{})
		if err != nil {
			return err
		}
		if _, err := outSchema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
			return err
		}
		fn := reflect.ValueOf(s.fns[i])
		srv.AddTool(&mcp.Tool{Name: "tool_" + strconv.Itoa(i), InputSchema: inSchema, OutputSchema: outSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var m map[string]any
				if err := json.Unmarshal(req.Params.Arguments, &m); err != nil {
					return nil, err
				}
				if err := inResolved.Validate(m); err != nil {
					res := &mcp.CallToolResult{}
					res.SetError(err)
					return res, nil
				}
				v := reflect.New(in)
				if err := json.Unmarshal(req.Params.Arguments, v.Interface()); err != nil {
					return nil, err
				}
				out := fn.Call([]reflect.Value{reflect.ValueOf(ctx), v.Elem()})
				return &mcp.CallToolResult{StructuredContent: out[0].Interface()}, nil
			})
	}
	return nil
}
