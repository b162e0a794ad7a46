package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// When Redis loses its state, the host that recorded an outcome records it
// again while new executions are held, so that a retry on another host
// gets the outcome instead of running again. Without a journal the retry
// runs again once the hold ends: that is what the journal is for.
func TestJournalRecordsLostOutcomesAgain(t *testing.T) {
	const lease = 400 * time.Millisecond
	for _, tc := range []struct {
		name     string
		journal  int64
		replayed bool
	}{
		{"default journal", DefaultJournal, true},
		{"no journal", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			prefix := testPrefix(t, c)
			a := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond), WithJournal(tc.journal))
			b := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond))
			ctx := context.Background()
			key := store.Key{Principal: "agent", Tool: "pay", RequestID: "r1"}

			// b knows the marker, so it notices the loss.
			if _, err := b.Begin(ctx, store.Key{Principal: "agent", Tool: "pay", RequestID: "other"}, "d", lease); err != nil {
				t.Fatal(err)
			}
			r, err := a.Begin(ctx, key, "digest", lease)
			if err != nil || !r.Owned {
				t.Fatalf("Begin = %+v, %v", r, err)
			}
			rec := store.Record{Digest: "digest", ExecutionID: "exec-1", Output: []byte(`"paid"`)}
			if err := a.Complete(ctx, key, r.Token, rec, time.Hour); err != nil {
				t.Fatal(err)
			}

			deleteKeys(c, prefix) // Redis restarted without persistence

			held, start := 0, time.Now()
			for {
				got, err := b.Begin(ctx, key, "digest", lease)
				if errors.Is(err, store.ErrRecovering) {
					held++
					if time.Since(start) > 20*lease {
						t.Fatalf("still held after %v", time.Since(start))
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if held == 0 {
					t.Error("the first Begin after the loss was not held")
				}
				if tc.replayed {
					if got.Owned || got.Record == nil || got.Record.ExecutionID != "exec-1" || string(got.Record.Output) != `"paid"` {
						t.Fatalf("Begin after the loss = %+v; want the outcome recorded before it", got)
					}
					if ttl := c.PTTL(ctx, a.idemKey(key)).Val(); ttl < 50*time.Minute || ttl > time.Hour {
						t.Errorf("the restored record expires in %v; want what was left of its hour", ttl)
					}
					if n := c.ZCard(ctx, a.recordsKey("agent")).Val(); n != 1 {
						t.Errorf("the principal's records = %d; want the restored one", n)
					}
				} else if !got.Owned {
					t.Fatalf("Begin after the hold without a journal = %+v; want a new reservation (the run again the journal prevents)", got)
				}
				return
			}
		})
	}
}

// A record that Redis kept through a restart is left as it is: the
// journal records only what is gone.
func TestJournalLeavesKeptRecordsAlone(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	a := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond))
	ctx := context.Background()
	key := store.Key{Principal: "agent", Tool: "pay", RequestID: "kept"}
	r, err := a.Begin(ctx, key, "digest", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, key, r.Token, store.Record{Digest: "digest", ExecutionID: "exec-1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Another host's later record of the same key (as after the record
	// expired and the request id came back) must survive the restore.
	if err := c.HSet(ctx, a.idemKey(key), "e", "exec-2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, prefix+"marker", "run", "another-server").Err(); err != nil { // a restart with AOF
		t.Fatal(err)
	}
	if got, err := a.restore(ctx); err != nil || got != 0 {
		t.Fatalf("restore = %d, %v; want 0 records restored", got, err)
	}
	if e := c.HGet(ctx, a.idemKey(key), "e").Val(); e != "exec-2" {
		t.Fatalf("record's execution = %q; want exec-2, left alone", e)
	}
}

// The journal keeps the newest outcomes within its budget of bytes, and
// forgets those whose record expired.
func TestJournalBounds(t *testing.T) {
	now := time.Now()
	e := func(id string, at time.Time, ttl time.Duration, out int) entry {
		return entry{key: id, rec: store.Record{ExecutionID: id, Output: make([]byte, out)}, at: at, ttl: ttl}
	}
	first := e("k0", now, time.Hour, 100)
	size := first.bytes()
	j := journal{budget: 3 * size}
	for i := range 5 {
		j.add(e(fmt.Sprintf("k%d", i), now.Add(time.Duration(i)*time.Millisecond), time.Hour, 100))
	}
	var ids []string
	for _, x := range j.live(now) {
		ids = append(ids, x.key)
	}
	if got := strings.Join(ids, ","); got != "k2,k3,k4" || j.size != 3*size {
		t.Fatalf("journal holds %s (%d bytes); want k2,k3,k4 (%d)", got, j.size, 3*size)
	}
	j.add(e("huge", now, time.Hour, int(4*size)))
	if len(j.entries) != 3 {
		t.Fatalf("an outcome larger than the budget was kept: %d entries", len(j.entries))
	}
	j.add(e("k9", now.Add(2*time.Hour), time.Hour, 100))
	if len(j.entries) != 1 || j.entries[0].key != "k9" || j.size != size {
		t.Fatalf("expired outcomes were kept: %d entries, %d bytes", len(j.entries), j.size)
	}
	if live := j.live(now.Add(4 * time.Hour)); len(live) != 0 {
		t.Fatalf("live after expiry = %d entries", len(live))
	}
}

// A replica promoted before an outcome reached it still holds the
// outcome's reservation: the journal records the outcome over it, since
// the reservation would otherwise lapse with its lease and let a retry run
// the call again. A reservation of another token is another execution's,
// and is left alone.
func TestJournalRestoresOverItsOwnReservation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		token    func(own string) string // the token the promoted replica holds
		restored int
	}{
		{"same token", func(own string) string { return own }, 1},
		{"another token", func(string) string { return "another-execution" }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			prefix := testPrefix(t, c)
			a := newStore(t, c, prefix, WithLogger(quiet), WithPollInterval(20*time.Millisecond))
			ctx := context.Background()
			key := store.Key{Principal: "agent", Tool: "pay", RequestID: "lagged"}
			r, err := a.Begin(ctx, key, "digest", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Complete(ctx, key, r.Token, store.Record{Digest: "digest", ExecutionID: "exec-1", Output: []byte(`"paid"`)}, time.Hour); err != nil {
				t.Fatal(err)
			}
			// The promoted replica: the reservation, as it was before the
			// record replaced it, and a new server.
			k := a.idemKey(key)
			c.Del(ctx, k)
			if err := c.HSet(ctx, k, "d", "digest", "t", tc.token(r.Token)).Err(); err != nil {
				t.Fatal(err)
			}
			c.PExpire(ctx, k, time.Minute)
			if got, err := a.restore(ctx); err != nil || got != tc.restored {
				t.Fatalf("restore = %d, %v; want %d", got, err, tc.restored)
			}
			got, err := newStore(t, c, prefix, WithLogger(quiet)).Begin(ctx, key, "digest", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if tc.restored == 1 {
				if got.Record == nil || got.Record.ExecutionID != "exec-1" || string(got.Record.Output) != `"paid"` {
					t.Fatalf("Begin after the restore = %+v; want the outcome", got)
				}
				if ttl := c.PTTL(ctx, k).Val(); ttl < 50*time.Minute {
					t.Errorf("the restored record expires in %v; want what was left of its hour", ttl)
				}
				return
			}
			if got.Owned || got.Record != nil || c.HGet(ctx, k, "t").Val() != "another-execution" {
				t.Fatalf("Begin after the restore = %+v; want the other execution's reservation, left alone", got)
			}
		})
	}
}
