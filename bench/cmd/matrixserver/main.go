// Command matrixserver serves one implementation of the throughput matrix
// on loopback until its standard input closes or it is interrupted:
//
//	matrixserver -impl carmy-governed -audit /tmp/audit.jsonl
//
// It prints its base URL and its endpoint's path on one line,
// "http://127.0.0.1:PORT /mcp", once it listens. The implementations are
// those of package matrix: carmy, carmy-governed, gosdk, gosdk-stateless,
// mcpgo. bench/cmd/matrix runs it; -cpuprofile profiles the server for
// go tool pprof.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/carmy-dev/carmy/bench/internal/matrix"
)

func main() {
	impl := flag.String("impl", matrix.CarmyBare, "the implementation served")
	addr := flag.String("addr", "127.0.0.1:0", "where to listen (loopback)")
	audit := flag.String("audit", "", "the audit file of carmy-governed")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*impl, *addr, *audit); err != nil {
		log.Fatal(err)
	}
}

func run(impl, addr, audit string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", addr)
	}
	s, err := matrix.NewServer(impl, audit)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { // the runner closes our standard input to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("http://%s %s\n", ln.Addr(), s.MCPPath)
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
