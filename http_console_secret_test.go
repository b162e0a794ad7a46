package carmy_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

var consoleURLPattern = regexp.MustCompile(`http://127\.0\.0\.1:\d+/console\?token=[0-9a-f]{64}`)

// listen serves b with Listen on a free port and returns what it printed
// and what it logged, once it serves and printed its console URL, if any.
func listen(t *testing.T, b *carmy.Builder) (printed, logged string) {
	t.Helper()
	out, log := &logSink{}, &logSink{}
	carmy.SetConsoleOut(b, out, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Logger(slog.New(slog.NewTextHandler(log, nil))).Listen(ctx, "127.0.0.1:0") }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The URL is printed right after the server logs that it serves.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if consoleURLPattern.MatchString(out.String()) || strings.Contains(log.String(), "carmy: serving") {
			time.Sleep(20 * time.Millisecond)
			break
		}
	}
	return out.String(), log.String()
}

// A server without an authenticator prints its console URL, whose secret
// alone lets a browser decide approvals; the agent, without it, cannot.
func TestListenPrintsConsoleURL(t *testing.T) {
	t.Parallel()
	del := carmy.Tool(func(DeleteNote) error { return nil }, carmy.Destructive, carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	printed, logged := listen(t, carmy.New().Tool(del))
	link := consoleURLPattern.FindString(printed)
	if link == "" {
		t.Fatalf("printed %q; want the console URL with its secret", printed)
	}
	if strings.Contains(logged, "token=") {
		t.Fatalf("logged %q; the secret goes to the terminal only", logged)
	}
	base := link[:strings.Index(link, "/console")]
	_, body := httpDo(t, http.DefaultClient, "POST", base+"/tools/delete_note", `{"id":1}`)
	id := detail(body, "approval_id")
	if !strings.HasPrefix(detail(body, "approval_url"), base+"/console?approval=") {
		t.Fatalf("approval_url = %q; want the console on %s", detail(body, "approval_url"), base)
	}
	if status, _ := httpDo(t, http.DefaultClient, "POST", base+"/approvals/"+id+"/approve", ""); status != 403 {
		t.Fatalf("approving without the secret = %d; want 403", status)
	}
	// Opening the console URL sets no cookie: browsers send a host's
	// cookies to all of its ports, so a dev server on another port of
	// 127.0.0.1 would get the approver's rights.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if res, err := browser.Get(link); err != nil || res.StatusCode != 200 || len(res.Cookies()) != 0 {
		t.Fatalf("opening the console URL: %v, cookies %v", err, res.Cookies())
	} else {
		res.Body.Close()
	}
	if status, _ := httpDo(t, browser, "POST", base+"/approvals/"+id+"/approve", "", "Origin", base, "Sec-Fetch-Site", "same-origin"); status != 403 {
		t.Fatalf("the browser that opened the URL, without the page's header = %d; want 403", status)
	}
	secret := link[strings.Index(link, "token=")+len("token="):]
	// The page's own requests are same-origin; one from another page is
	// refused, secret or not, an allowed origin's too.
	for _, h := range [][]string{
		{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://127.0.0.1:5173", "Sec-Fetch-Site", "same-site"},
		{"Origin", "http://127.0.0.1:5173"},
	} {
		if status, _ := httpDo(t, browser, "POST", base+"/approvals/"+id+"/approve", "", append(h, carmy.ConsoleHeader, secret)...); status != 403 {
			t.Fatalf("a decision from %v with the secret = %d; want 403", h, status)
		}
	}
	if status, body := httpDo(t, browser, "POST", base+"/approvals/"+id+"/approve", "", "Origin", base, "Sec-Fetch-Site", "same-origin", carmy.ConsoleHeader, secret); status != 200 {
		t.Fatalf("approving with the secret = %d %v; want 200", status, body)
	}
}

// TestConsoleSecretNotLogged: when standard error is not a terminal (under
// systemd, Docker or Kubernetes it is the collected log), the console URL
// goes to a file only the user can read, whose path is logged; the secret
// is neither printed nor logged.
func TestConsoleSecretNotLogged(t *testing.T) {
	// Serial: t.Setenv changes the whole process.
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	out, log := &logSink{}, &logSink{}
	b := carmy.SetConsoleOut(carmy.New(), out, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Logger(slog.New(slog.NewTextHandler(log, nil))).Listen(ctx, "127.0.0.1:0") }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var path string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && path == ""; time.Sleep(5 * time.Millisecond) {
		if m := regexp.MustCompile(`path=(\S+)`).FindStringSubmatch(log.String()); m != nil {
			path = m[1]
		}
	}
	if path == "" || !strings.HasPrefix(path, dir) {
		t.Fatalf("logged %q; want the path of the file in %s", log.String(), dir)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, mode %v; want 0600", err, fi.Mode())
	}
	raw, _ := os.ReadFile(path)
	if !consoleURLPattern.Match(raw) {
		t.Fatalf("the file holds %q; want the console URL", raw)
	}
	if strings.Contains(out.String(), "token=") || strings.Contains(log.String(), "token=") {
		t.Fatalf("printed %q, logged %q; the secret is in the file only", out.String(), log.String())
	}
}

func TestListenWithAuthenticatorPrintsNoSecret(t *testing.T) {
	t.Parallel()
	printed, _ := listen(t, carmy.New().Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("x"), Principal: "p"})))
	if strings.Contains(printed, "token=") {
		t.Fatalf("printed %q; a server with an authenticator has no console secret", printed)
	}
}
