package carmy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// HostCaller is who carmy_test_host_whoami was called by.
type HostCaller struct {
	Principal   string   `json:"principal"`
	Permissions []string `json:"permissions"`
}

func hostWhoAmI(ctx carmy.Context) (HostCaller, error) {
	return HostCaller{ctx.Principal, ctx.Permissions.List()}, nil
}

// Registered automatically, for the tests of App().Run.
var _ = carmy.Tool(hostWhoAmI, carmy.Read, carmy.Name("carmy_test_host_whoami"), carmy.ParallelSafe())

// HostEcho is the input and output of the slow echo tool.
type HostEcho struct {
	N int `json:"n"`
}

// serveLog is a slog handler that passes on the address of every
// "carmy: serving" record, so that a test learns where port 0 was bound.
type serveLog struct{ addrs chan string }

func newServeLog() serveLog { return serveLog{make(chan string, 4)} }

func (h serveLog) Enabled(context.Context, slog.Level) bool { return true }
func (h serveLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h serveLog) WithGroup(string) slog.Handler            { return h }
func (h serveLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "carmy: serving" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "addr" {
				select {
				case h.addrs <- a.Value.String():
				default:
				}
			}
			return true
		})
	}
	return nil
}

// addr waits for the server's address.
func (h serveLog) addr(t *testing.T, done <-chan error) string {
	t.Helper()
	select {
	case a := <-h.addrs:
		return a
	case err := <-done:
		t.Fatalf("the server stopped before serving: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not start")
	}
	return ""
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func hostGet(t *testing.T, client *http.Client, url, token string) (int, []byte) {
	t.Helper()
	return hostDo(t, client, "GET", url, token, "")
}

func hostDo(t *testing.T, client *http.Client, method, url, token, body string) (int, []byte) {
	t.Helper()
	auth, ct := "", ""
	if token != "" {
		auth = "Bearer " + token
	}
	if body != "" {
		ct = "application/json"
	}
	res, b := roundTrip(t, client, method, url, body, "Authorization", auth, "Content-Type", ct)
	return res.StatusCode, b
}

// Listening where others can reach it, without authentication, is refused
// before anything listens; authentication or an explicit allowance lifts
// the refusal. Only loopback addresses ever carry traffic here.
func TestListenExposure(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	tool := carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("noop"), carmy.Register(false))
	// A free port, to show that nothing took it.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()

	refused := []string{fmt.Sprintf("0.0.0.0:%d", port), "[::]:0", ":0", "192.0.2.1:0", "example.com:3000"}
	for _, addr := range refused {
		t.Run("refused "+addr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := carmy.New().Logger(quietLogger()).Tool(tool).Listen(ctx, addr)
			want := "carmy: refusing to listen on " + addr + " without authentication: anyone who reaches it could call every tool; set an Authenticator (or tokens in carmy.toml), listen on 127.0.0.1, or call AllowUnauthenticated"
			if err == nil || err.Error() != want {
				t.Fatalf("Listen(%s) = %v\nwant %s", addr, err, want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("the refusal took %v: Listen served first", d)
			}
		})
	}
	// Nothing holds the port that was refused.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Errorf("port %d is taken after the refusal: %v", port, err)
	} else {
		ln.Close()
	}

	// 192.0.2.1 is a documentation address (RFC 5737) that no interface
	// has: once the exposure check passes, binding fails, and no packet
	// is ever sent.
	t.Setenv("CARMY_CONFIG", writeConfig(t, fmt.Sprintf("[[tokens]]\nsha256 = %q\nprincipal = \"alice\"\n", carmy.HashToken(aliceToken))))
	allowed := map[string]*carmy.Builder{
		"AllowUnauthenticated": carmy.New().AllowUnauthenticated(),
		"Authenticate":         carmy.New().Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken(aliceToken), Principal: "alice"})),
		"tokens in carmy.toml": carmy.App(),
	}
	for name, b := range allowed {
		t.Run("allowed with "+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := b.Logger(quietLogger()).Tool(tool).Listen(ctx, "192.0.2.1:0")
			if err != nil && strings.Contains(err.Error(), "refusing") {
				t.Errorf("Listen was refused: %v", err)
			}
		})
	}

	t.Run("loopback serves without authentication", func(t *testing.T) {
		for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
			logs := newServeLog()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- carmy.New().Logger(slog.New(logs)).Tool(tool).Listen(ctx, addr) }()
			bound := logs.addr(t, done)
			if ip := net.ParseIP(strings.Trim(bound[:strings.LastIndexByte(bound, ':')], "[]")); ip == nil || !ip.IsLoopback() {
				t.Errorf("Listen(%s) bound %s", addr, bound)
			}
			client := &http.Client{Transport: &http.Transport{}}
			if status, body := hostGet(t, client, "http://"+bound+"/healthz", ""); status != 200 {
				t.Errorf("GET /healthz: %d %s", status, body)
			}
			client.CloseIdleConnections()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Listen(%s) after cancel = %v, want nil", addr, err)
			}
		}
	})
}

