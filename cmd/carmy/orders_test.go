package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/internal/toolsrc"

	"github.com/carmy-dev/carmy/internal/modtest"
)

// TestExampleOrders runs every command on carmy's example, examples/orders,
// copied into a module of its own: vet, gen, and tools and call against
// the example's server.
func TestExampleOrders(t *testing.T) {
	t.Parallel()
	modtest.NeedGo(t)
	root := modtest.CheckoutRoot(t)
	src := filepath.Join(root, "examples", "orders")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Skipf("no example to run: %v", err)
	}
	hadGen := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		hadGen = hadGen || name == toolsrc.GenFile
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	mod := "module example.com/orders\n\ngo 1.26.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o666); err != nil {
		t.Fatal(err)
	}
	modtest.PointAtCheckout(t, dir, root)

	// vet: the example's tools are sound; its comments need a generated
	// file, unless it has a current one.
	code, stdout, stderr := output(t, carmyBinCmd(t, dir, "vet", "./..."))
	switch {
	case hadGen && code != 0:
		t.Errorf("carmy vet on the example: exit %d\n%s%s", code, stdout, stderr)
	case !hadGen && (code != 3 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "carmy_gen.go is missing")):
		t.Errorf("carmy vet on the example without carmy_gen.go: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := generate(dir, []string{"./..."}, t.Logf); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := output(t, carmyBinCmd(t, dir, "vet", "./...")); code != 0 {
		t.Errorf("carmy vet on the example after carmy gen: exit %d\n%s%s", code, stdout, stderr)
	}

	// Serve the example and talk to it.
	bin := filepath.Join(t.TempDir(), "orders")
	modtest.Go(t, dir, "build", "-o", bin, ".")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	server := exec.Command(bin, "-addr", addr)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example does not serve on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	code, stdout, stderr = carmyRun("tools", url)
	if code != 0 || !strings.Contains(stdout, "create_order") || !strings.Contains(stdout, "cancel_order   destructive") {
		t.Errorf("carmy tools on the example: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = carmyRun("tools", "--json", url)
	var tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(stdout), &tools); code != 0 || err != nil {
		t.Fatalf("carmy tools --json on the example: exit %d, %v\n%s", code, err, stdout)
	}
	for _, tool := range tools {
		if tool.Name == "create_order" {
			if d := descriptionAt(t, tool.InputSchema, ""); d != "CreateOrder is the input of create_order." {
				t.Errorf("create_order's input has the description %q, not its type's doc comment", d)
			}
		}
	}

	code, stdout, stderr = carmyRun("call", url, "create_order", `{"sku":"A-100","quantity":2}`)
	if code != 0 || !strings.Contains(stdout, `"order_id": 1`) {
		t.Errorf("carmy call create_order: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = carmyRun("call", url, "create_order", `{"sku":"","quantity":0}`)
	if code != 1 || !strings.Contains(stderr, "error: invalid_input:") || !strings.Contains(stderr, "\n  sku: ") || !strings.Contains(stderr, "\n  quantity: ") {
		t.Errorf("carmy call create_order with invalid input: exit %d\n%s", code, stderr)
	}
}
