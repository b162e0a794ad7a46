// Package audittest checks that a [carmy.Auditor] keeps the promises the
// runtime relies on, in the manner of testing/slogtest and storetest: call
// [TestAuditor] from a test of your sink.
//
//	func TestMySink(t *testing.T) {
//		audittest.TestAuditor(t, func(t *testing.T) audittest.Sink {
//			s := mysink.New(...) // a fresh, empty sink
//			return audittest.Sink{Auditor: s, Records: s.ReadAll, Flush: s.Close}
//		})
//	}
package audittest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// Sink is an [carmy.Auditor] under test, and how the suite reads back
// what it kept.
type Sink struct {
	Auditor carmy.Auditor
	// Records returns every record the sink kept, in the order it kept
	// them.
	Records func() ([]carmy.AuditRecord, error)
	// Flush makes the records the sink may buffer durable (a batching
	// sink's Close); nil for a sink whose Audit keeps every record before
	// it returns.
	Flush func() error
}

// TestAuditor runs the suite. newSink must return a fresh, empty sink
// each time. It checks that a record of a destructive tool is kept when
// Audit returns (the tool runs only then), that every field of a record
// is kept as it was given (times to the microsecond), that the records of
// one caller keep their order, and that Audit is safe for concurrent use
// and keeps each record once.
func TestAuditor(t *testing.T, newSink func(t *testing.T) Sink) {
	ctx := context.Background()
	t.Run("a destructive tool's start is kept when Audit returns", func(t *testing.T) {
		s := newSink(t)
		rec := record(1)
		if err := s.Auditor.Audit(ctx, rec); err != nil {
			t.Fatalf("Audit: %v", err)
		}
		got := read(t, s, false)
		if len(got) != 1 || !same(got[0], rec) {
			t.Fatalf("after Audit returned, the sink kept %+v; want %+v", got, rec)
		}
	})
	t.Run("every field is kept as given", func(t *testing.T) {
		s := newSink(t)
		want := []carmy.AuditRecord{record(1), record(2)}
		want[1].Decision, want[1].Effect, want[1].Code = carmy.AuditRefused, carmy.Write, carmy.CodePermissionDenied
		want[1].Principal, want[1].Tool = "zoë ✓ \"quoted\" \\ back", "edit.rows-2"
		for _, r := range want {
			if err := s.Auditor.Audit(ctx, r); err != nil {
				t.Fatalf("Audit: %v", err)
			}
		}
		got := read(t, s, true)
		if len(got) != len(want) {
			t.Fatalf("the sink kept %d records; want %d", len(got), len(want))
		}
		for i := range want {
			if !same(got[i], want[i]) {
				t.Errorf("record %d kept as %+v; want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("one caller's records keep their order", func(t *testing.T) {
		s := newSink(t)
		var want []string
		for i := range 20 {
			r := record(i)
			r.Effect = carmy.Write
			want = append(want, r.ExecutionID)
			if err := s.Auditor.Audit(ctx, r); err != nil {
				t.Fatalf("Audit: %v", err)
			}
		}
		got := ids(read(t, s, true))
		if !slices.Equal(got, want) {
			t.Fatalf("the sink kept %v; want %v", got, want)
		}
	})
	t.Run("concurrent records are each kept once", func(t *testing.T) {
		s := newSink(t)
		const callers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, callers*each)
		for c := range callers {
			wg.Go(func() {
				for i := range each {
					r := record(c*each + i)
					r.Effect = carmy.Read
					if err := s.Auditor.Audit(ctx, r); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Audit: %v", err)
		}
		got := ids(read(t, s, true))
		slices.Sort(got)
		if len(got) != callers*each || len(slices.Compact(slices.Clone(got))) != callers*each {
			t.Fatalf("the sink kept %d records, %d distinct; want %d, each once", len(got), len(slices.Compact(got)), callers*each)
		}
	})
}

// record is a record of a destructive tool's start with every field set,
// n making its execution id its own.
func record(n int) carmy.AuditRecord {
	return carmy.AuditRecord{
		Time:        time.Date(2026, 7, 28, 12, 30, 45, 123456000, time.UTC).Add(time.Duration(n) * time.Millisecond),
		Decision:    carmy.AuditStarted,
		ExecutionID: fmt.Sprintf("01a2e9f0-0000-7000-8000-%012d", n),
		RequestID:   fmt.Sprintf("req-%d", n),
		Session:     "session-1",
		Principal:   "alice",
		Tool:        "drop_table",
		Effect:      carmy.Destructive,
		Digest:      "4f8b42c22dd3729b519ba6f68d2da7cc5b2d606d05daed5ad5128cc03e6c6358",
		ApprovalID:  "01a2e9f0-1111-7000-8000-000000000001",
		Approver:    "console",
	}
}

func read(t *testing.T, s Sink, flush bool) []carmy.AuditRecord {
	t.Helper()
	if flush && s.Flush != nil {
		if err := s.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	got, err := s.Records()
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	return got
}

// same reports whether got is want as a sink keeps it: its time to the
// microsecond, in any location.
func same(got, want carmy.AuditRecord) bool {
	if !got.Time.Truncate(time.Microsecond).Equal(want.Time.Truncate(time.Microsecond)) {
		return false
	}
	got.Time, want.Time = time.Time{}, time.Time{}
	if !slices.Equal(got.Policies, want.Policies) {
		return false
	}
	got.Policies, want.Policies = nil, nil
	return reflect.DeepEqual(got, want)
}

func ids(recs []carmy.AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ExecutionID
	}
	return out
}