// Shutting down under load: calls already running finish and their
// callers get their results; calls racing the shutdown either get a whole
// result or no connection; Serve returns nil and nothing keeps listening.
func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	const calls = 24
	var inside atomic.Int32
	echo := carmy.Tool(func(ctx context.Context, in HostEcho) (HostEcho, error) {
		inside.Add(1)
		time.Sleep(50 * time.Millisecond) // ignores ctx: a shutdown must wait, not cancel
		return in, nil
	}, carmy.Write, carmy.Name("slow_echo"), carmy.ParallelSafe(), carmy.Register(false))
	reg, err := carmy.New().Logger(quietLogger()).Tool(echo).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ctx, ln, 5*time.Second) }()

	// Each call dials a connection of its own. A transport that keeps
	// connections alive may dial one for a call that then goes out on a
	// connection an earlier call freed (on a busy machine the first calls
	// end before the last start): the dialed one stays unused, and a
	// server that shuts down waits 5 seconds for a new connection's first
	// request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/tools/slow_echo"
	type outcome struct {
		n, status int
		res       struct {
			ExecutionID string   `json:"execution_id"`
			Output      HostEcho `json:"output"`
		}
		err error
	}
	call := func(n int) (o outcome) {
		o.n = n
		res, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, n)))
		if err != nil {
			o.err = err
			return o
		}
		defer res.Body.Close()
		o.status = res.StatusCode
		body, err := io.ReadAll(res.Body)
		if err != nil {
			o.err = err
			return o
		}
		o.err = json.Unmarshal(body, &o.res)
		return o
	}

	running := make(chan outcome, calls)
	for i := range calls {
		go func() { running <- call(i) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for inside.Load() < calls {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls started", inside.Load(), calls)
		}
		time.Sleep(time.Millisecond)
	}
	cancel() // every call is inside the tool now
	late := make(chan outcome, calls)
	for i := range calls {
		go func() { late <- call(1000 + i) }()
	}

	for range calls {
		o := <-running
		if o.err != nil || o.status != http.StatusOK || o.res.Output.N != o.n || o.res.ExecutionID == "" {
			t.Errorf("running call %d: status %d, result %+v, error %v; want its result", o.n, o.status, o.res, o.err)
		}
	}
	var servedLate int
	for range calls {
		o := <-late
		if o.err == nil {
			servedLate++
			if o.status != http.StatusOK || o.res.Output.N != o.n {
				t.Errorf("late call %d: status %d, result %+v: a response without its result", o.n, o.status, o.res)
			}
		}
	}
	t.Logf("%d of %d calls made during the shutdown were served, the others refused", servedLate, calls)
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("something still listens after Serve returned")
	}
}

