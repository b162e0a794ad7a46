package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// GET /approvals/{id}?wait= on one host wakes when a person decides on
// another, by the store's notification: the hosts' poll interval is an
// hour, far longer than the test. docs/reliability.md reports the times
// from decision to answer (go test -v -run TestApprovalWaitWakesAcrossHosts).
func TestApprovalWaitWakesAcrossHosts(t *testing.T) {
	const approvals, waitersEach = 50, 4
	c := newClient(t)
	prefix := testPrefix(t, c)
	type in struct {
		ID int `json:"id"`
	}
	del := carmy.Tool(func(in) error { return nil }, carmy.Destructive,
		carmy.Name("delete_note"), carmy.RequireConfirmation(), carmy.Register(false))
	auth := carmy.BearerTokens(
		carmy.Token{SHA256: carmy.HashToken("agent"), Principal: "agent"},
		carmy.Token{SHA256: carmy.HashToken("alice"), Principal: "alice", Permissions: []string{"approve:*"}},
	)
	var stores [2]*Store
	var srvs [2]*httptest.Server
	var regs [2]*carmy.Registry
	for i := range stores {
		stores[i] = newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(time.Hour))
		reg := build(t, carmy.New().Tool(del).Store(stores[i]).Authenticate(auth).Logger(quiet))
		regs[i] = reg
		srvs[i] = httptest.NewServer(reg.Handler())
		t.Cleanup(srvs[i].Close)
	}
	ctx := context.Background()
	var lags []time.Duration
	for n := range approvals {
		_, err := regs[0].Execute(ctx, carmy.Call{Tool: "delete_note", Input: fmt.Appendf(nil, `{"id":%d}`, n), Principal: "agent"})
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
			t.Fatalf("call = %v; want confirmation_required", err)
		}
		id, _ := e.Details["approval_id"].(string)
		var wg sync.WaitGroup
		woke := make(chan time.Time, waitersEach)
		for range waitersEach {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", srvs[1].URL+"/approvals/"+id+"?wait=30s", nil)
				req.Header.Set("Authorization", "Bearer alice")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var a struct {
					Status string `json:"status"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				if a.Status != string(store.ApprovalApproved) {
					t.Errorf("the wait answered %d with status %q; want approved", resp.StatusCode, a.Status)
				}
				woke <- time.Now()
			})
		}
		time.Sleep(50 * time.Millisecond) // the waiters wait
		decided := time.Now()
		if _, err := stores[0].Decide(ctx, id, true, "alice"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(woke)
		for at := range woke {
			lags = append(lags, at.Sub(decided))
			if testing.Verbose() && n < 2 {
				t.Logf("approval %d: %v", n, at.Sub(decided))
			}
		}
	}
	if len(lags) != approvals*waitersEach {
		t.Fatalf("%d of %d waits answered", len(lags), approvals*waitersEach)
	}
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))].Round(10 * time.Microsecond) }
	t.Logf("%d waits on another host, from decision to answer: p50 %v, p99 %v, max %v", len(lags), pct(0.5), pct(0.99), lags[len(lags)-1].Round(10*time.Microsecond))
	if worst := lags[len(lags)-1]; worst > 20*time.Second {
		t.Errorf("a wait answered %v after the decision: it was not woken by the store's notification", worst)
	}
}

// A store subscribes to its channel when it is made, not when its first
// caller waits: the first wait is then woken as fast as the later ones,
// rather than after a subscription is made (which, on a busy host, was
// the slowest wake-up measured).
func TestStoreSubscribesWhenMade(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	newStore(t, c, prefix, WithLogger(quiet))
	ctx := context.Background()
	for range 500 {
		n, err := c.PubSubNumSub(ctx, prefix+"done").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[prefix+"done"] == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the store has no subscription 5 s after it was made, with no waiter")
}
