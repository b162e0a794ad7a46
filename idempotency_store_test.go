package carmy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// plainStore is an idempotency store with none of the optional
// capabilities: the runtime falls back to what every store has.
type plainStore struct{ store.IdempotencyStore }

// countedStore is the memory store, with its lookup and its nonces, that
// counts the calls the runtime makes of each.
type countedStore struct {
	store.IdempotencyStore
	begins, finds, nonces, nonceBegins atomic.Int32
}

func (s *countedStore) Begin(ctx context.Context, key store.Key, digest string, lease time.Duration) (store.Reservation, error) {
	s.begins.Add(1)
	if strings.HasPrefix(key.RequestID, "confirmed ") {
		s.nonceBegins.Add(1)
	}
	return s.IdempotencyStore.Begin(ctx, key, digest, lease)
}

func (s *countedStore) Find(ctx context.Context, key store.Key) (store.Reservation, bool, error) {
	s.finds.Add(1)
	return s.IdempotencyStore.(store.Finder).Find(ctx, key)
}

func (s *countedStore) UseNonce(ctx context.Context, principal, nonce string, ttl time.Duration) (bool, error) {
	s.nonces.Add(1)
	return s.IdempotencyStore.(store.NonceStore).UseNonce(ctx, principal, nonce, ttl)
}

// storesUnderTest are a store with the optional capabilities the runtime
// uses and one without: both must keep the same promises.
func storesUnderTest(t *testing.T) map[string]func() (store.IdempotencyStore, *countedStore) {
	memory := func() store.IdempotencyStore {
		s := store.NewMemoryStore(0, 0)
		t.Cleanup(func() { _ = s.(io.Closer).Close() })
		return s
	}
	return map[string]func() (store.IdempotencyStore, *countedStore){
		"with capabilities": func() (store.IdempotencyStore, *countedStore) {
			c := &countedStore{IdempotencyStore: memory()}
			return c, c
		},
		"without": func() (store.IdempotencyStore, *countedStore) {
			c := &countedStore{IdempotencyStore: memory()}
			return plainStore{c}, c
		},
	}
}

// TestRecordedOutcomeLookup: the retry, with its request id, of a call
// that ran under an approval since used up gets its outcome while the same
// input waits for a new approval; a store with a lookup ([store.Finder]) is
// asked without reserving the key, one without is asked with a Begin.
func TestRecordedOutcomeLookup(t *testing.T) {
	t.Parallel()
	for name, newStore := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, counted := newStore()
			srv, reg, runs := approvalServer(t, carmy.New().Store(s))
			person := consoleClient(t, srv, reg)
			call := func(key string) (int, any) {
				return httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`, "Idempotency-Key", key)
			}
			_, body := call("k1")
			httpDo(t, person, "POST", srv.URL+"/approvals/"+detail(body, "approval_id")+"/approve", "")
			if status, _ := call("k1"); status != 200 || runs.Load() != 1 {
				t.Fatalf("the approved call = %d, runs %d; want it run", status, runs.Load())
			}
			if status, _ := call("k2"); status != 403 {
				t.Fatalf("a new request id = %d; want it to wait for a new approval", status)
			}
			begins, finds := counted.begins.Load(), counted.finds.Load()
			status, again := call("k1")
			if m, _ := again.(map[string]any); status != 200 || m["replayed"] != true || runs.Load() != 1 {
				t.Fatalf("the retry of k1 while k2 waits = %d %v, runs %d; want the replay", status, again, runs.Load())
			}
			switch finds, took := counted.finds.Load()-finds, counted.begins.Load()-begins; {
			case name == "with capabilities" && (finds != 1 || took != 0):
				t.Fatalf("the lookup made %d finds and %d begins; want one find and no reservation", finds, took)
			case name == "without" && (finds != 0 || took != 1):
				t.Fatalf("the lookup made %d finds and %d begins; want one begin", finds, took)
			}
		})
	}
}

// TestConfirmedStateNonce: the state a sessionless round hands on once
// confirmed lets one round run, whether the store keeps one-time nonces
// ([store.NonceStore]) or not; a store that keeps them is asked, and no
// record under a made-up request id is kept.
func TestConfirmedStateNonce(t *testing.T) {
	t.Parallel()
	for name, newStore := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, counted := newStore()
			var done atomic.Int32
			tool := carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
				var ask Ask
				if ok, err := ctx.Elicit("why?", &ask); err != nil || !ok {
					return "", err
				}
				done.Add(1)
				return ask.Reason, nil
			}, carmy.Destructive, carmy.Name("ask_then_burn"), carmy.RequireConfirmation(), carmy.Register(false))
			reg := build(t, carmy.New().Tool(tool).Store(s).ElicitConfirmation().Logger(quietLogger()))
			srv := serve(t, reg)
			c := sessionless{t, srv.URL}
			const in = `{"text":"x"}`
			_, state, _ := question(c.call("ask_then_burn", in, ""))
			confirmed, _ := c.call("ask_then_burn", in, answer("carmy/confirm", state, accept))["requestState"].(string)
			reason := answer("ask", confirmed, `{"action":"accept","content":{"reason":"because"}}`)
			if r := c.call("ask_then_burn", in, reason); r["isError"] == true || r["resultType"] == "input_required" {
				t.Fatalf("the tool's round: %v; want the result", r)
			}
			if r := c.call("ask_then_burn", in, reason); r["resultType"] != "input_required" {
				t.Fatalf("the confirmed state a second time: %v; want a new confirmation question", r)
			}
			if done.Load() != 1 {
				t.Fatalf("the tool finished %d times; want 1", done.Load())
			}
			switch nonces, begins := counted.nonces.Load(), counted.nonceBegins.Load(); {
			case name == "with capabilities" && (nonces != 2 || begins != 0):
				t.Fatalf("%d nonces used and %d records of nonces; want 2 nonces and no record", nonces, begins)
			case name == "without" && (nonces != 0 || begins != 2):
				t.Fatalf("%d nonces used and %d records of nonces; want 2 records", nonces, begins)
			}
		})
	}
}