// A call that outlives the drain timeout is cut off, and Serve says so.
func TestServeDrainTimeout(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	stuck := carmy.Tool(func(context.Context) error {
		close(entered)
		<-release
		return nil
	}, carmy.Write, carmy.Name("stuck"), carmy.Register(false))
	reg, err := carmy.New().Logger(quietLogger()).Tool(stuck).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	defer close(release) // before Close: the tool returns, its worker stops
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ctx, ln, 50*time.Millisecond) }()

	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	called := make(chan error, 1)
	go func() {
		res, err := (&http.Client{Transport: transport}).Post("http://"+ln.Addr().String()+"/tools/stuck", "application/json", nil)
		if err == nil {
			_, err = io.ReadAll(res.Body)
			res.Body.Close()
			if err == nil {
				err = fmt.Errorf("status %d", res.StatusCode)
			}
		}
		called <- err
	}()
	<-entered
	start := time.Now()
	cancel()
	err = <-served
	if err == nil || !strings.Contains(err.Error(), "carmy: calls still running after the drain timeout of 50ms were cut off") {
		t.Errorf("Serve = %v, want the drain timeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Serve returned %v after the cancel, with a drain timeout of 50ms", d)
	}
	if err := <-called; err == nil {
		t.Error("the cut-off call got a response")
	}
}

// A client that trickles its headers is cut off after the read-header
// timeout; an idle kept-alive connection is closed after the idle timeout.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	reg, err := carmy.SetServerTimeouts(carmy.New(), timeout, timeout).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ctx, ln, time.Second) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()

	// closedAfter reads conn until the server closes it.
	closedAfter := func(conn net.Conn, start time.Time) <-chan time.Duration {
		ch := make(chan time.Duration, 1)
		go func() {
			_, _ = io.Copy(io.Discard, conn)
			ch <- time.Since(start)
		}()
		return ch
	}

	// Each clock starts before the server's can (before the dial, before
	// the request), so a client that the scheduler delays never sees the
	// timeout as shorter than it is.
	t.Run("slow headers", func(t *testing.T) {
		start := time.Now()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := "GET /healthz HTTP/1.1\r\nHost: carmy\r\nUser-Agent: " + strings.Repeat("slow", 45) + "\r\n\r\n"
		closed := closedAfter(conn, start)
		for i := range len(req) { // a byte every 10ms: two seconds for the headers
			select {
			case d := <-closed:
				if d < timeout || d > time.Second {
					t.Errorf("the connection was closed after %v, want about %v", d, timeout)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				break // closed: the reader reports when
			}
		}
		select {
		case d := <-closed:
			if d > time.Second {
				t.Errorf("the connection was closed after %v, want about %v", d, timeout)
			}
		case <-time.After(time.Second):
			t.Error("the server waited for headers sent byte by byte")
		}
	})

	t.Run("idle connection", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: carmy\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("GET /healthz: %d, close %v; want 200 on a kept-alive connection", res.StatusCode, res.Close)
		}
		if _, err := r.ReadByte(); err != io.EOF {
			t.Errorf("idle connection: read %v, want EOF", err)
		}
		if d := time.Since(start); d < timeout || d > time.Second {
			t.Errorf("the idle connection was closed %v after the request, want about %v", d, timeout)
		}
	})
}

