package carmy_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// askThenBurn is a destructive tool that needs confirmation and asks its
// own question once confirmed, so that a confirmed state travels to a
// second round; done counts the runs that finished.
func askThenBurn(done *atomic.Int32) *carmy.ToolDef {
	return carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
		var ask Ask
		if ok, err := ctx.Elicit("why?", &ask); err != nil || !ok {
			return "", err
		}
		done.Add(1)
		return ask.Reason, nil
	}, carmy.Destructive, carmy.Name("ask_then_burn"), carmy.RequireConfirmation(), carmy.Register(false))
}

// sessionlessHost serves a registry of askThenBurn made by b.
func sessionlessHost(t *testing.T, b *carmy.Builder, done *atomic.Int32) sessionless {
	t.Helper()
	reg := build(t, b.Tool(askThenBurn(done)).ElicitConfirmation().Logger(quietLogger()))
	srv := serve(t, reg)
	return sessionless{t, srv.URL}
}

// confirmedOn confirms the call of ask_then_burn on host and returns the
// state of the round that answers the tool's own question.
func confirmedOn(t *testing.T, host sessionless, in string) string {
	t.Helper()
	_, state, _ := question(host.call("ask_then_burn", in, ""))
	r := host.call("ask_then_burn", in, answer("carmy/confirm", state, accept))
	confirmed, _ := r["requestState"].(string)
	if q, _ := r["inputRequests"].(map[string]any); q["ask"] == nil || !strings.HasPrefix(confirmed, "carmy/round:") {
		t.Fatalf("after the confirmation: %v; want the tool's question with a confirmed state", r)
	}
	return answer("ask", confirmed, `{"action":"accept","content":{"reason":"because"}}`)
}

// TestSessionlessStateBelongsToItsRegistry: the confirmation a person gave
// a staging registry is not taken by a production registry in the same
// process, which asks its own person instead of running the destructive
// call; nor is staging's question's state.
func TestSessionlessStateBelongsToItsRegistry(t *testing.T) {
	t.Parallel()
	var stagingDone, prodDone atomic.Int32
	staging := sessionlessHost(t, carmy.New(), &stagingDone)
	production := sessionlessHost(t, carmy.New(), &prodDone)
	const in = `{"text":"drop customers"}`
	round := confirmedOn(t, staging, in)
	if code := production.refused("ask_then_burn", in, round); code != -32602 || prodDone.Load() != 0 {
		t.Fatalf("production given staging's confirmation: error %d (finished %d); want invalid params (-32602) and nothing run", code, prodDone.Load())
	}
	_, asked, _ := question(staging.call("ask_then_burn", `{"text":"x"}`, ""))
	if code := production.refused("ask_then_burn", `{"text":"x"}`, answer("carmy/confirm", asked, accept)); code != -32602 || prodDone.Load() != 0 {
		t.Fatalf("production given an answer to staging's question: error %d (finished %d); want invalid params (-32602) and nothing run", code, prodDone.Load())
	}
	if r := staging.call("ask_then_burn", in, round); r["isError"] == true || r["resultType"] == "input_required" || stagingDone.Load() != 1 {
		t.Fatalf("staging's own next round: %v; want the result", r)
	}
}

// TestSessionlessStateAcrossHosts: the next round of a call verifies on
// another host of the same deployment, whether the hosts share their store
// (whose shared key signs) or a key given to each (Builder.StateKey); and
// its audit record names the approval and its approver, as the round that
// used the approval does.
func TestSessionlessStateAcrossHosts(t *testing.T) {
	t.Parallel()
	shared := store.NewMemoryStore(0, 0)
	t.Cleanup(func() { _ = shared.(io.Closer).Close() })
	key := bytes.Repeat([]byte{7}, carmy.MinStateKeySize)
	for name, builder := range map[string]func() *carmy.Builder{
		"a shared store": func() *carmy.Builder { return carmy.New().Store(shared) },
		"a shared key":   func() *carmy.Builder { return carmy.New().StateKey(key) },
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var records []carmy.AuditRecord
			sink := carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
				mu.Lock()
				defer mu.Unlock()
				records = append(records, rec)
				return nil
			})
			var doneA, doneB atomic.Int32
			a := sessionlessHost(t, builder(), &doneA)
			b := sessionlessHost(t, builder().Audit(sink), &doneB)
			in := `{"text":"` + name + `"}`
			round := confirmedOn(t, a, in)
			if r := b.call("ask_then_burn", in, round); r["isError"] == true || r["resultType"] == "input_required" || doneB.Load() != 1 {
				t.Fatalf("the next round on another host: %v; want the result", r)
			}
			mu.Lock()
			defer mu.Unlock()
			var executed *carmy.AuditRecord
			for i := range records {
				if records[i].Decision == carmy.AuditExecuted {
					executed = &records[i]
				}
			}
			if executed == nil || executed.ApprovalID == "" || executed.Approver != "elicitation:" {
				t.Fatalf("audit records %+v; want the executed one to name the approval and its approver", records)
			}
		})
	}
}

// TestStateKeyTooShort: Build refuses a key too short to sign with.
func TestStateKeyTooShort(t *testing.T) {
	_, err := carmy.New().StateKey([]byte("short")).Build()
	if err == nil || !strings.Contains(err.Error(), "StateKey") {
		t.Fatalf("Build = %v; want the short key reported", err)
	}
}
