// Command matrixload drives a server of the throughput matrix on loopback
// and prints what it measured as one line of JSON:
//
//	matrixload -url http://127.0.0.1:PORT -path /mcp -door 2025-11-25 -callers 50 -pid PID
//
// Each caller has its own keep-alive connection and, with sessions, its own
// session. It warms up, then counts the correct answers of a measured
// window; with -pid it reads the server's CPU time and memory from /proc at
// the window's edges. bench/cmd/matrix runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/carmy-dev/carmy/bench/internal/matrix"
)

func main() {
	var l matrix.Load
	flag.StringVar(&l.URL, "url", "", "the server's base URL (loopback)")
	flag.StringVar(&l.MCPPath, "path", "/mcp", "the MCP endpoint's path")
	flag.StringVar(&l.Door, "door", matrix.Sessions, "2025-11-25, 2026-07-28 or http")
	flag.StringVar(&l.Token, "token", "", "a bearer token to send")
	flag.IntVar(&l.Callers, "callers", 50, "concurrent callers")
	flag.DurationVar(&l.Warmup, "warmup", 2*time.Second, "the warm-up, not counted")
	flag.DurationVar(&l.Window, "window", 5*time.Second, "the measured window")
	flag.IntVar(&l.PID, "pid", 0, "the server's process id, for its CPU and memory")
	flag.Parse()
	u, err := url.Parse(l.URL)
	if err != nil {
		log.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		log.Fatalf("%s is not a loopback URL", l.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.Warmup+l.Window+time.Minute)
	defer cancel()
	r, err := matrix.Run(ctx, l)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := json.Marshal(r)
	fmt.Fprintln(os.Stdout, string(b))
}
