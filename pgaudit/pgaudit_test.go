package pgaudit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/audittest"
	"github.com/carmy-dev/carmy/pgaudit"
)

// database returns the test database's URL and a pool on it, or skips.
func database(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url := os.Getenv("CARMY_POSTGRES_URL")
	if url == "" {
		t.Skip("CARMY_POSTGRES_URL is not set: these tests need a PostgreSQL database, such as the one .ci/run starts " +
			"(CARMY_POSTGRES_URL=postgres://user@127.0.0.1:5432/db go test ./...)")
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return url, pool
}

// table returns a table name of this test's own, dropped at the end.
func table(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("carmy_audit_test_%d", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+name) })
	return name
}

type Target struct {
	ID string `json:"id" validate:"required"`
}

type stored struct {
	decision, execID, principal, tool, effect, digest, code, approvalID, approver string
}

func rows(t testing.TB, pool *pgxpool.Pool, name string) []stored {
	t.Helper()
	rs, err := pool.Query(context.Background(), "SELECT decision, execution_id, principal, tool, effect, digest, code, approval_id, approver FROM "+name+" ORDER BY time, decision DESC")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (stored, error) {
		var s stored
		err := r.Scan(&s.decision, &s.execID, &s.principal, &s.tool, &s.effect, &s.digest, &s.code, &s.approvalID, &s.approver)
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Open creates the table; records of a destructive tool are in it when
// Audit returns, the others once batched, and all of them after Close.
func TestRecords(t *testing.T) {
	url, pool := database(t)
	name := table(t, pool)
	ctx := context.Background()
	a, err := pgaudit.Open(ctx, url, pgaudit.WithTable(name), pgaudit.WithBatching(100, time.Hour, 1000))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Opening again finds the table there.
	again, err := pgaudit.Open(ctx, url, pgaudit.WithTable(name))
	if err != nil {
		t.Fatal(err)
	}
	_ = again.Close()

	var inDB int
	drop := carmy.Tool(func(in Target) error {
		return pool.QueryRow(ctx, "SELECT count(*) FROM "+name+" WHERE decision = 'started'").Scan(&inDB)
	}, carmy.Destructive, carmy.Name("drop"), carmy.Register(false))
	edit := carmy.Tool(func(in Target) error { return nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false))
	reg, err := carmy.New().Tool(drop, edit).Audit(a).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	res, err := reg.Execute(ctx, carmy.Call{Tool: "drop", Input: json.RawMessage(`{"id":"a"}`), Principal: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if inDB != 1 {
		t.Fatalf("the tool ran with %d started records in the table", inDB)
	}
	if got := rows(t, pool, name); len(got) != 2 || got[0].decision != "started" || got[1].decision != "executed" || got[1].execID != res.ExecutionID || got[1].code != "ok" || got[1].effect != "destructive" || got[1].principal != "alice" || len(got[1].digest) != 64 {
		t.Fatalf("rows %+v", got)
	}
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`), Principal: "bob"}); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, pool, name); len(got) != 2 {
		t.Fatalf("a batched record was inserted at once: %+v", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, pool, name); len(got) != 3 || got[2].tool != "edit" || got[2].principal != "bob" || got[2].effect != "write" {
		t.Fatalf("after Close: %+v", got)
	}
	if err := a.Audit(ctx, carmy.AuditRecord{Tool: "late", Effect: carmy.Write}); err == nil {
		t.Error("Audit after Close took a record")
	}
}

// Records that come faster than the database takes them wait for room in
// the queue: none is dropped.
func TestFullQueueWaits(t *testing.T) {
	url, pool := database(t)
	name := table(t, pool)
	a, err := pgaudit.Open(context.Background(), url, pgaudit.WithTable(name), pgaudit.WithBatching(10, time.Millisecond, 5))
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := range n {
		rec := carmy.AuditRecord{Time: time.Now(), Decision: carmy.AuditExecuted, ExecutionID: fmt.Sprint(i), Tool: "edit", Effect: carmy.Write, Code: "ok"}
		if err := a.Audit(context.Background(), rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var count, distinct int
	if err := pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT execution_id) FROM "+name).Scan(&count, &distinct); err != nil || count != n || distinct != n {
		t.Fatalf("%d rows, %d distinct, want %d: %v", count, distinct, n, err)
	}
	if a.Lost() != 0 {
		t.Errorf("Lost = %d", a.Lost())
	}
}

// The scheme is registered: audit_url opens it.
func TestAuditURL(t *testing.T) {
	url, pool := database(t)
	edit := carmy.Tool(func(in Target) error { return nil }, carmy.Write, carmy.Name("edit"), carmy.Register(false))
	reg, err := carmy.New().Tool(edit).AuditURL(url).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DELETE FROM "+pgaudit.DefaultTable+" WHERE principal = 'audit-url-test'")
	})
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "edit", Input: json.RawMessage(`{"id":"a"}`), Principal: "audit-url-test"}); err != nil {
		t.Fatal(err)
	}
	_ = reg.Close() // flushes the batch
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgaudit.DefaultTable+" WHERE principal = 'audit-url-test'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows, %v", n, err)
	}
	if _, err := carmy.New().Tool(edit).AuditURL("postgres://u:secret@127.0.0.1:1/x?connect_timeout=1").Build(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Build with an unreachable database: %v", err)
	}
}

// interrupt breaks the database under the sink: it restarts the server
// with the command in CARMY_POSTGRES_RESTART when there is one (as .ci/run
// sets), else ends every other connection to the database, which is what
// the sink sees of a restart.
func interrupt(t testing.TB, pool *pgxpool.Pool) string {
	if cmd := os.Getenv("CARMY_POSTGRES_RESTART"); cmd != "" {
		if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
			t.Errorf("restart: %v\n%s", err, out)
		}
		return "restarted"
	}
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()) t").Scan(&n)
	if err != nil || n == 0 {
		t.Errorf("terminated %d connections: %v", n, err)
	}
	return fmt.Sprintf("%d connections terminated", n)
}

// 10,000 destructive calls with the database restarted in the middle:
// every execution has its started record, written before it ran, and its
// outcome; calls made while the database was away were refused, retryable,
// and ran on retry.
func TestDestructiveCallsAcrossARestart(t *testing.T) {
	url, pool := database(t)
	name := table(t, pool)
	ctx := context.Background()
	a, err := pgaudit.Open(ctx, url, pgaudit.WithTable(name))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	var (
		mu  sync.Mutex
		ran = map[string]bool{}
	)
	wipe := carmy.Tool(func(c carmy.Context, in Target) error {
		mu.Lock()
		ran[c.ExecutionID] = true
		mu.Unlock()
		return nil
	}, carmy.Destructive, carmy.Name("wipe"), carmy.ParallelSafe(), carmy.Timeout(5*time.Second), carmy.Register(false))
	reg, err := carmy.New().Tool(wipe).Audit(a).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	const calls, workers = 10_000, 8
	var (
		next, refused, retried atomic.Int64
		answered               sync.Map // execution id → true
		wg                     sync.WaitGroup
		once                   sync.Once
		how                    string
	)
	deadline := time.Now().Add(60 * time.Second)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > calls {
					return
				}
				if i == calls/2 {
					once.Do(func() { how = interrupt(t, pool) })
				}
				for try := 0; ; try++ {
					res, err := reg.Execute(ctx, carmy.Call{Tool: "wipe", Input: json.RawMessage(fmt.Sprintf(`{"id":"%d"}`, i))})
					if err == nil {
						answered.Store(res.ExecutionID, true)
						if try > 0 {
							retried.Add(1)
						}
						break
					}
					var e *carmy.Error
					if !errors.As(err, &e) || e.Code != carmy.CodeUnavailable || !e.Retryable {
						t.Errorf("call %d: %v", i, err)
						return
					}
					refused.Add(1)
					if time.Now().After(deadline) {
						t.Errorf("call %d still refused after a minute: %v", i, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("database %s: %d refusals, %d calls ran on retry, %d audit failures", how, refused.Load(), retried.Load(), reg.AuditFailures())

	started, executed := map[string]bool{}, map[string]bool{}
	for _, r := range rows(t, pool, name) {
		switch r.decision {
		case "started":
			started[r.execID] = true
		case "executed":
			executed[r.execID] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != calls {
		t.Errorf("%d executions, want %d", len(ran), calls)
	}
	missing := 0
	for id := range ran {
		if !started[id] {
			t.Fatalf("execution %s ran without its started record", id)
		}
		if _, ok := answered.Load(id); ok && !executed[id] {
			missing++
		}
	}
	// An outcome whose insert met the database away is logged and counted,
	// never silently lost.
	if int64(missing) > reg.AuditFailures() {
		t.Errorf("%d executions have no outcome record, and %d audit failures were counted", missing, reg.AuditFailures())
	}
}

// BenchmarkAudit is the cost of one record, by kind: an insert per
// destructive record, a queued one otherwise.
func BenchmarkAudit(b *testing.B) {
	url, pool := database(b)
	name := table(b, pool)
	a, err := pgaudit.Open(context.Background(), url, pgaudit.WithTable(name))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for _, effect := range []carmy.Effect{carmy.Destructive, carmy.Write} {
		b.Run("effect="+effect.String(), func(b *testing.B) {
			rec := carmy.AuditRecord{Time: time.Now(), Decision: carmy.AuditExecuted, ExecutionID: "01", Tool: "t", Effect: effect, Code: "ok"}
			for b.Loop() {
				if err := a.Audit(context.Background(), rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAuditorKit runs the audittest kit on a table of its own each time,
// records batched: Flush is Close.
func TestAuditorKit(t *testing.T) {
	url, pool := database(t)
	audittest.TestAuditor(t, func(t *testing.T) audittest.Sink {
		name := table(t, pool)
		a, err := pgaudit.Open(context.Background(), url, pgaudit.WithTable(name), pgaudit.WithBatching(100, time.Hour, 1000))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		return audittest.Sink{Auditor: a, Flush: a.Close, Records: func() ([]carmy.AuditRecord, error) {
			rs, err := pool.Query(context.Background(), "SELECT time, decision, execution_id, request_id, session, principal, tool, effect, digest, code, approval_id, approver FROM "+name+" ORDER BY time")
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rs, func(r pgx.CollectableRow) (carmy.AuditRecord, error) {
				var rec carmy.AuditRecord
				var decision, effect, code string
				if err := r.Scan(&rec.Time, &decision, &rec.ExecutionID, &rec.RequestID, &rec.Session, &rec.Principal, &rec.Tool, &effect, &rec.Digest, &code, &rec.ApprovalID, &rec.Approver); err != nil {
					return rec, err
				}
				rec.Decision, rec.Code = carmy.AuditDecision(decision), carmy.Code(code)
				err := rec.Effect.UnmarshalText([]byte(effect))
				return rec, err
			})
		}}
	})
}
