package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// TestApprovalStore runs the approval suite. newStore must return a fresh
// store each time, whose approvals no other store shares.
func TestApprovalStore(t *testing.T, newStore func(t *testing.T) store.ApprovalStore) {
	ctx := context.Background()
	n := 0
	fresh := func(principal, digest string, ttl time.Duration) store.Approval {
		n++
		now := time.Now().Truncate(time.Millisecond)
		return store.Approval{
			ID: "a" + strconv.Itoa(n) + "-" + strconv.FormatInt(now.UnixNano(), 36), Tool: "delete_note", Principal: principal,
			Input: []byte(`{"id":7}`), Digest: digest, Status: store.ApprovalPending, Created: now, Expires: now.Add(ttl),
		}
	}
	create := func(t *testing.T, s store.ApprovalStore, a store.Approval) store.Approval {
		t.Helper()
		got, err := s.Create(ctx, a)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		return got
	}
	want := func(t *testing.T, got store.Approval, status store.ApprovalStatus, id string) {
		t.Helper()
		if got.Status != status || got.ID != id {
			t.Fatalf("approval = %s %s; want %s %s", got.ID, got.Status, id, status)
		}
	}

	t.Run("Create records a pending approval that Get returns", func(t *testing.T) {
		s := newStore(t)
		a := fresh("alice", "d1", long)
		a.RequestID = "r1"
		want(t, create(t, s, a), store.ApprovalPending, a.ID)
		got, err := s.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tool != a.Tool || got.Principal != "alice" || string(got.Input) != `{"id":7}` || got.Digest != "d1" || got.RequestID != "r1" ||
			!got.Created.Equal(a.Created) || !got.Expires.Equal(a.Expires) || got.Status != store.ApprovalPending {
			t.Fatalf("Get = %+v; want %+v", got, a)
		}
		got.Input[0] = 'X'
		if again, _ := s.Get(ctx, a.ID); string(again.Input) != `{"id":7}` {
			t.Fatalf("Input = %s after the caller changed its copy", again.Input)
		}
	})

	t.Run("unknown ids are not found", func(t *testing.T) {
		s := newStore(t)
		for name, err := range map[string]error{
			"Get":     second(s.Get(ctx, "nope")),
			"Decide":  second(s.Decide(ctx, "nope", true, "bob")),
			"Consume": second(s.Consume(ctx, "nope", "")),
		} {
			if !errors.Is(err, store.ErrApprovalNotFound) {
				t.Errorf("%s = %v; want ErrApprovalNotFound", name, err)
			}
		}
	})

	t.Run("one live approval per principal, tool and digest", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", long))
		want(t, create(t, s, fresh("alice", "d1", long)), store.ApprovalPending, a.ID)
		if b := create(t, s, fresh("bob", "d1", long)); b.ID == a.ID {
			t.Fatal("another principal's call got alice's approval")
		}
		if c := create(t, s, fresh("alice", "d2", long)); c.ID == a.ID {
			t.Fatal("another input got the approval")
		}
		list, err := s.List(ctx, "", 0)
		if err != nil || len(list) != 3 || list[2].ID != a.ID {
			t.Fatalf("List = %d approvals, %v; want 3, newest first", len(list), err)
		}
	})

	t.Run("List pages summaries, newest first", func(t *testing.T) {
		s := newStore(t)
		var ids []string // newest first
		for i := range 7 {
			time.Sleep(2 * time.Millisecond) // creation times apart: stores order by them
			a := create(t, s, fresh("alice", "d"+strconv.Itoa(i), long))
			ids = append([]string{a.ID}, ids...)
		}
		var got []string
		after := ""
		for range len(ids) {
			page, err := s.List(ctx, after, 3)
			if err != nil || len(page) > 3 {
				t.Fatalf("List(%q, 3) = %d approvals, %v", after, len(page), err)
			}
			if len(page) == 0 {
				break
			}
			for _, a := range page {
				if a.Input != nil || a.Tool != "delete_note" || a.Principal != "alice" || a.Digest == "" || a.Status != store.ApprovalPending || a.Expires.IsZero() {
					t.Fatalf("List gave %+v; want a summary: every field but the input", a)
				}
				got = append(got, a.ID)
			}
			after = page[len(page)-1].ID
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("pages gave %v; want %v", got, ids)
		}
		if page, err := s.List(ctx, "gone", 3); err != nil || len(page) != 0 {
			t.Fatalf("List after an approval not kept = %d, %v; want none", len(page), err)
		}
		if full, err := s.Get(ctx, ids[0]); err != nil || string(full.Input) != `{"id":7}` {
			t.Fatalf("Get after List = %s, %v; want the input", full.Input, err)
		}
	})

	t.Run("inputs are bounded in bytes per principal", func(t *testing.T) {
		s := newStore(t)
		mib := []byte(`{"blob":"` + strings.Repeat("x", 1<<20-11) + `"}`)
		n := 0
		for ; n <= store.DefaultApprovalBytes>>20; n++ {
			a := fresh("mallory", "flood"+strconv.Itoa(n), long)
			a.Input = mib
			if _, err := s.Create(ctx, a); errors.Is(err, store.ErrApprovalCapacity) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if n != store.DefaultApprovalBytes>>20 {
			t.Fatalf("mallory's approval %d of 1 MiB was refused; want the %dth refused with ErrApprovalCapacity", n+1, store.DefaultApprovalBytes>>20+1)
		}
		create(t, s, fresh("alice", "d1", long)) // another principal's call still asks

		s = newStore(t)
		for i := range store.DefaultApprovalBytes >> 20 {
			a := fresh("mallory", "short"+strconv.Itoa(i), short)
			a.Input = mib
			create(t, s, a)
		}
		time.Sleep(2 * short) // they expire, and give their bytes back
		for i := range store.DefaultApprovalBytes >> 20 {
			a := fresh("mallory", "after"+strconv.Itoa(i), long)
			a.Input = mib
			create(t, s, a)
		}
	})

	t.Run("approved, then used once", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", long))
		d, err := s.Decide(ctx, a.ID, true, "bob")
		if err != nil || d.Status != store.ApprovalApproved || d.Approver != "bob" || d.Decided.IsZero() {
			t.Fatalf("Decide = %+v, %v; want approved by bob, with a time", d, err)
		}
		want(t, create(t, s, fresh("alice", "d1", long)), store.ApprovalApproved, a.ID)
		u, err := s.Consume(ctx, a.ID, "r9")
		if err != nil || u.Status != store.ApprovalUsed || u.UsedBy != "r9" {
			t.Fatalf("Consume = %+v, %v; want used by r9", u, err)
		}
		if u, err := s.Consume(ctx, a.ID, "r9"); !errors.Is(err, store.ErrApprovalState) || u.Status != store.ApprovalUsed {
			t.Fatalf("second Consume = %s, %v; want used, ErrApprovalState", u.Status, err)
		}
		again := fresh("alice", "d1", long)
		again.RequestID = "r9"
		want(t, create(t, s, again), store.ApprovalUsed, a.ID) // the retry of the call that used it
		if b := create(t, s, fresh("alice", "d1", long)); b.ID == a.ID || b.Status != store.ApprovalPending {
			t.Fatalf("a new call after the use got %s %s; want a new pending approval", b.ID, b.Status)
		}
	})

	t.Run("a denial is final", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", long))
		if d, err := s.Decide(ctx, a.ID, false, "bob"); err != nil || d.Status != store.ApprovalDenied || d.Approver != "bob" {
			t.Fatalf("Decide = %+v, %v; want denied by bob", d, err)
		}
		if d, err := s.Decide(ctx, a.ID, true, "carol"); !errors.Is(err, store.ErrApprovalState) || d.Status != store.ApprovalDenied || d.Approver != "bob" {
			t.Fatalf("approving a denied approval = %+v, %v; want it denied by bob, ErrApprovalState", d, err)
		}
		if _, err := s.Consume(ctx, a.ID, ""); !errors.Is(err, store.ErrApprovalState) {
			t.Fatalf("Consume of a denied approval = %v; want ErrApprovalState", err)
		}
		want(t, create(t, s, fresh("alice", "d1", long)), store.ApprovalDenied, a.ID)
	})

	t.Run("a flood of pending approvals never evicts a denial", func(t *testing.T) {
		s := newStore(t)
		denied := create(t, s, fresh("mallory", "denied", long))
		if _, err := s.Decide(ctx, denied.ID, false, "bob"); err != nil {
			t.Fatal(err)
		}
		// Past the in-memory store's bound on one principal's approvals.
		for i := range store.DefaultApprovalLimit + 10 {
			create(t, s, fresh("mallory", "flood-"+strconv.Itoa(i), long))
		}
		want(t, create(t, s, fresh("mallory", "denied", long)), store.ApprovalDenied, denied.ID)
	})

	t.Run("a pending approval cannot be used", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", long))
		if u, err := s.Consume(ctx, a.ID, ""); !errors.Is(err, store.ErrApprovalState) || u.Status != store.ApprovalPending {
			t.Fatalf("Consume = %s, %v; want pending, ErrApprovalState", u.Status, err)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", short))
		b := create(t, s, fresh("alice", "d2", short))
		if _, err := s.Decide(ctx, b.ID, true, "bob"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short + short/2)
		for _, id := range []string{a.ID, b.ID} {
			if got, err := s.Get(ctx, id); err != nil || got.Status != store.ApprovalExpired {
				t.Fatalf("Get after the expiry = %s, %v; want expired", got.Status, err)
			}
		}
		if _, err := s.Decide(ctx, a.ID, true, "bob"); !errors.Is(err, store.ErrApprovalState) {
			t.Fatalf("Decide after the expiry = %v; want ErrApprovalState", err)
		}
		if _, err := s.Consume(ctx, b.ID, ""); !errors.Is(err, store.ErrApprovalState) {
			t.Fatalf("Consume after the expiry = %v; want ErrApprovalState", err)
		}
		if c := create(t, s, fresh("alice", "d1", long)); c.ID == a.ID || c.Status != store.ApprovalPending {
			t.Fatalf("Create after the expiry = %s %s; want a new pending approval", c.ID, c.Status)
		}
	})

	t.Run("one decision and one use among many", func(t *testing.T) {
		s := newStore(t)
		a := create(t, s, fresh("alice", "d1", long))
		const callers = 16
		count := func(op func(i int) error) int {
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for i := range callers {
				wg.Go(func() {
					if err := op(i); err == nil {
						mu.Lock()
						won++
						mu.Unlock()
					} else if !errors.Is(err, store.ErrApprovalState) {
						t.Errorf("%v", err)
					}
				})
			}
			wg.Wait()
			return won
		}
		if n := count(func(i int) error { _, err := s.Decide(ctx, a.ID, i%2 == 0, "p"+strconv.Itoa(i)); return err }); n != 1 {
			t.Fatalf("%d decisions took effect; want 1", n)
		}
		got, _ := s.Get(ctx, a.ID)
		if got.Status == store.ApprovalDenied {
			a = create(t, s, fresh("alice", "d2", long))
			if _, err := s.Decide(ctx, a.ID, true, "bob"); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(func(i int) error { _, err := s.Consume(ctx, a.ID, strconv.Itoa(i)); return err }); n != 1 {
			t.Fatalf("%d calls used one approval; want 1", n)
		}
	})
}

func second[T any](_ T, err error) error { return err }
