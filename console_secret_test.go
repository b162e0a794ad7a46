package carmy_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// syncBuffer is a buffer a server writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var consoleURLPattern = regexp.MustCompile(`http://127\.0\.0\.1:\d+/console\?token=[0-9a-f]{64}`)

// listen serves b with Listen on a free port and returns what it printed
// and what it logged, once it serves and printed its console URL, if any.
func listen(t *testing.T, b *carmy.Builder) (printed, logged string) {
	t.Helper()
	out, log := &syncBuffer{}, &syncBuffer{}
	t.Cleanup(carmy.SetConsoleOut(out))
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
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if res, err := browser.Get(link); err != nil || res.StatusCode != 200 {
		t.Fatalf("opening the console URL: %v", err)
	} else {
		res.Body.Close()
	}
	// The browser's own requests are same-origin; one from another page is
	// refused, cookie or not.
	if status, _ := httpDo(t, browser, "POST", base+"/approvals/"+id+"/approve", "", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"); status != 403 {
		t.Fatalf("a cross-origin decision with the cookie = %d; want 403", status)
	}
	if status, body := httpDo(t, browser, "POST", base+"/approvals/"+id+"/approve", "", "Origin", base, "Sec-Fetch-Site", "same-origin"); status != 200 {
		t.Fatalf("approving with the secret = %d %v; want 200", status, body)
	}
}

func TestListenWithAuthenticatorPrintsNoSecret(t *testing.T) {
	printed, _ := listen(t, carmy.New().Authenticate(carmy.BearerTokens(carmy.Token{SHA256: carmy.HashToken("x"), Principal: "p"})))
	if strings.Contains(printed, "token=") {
		t.Fatalf("printed %q; a server with an authenticator has no console secret", printed)
	}
}