// App().Run serves on the address of carmy.toml with its tokens, body limit
// and default timeout, and stops on SIGTERM.
func TestAppRun(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	config := fmt.Sprintf(`listen = "127.0.0.1:0"
body_limit = "1KiB"
timeout = "7s"
drain_timeout = "2s"

[[tokens]]
sha256 = %q
principal = "alice"
permissions = ["orders:write"]
`, carmy.HashToken(aliceToken))
	dir := t.TempDir()
	path := filepath.Join(dir, "carmy.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARMY_CONFIG", path)
	for _, v := range []string{"CARMY_LISTEN", "CARMY_BODY_LIMIT", "CARMY_TIMEOUT", "CARMY_DRAIN_TIMEOUT", "CARMY_LOG_LEVEL", "CARMY_ALLOW_UNAUTHENTICATED", "CARMY_STORE_URL"} {
		t.Setenv(v, "")
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	logs := newServeLog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops Run if the test ends before SIGTERM does
	done := make(chan error, 1)
	go func() { done <- carmy.App().Logger(slog.New(logs)).Run(ctx) }()
	base := "http://" + logs.addr(t, done)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()

	if status, body := hostGet(t, client, base+"/healthz", ""); status != http.StatusOK {
		t.Errorf("GET /healthz without a token: %d %s", status, body)
	}
	if status, _ := hostGet(t, client, base+"/tools", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /tools without a token: %d, want 401", status)
	}
	if status, _ := hostGet(t, client, base+"/tools", "wrong-token"); status != http.StatusUnauthorized {
		t.Errorf("GET /tools with a wrong token: %d, want 401", status)
	}
	status, body := hostGet(t, client, base+"/tools", aliceToken)
	var tools []struct {
		Name      string `json:"name"`
		TimeoutMS int64  `json:"timeout_ms"`
	}
	if err := json.Unmarshal(body, &tools); status != http.StatusOK || err != nil {
		t.Fatalf("GET /tools: %d %s", status, body)
	}
	found := false
	for _, tool := range tools {
		if tool.Name == "carmy_test_host_whoami" {
			found = true
			if tool.TimeoutMS != 7000 {
				t.Errorf("timeout_ms %d, want the configured 7000", tool.TimeoutMS)
			}
		}
	}
	if !found {
		t.Errorf("GET /tools lacks carmy_test_host_whoami: %s", body)
	}
	status, body = hostDo(t, client, "POST", base+"/tools/carmy_test_host_whoami", aliceToken, "{}")
	var res struct {
		Output HostCaller `json:"output"`
	}
	if err := json.Unmarshal(body, &res); status != http.StatusOK || err != nil || res.Output.Principal != "alice" || len(res.Output.Permissions) != 1 || res.Output.Permissions[0] != "orders:write" {
		t.Errorf("POST as alice: %d %s", status, body)
	}
	// The server closes a connection whose body hit the limit only after
	// net/http's half-second RST-avoidance delay, which the shutdown below
	// waits for: the one slow step of this test.
	big := `{"pad":"` + strings.Repeat("x", 1100) + `"}`
	if status, body := hostDo(t, client, "POST", base+"/tools/carmy_test_host_whoami", aliceToken, big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of %d bytes with body_limit 1KiB: %d %s", len(big), status, body)
	}

	// The server is up, so Run's signal handler is in place.
	if err := self.Signal(syscall.SIGTERM); err != nil {
		cancel()
		<-done
		t.Skipf("cannot signal this process: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after SIGTERM = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop on SIGTERM")
	}
}

// App().Run on a taken port returns the bind error and never logs that it
// serves: "carmy: serving" comes only once the listener is bound.
func TestAppRunTakenPort(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := filepath.Join(t.TempDir(), "carmy.toml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "listen = %q\n", taken.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARMY_CONFIG", path)
	for _, v := range []string{"CARMY_LISTEN", "CARMY_ALLOW_UNAUTHENTICATED", "CARMY_STORE_URL"} {
		t.Setenv(v, "")
	}
	logs := newServeLog()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = carmy.App().Logger(slog.New(logs)).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("Run on the taken %s = %v, want the bind error", taken.Addr(), err)
	}
	select {
	case a := <-logs.addrs:
		t.Errorf("Run on a taken port logged that it serves on %s", a)
	default:
	}
}

// registeredTool is in carmy.Registered, unregisteredTool is not.
var (
	registeredTool   = carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("carmy_test_registered"))
	unregisteredTool = carmy.Tool(func() error { return nil }, carmy.None, carmy.Name("carmy_test_unregistered"), carmy.Register(false))
)

// Registered gives App's tools without App's configuration: a carmy.toml
// that App could not build with does not matter to it.
func TestRegistered(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	path := filepath.Join(t.TempDir(), "carmy.toml")
	if err := os.WriteFile(path, []byte("listen = 42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARMY_CONFIG", path)
	if _, err := carmy.App().Build(); err == nil {
		t.Fatal("App().Build with a broken carmy.toml succeeded")
	}
	defs := carmy.Registered()
	if !slices.Contains(defs, registeredTool) || slices.Contains(defs, unregisteredTool) {
		t.Errorf("Registered() = %d tools: has registeredTool %v, has unregisteredTool %v",
			len(defs), slices.Contains(defs, registeredTool), slices.Contains(defs, unregisteredTool))
	}
	reg, err := carmy.New().Logger(quietLogger()).Tool(defs...).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, ok := reg.Lookup("carmy_test_registered"); !ok {
		t.Error("the registry built from Registered() lacks carmy_test_registered")
	}
	// Registered returns a copy.
	defs[0] = nil
	if carmy.Registered()[0] == nil {
		t.Error("Registered() shares its slice")
	}
}
