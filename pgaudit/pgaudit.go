// Package pgaudit keeps carmy's audit records in PostgreSQL, so that "who
// ran what, on which input, approved by whom, with what outcome" is one
// query away.
//
// Importing the package registers it for postgres:// and postgresql://
// URLs, which the builder's AuditURL and the audit_url setting of
// carmy.toml open:
//
//	import _ "github.com/carmy-dev/carmy/pgaudit"
//
//	reg, err := carmy.New().Tool(tools...).AuditURL("postgres://carmy@db/carmy").Build()
//
// or it is opened explicitly and given to [carmy.Builder.Audit]:
//
//	a, err := pgaudit.Open(ctx, url)
//	defer a.Close()
//	reg, err := carmy.New().Tool(tools...).Audit(a).Build()
//
// Open creates the table if it is missing (see [Schema]). A destructive
// tool's records are inserted at once, and Audit returns only once the
// insert committed, so the tool runs only after its record is in the
// database; the other records are queued and inserted in batches, and
// Close inserts what is left. A record is never inserted twice: each has
// an id of its own, and a retried insert skips the ids already there.
package pgaudit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmy-dev/carmy"
)

func init() {
	open := func(url string) (carmy.Auditor, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return Open(ctx, url)
	}
	carmy.RegisterAuditor("postgres", open)
	carmy.RegisterAuditor("postgresql", open)
}

// DefaultTable is the table records go to.
const DefaultTable = "carmy_audit"

// Defaults of the batching of records of tools that are not destructive.
const (
	DefaultBatchSize     = 1000
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultQueueSize     = 100_000
)

// Schema is the table Open creates, with %s for its name: one row per
// record. Rows of one execution share execution_id; a refusal has none.
const Schema = `CREATE TABLE IF NOT EXISTS %s (
	id           uuid PRIMARY KEY,
	time         timestamptz NOT NULL,
	decision     text NOT NULL,
	execution_id text NOT NULL,
	request_id   text NOT NULL,
	session      text NOT NULL,
	principal    text NOT NULL,
	tool         text NOT NULL,
	effect       text NOT NULL,
	digest       text NOT NULL,
	code         text NOT NULL,
	approval_id  text NOT NULL,
	approver     text NOT NULL,
	policy_set   text NOT NULL DEFAULT '',
	policies     text NOT NULL DEFAULT '',
	detail       text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS %s ON %s (execution_id);
CREATE INDEX IF NOT EXISTS %s ON %s (principal, time);
ALTER TABLE %s
	ADD COLUMN IF NOT EXISTS policy_set text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS policies   text NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS detail     text NOT NULL DEFAULT '';`

// Option configures [Open].
type Option func(*Auditor)

// WithTable sets the table's name (default [DefaultTable]), which may be
// qualified by a schema ("audit.carmy").
func WithTable(name string) Option { return func(a *Auditor) { a.table = name } }

// WithLogger sets where failures of batched inserts are logged. The
// default is [slog.Default].
func WithLogger(l *slog.Logger) Option { return func(a *Auditor) { a.logger = l } }

// WithBatching sets how records of tools that are not destructive are
// inserted: at most size per insert, at least every interval, with at most
// queue records waiting (Audit fails beyond it).
func WithBatching(size int, interval time.Duration, queue int) Option {
	return func(a *Auditor) { a.batchSize, a.interval, a.queueSize = size, interval, queue }
}

// Auditor is a [carmy.Auditor] that inserts into PostgreSQL. It is safe for
// concurrent use.
type Auditor struct {
	pool      *pgxpool.Pool
	table     string
	logger    *slog.Logger
	batchSize int
	interval  time.Duration
	queueSize int
	insert    string // one row
	insertAll string // rows from arrays

	mu      sync.RWMutex // held to queue a record, and to close the queue
	queue   chan row
	closed  bool
	done    chan struct{}
	lost    atomic.Int64
	failing atomic.Bool // the last batch insert failed
}

// row is one record with its id.
type row struct {
	id  uuid.UUID
	rec carmy.AuditRecord
}

// Open connects to the database a postgres:// URL names (any connection
// string pgx accepts), creates the table if it is missing, and starts the
// batching of records. Close stops it.
func Open(ctx context.Context, url string, opts ...Option) (*Auditor, error) {
	a := &Auditor{table: DefaultTable, logger: slog.Default(), batchSize: DefaultBatchSize, interval: DefaultFlushInterval, queueSize: DefaultQueueSize}
	for _, o := range opts {
		o(a)
	}
	if a.batchSize <= 0 || a.interval <= 0 || a.queueSize <= 0 {
		return nil, errors.New("pgaudit: batch size, flush interval and queue size must be positive")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("pgaudit: the URL is not a PostgreSQL connection string (it is not shown: it may hold a password)")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgaudit: %w", err)
	}
	a.pool = pool
	if err := a.createTable(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	t := a.quoted()
	cols := "id, time, decision, execution_id, request_id, session, principal, tool, effect, digest, code, approval_id, approver, policy_set, policies, detail"
	a.insert = "INSERT INTO " + t + " (" + cols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ON CONFLICT (id) DO NOTHING"
	a.insertAll = "INSERT INTO " + t + " (" + cols + ") SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[]) ON CONFLICT (id) DO NOTHING"
	a.queue = make(chan row, a.queueSize)
	a.done = make(chan struct{})
	go a.batch()
	return a, nil
}

func (a *Auditor) quoted() string {
	return pgx.Identifier(splitQualified(a.table)).Sanitize()
}

// splitQualified splits "schema.table" into its parts.
func splitQualified(name string) []string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return []string{name[:i], name[i+1:]}
		}
	}
	return []string{name}
}

// createTable creates the table and its indexes unless they exist. Hosts
// starting together take turns: CREATE ... IF NOT EXISTS is not safe
// against a concurrent one.
func (a *Auditor) createTable(ctx context.Context) error {
	parts := splitQualified(a.table)
	base := parts[len(parts)-1]
	idx := func(suffix string) string { return pgx.Identifier{base + "_" + suffix}.Sanitize() }
	t := a.quoted()
	ddl := fmt.Sprintf(Schema, t, idx("execution_id"), t, idx("principal_time"), t, t)
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "carmy audit "+a.table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgaudit: creating the table %s: %w", a.table, err)
	}
	return nil
}

// Audit records one decision. A destructive tool's record is inserted
// before Audit returns, retried once on a new connection when the first
// attempt fails (a connection the server closed, after a restart); other
// records are queued for the next batch. When the queue is full, Audit
// waits for room while the database takes records (records come faster
// than it takes them: the callers slow down to its pace, within ctx), and
// fails at once while it does not, or once the Auditor closed.
func (a *Auditor) Audit(ctx context.Context, rec carmy.AuditRecord) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	r := row{id: id, rec: rec}
	if rec.Effect == carmy.Destructive {
		err := a.insertOne(ctx, r)
		if err != nil && ctx.Err() == nil {
			// After a restart, every idle connection is dead: drop them
			// all, so that the retry gets a new one.
			a.pool.Reset()
			err = a.insertOne(ctx, r)
		}
		if err != nil {
			return fmt.Errorf("pgaudit: %w", err)
		}
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return errors.New("pgaudit: the auditor is closed")
	}
	select {
	case a.queue <- r:
		return nil
	default:
	}
	if a.failing.Load() {
		return fmt.Errorf("pgaudit: the database is unavailable and %d records are waiting for it; this one is not kept", a.queueSize)
	}
	// The database takes records, more slowly than they come: wait for
	// room, as long as the call allows.
	select {
	case a.queue <- r:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgaudit: %d records are waiting for the database; this one is not kept: %w", a.queueSize, ctx.Err())
	}
}

func (a *Auditor) insertOne(ctx context.Context, r row) error {
	rec := r.rec
	_, err := a.pool.Exec(ctx, a.insert, r.id, rec.Time, string(rec.Decision), rec.ExecutionID, rec.RequestID, rec.Session, rec.Principal,
		rec.Tool, rec.Effect.String(), rec.Digest, string(rec.Code), rec.ApprovalID, rec.Approver, rec.PolicySet, policiesJSON(rec.Policies), rec.Detail)
	return err
}

// policiesJSON is the policies column: the ids as a JSON array
// (policies::jsonb reads it), "" for none.
func policiesJSON(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	b, _ := json.Marshal(ids) // strings always encode
	return string(b)
}

// batch inserts queued records until Close, then what is left.
func (a *Auditor) batch() {
	defer close(a.done)
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	var rows []row
	for {
		select {
		case r, ok := <-a.queue:
			if !ok {
				a.flush(rows, true)
				return
			}
			rows = append(rows, r)
			if len(rows) < a.batchSize || a.failing.Load() {
				continue // while the database is away, retry on the tick only
			}
		case <-tick.C:
		}
		rows = a.flush(rows, false)
	}
}

// flush inserts rows, and returns those it could not insert, kept for the
// next try. On close, it tries for a while, then logs what is lost.
func (a *Auditor) flush(rows []row, closing bool) []row {
	for try := 0; len(rows) > 0; try++ {
		n := min(len(rows), a.batchSize)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.insertMany(ctx, rows[:n])
		cancel()
		a.failing.Store(err != nil)
		if err == nil {
			rows = rows[n:]
			continue
		}
		if !closing || try >= 3 {
			a.logger.Error("pgaudit: cannot insert audit records; they are kept for the next try", "records", len(rows), "error", err)
			if closing {
				a.lost.Add(int64(len(rows)))
				a.logger.Error("pgaudit: closing: audit records lost", "records", len(rows))
				return nil
			}
			return a.bound(rows)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return rows[:0]
}

// bound drops the oldest rows kept for retry beyond the queue's size, so
// that a database down for long does not take the host's memory.
func (a *Auditor) bound(rows []row) []row {
	if over := len(rows) - a.queueSize; over > 0 {
		a.lost.Add(int64(over))
		a.logger.Error("pgaudit: audit records lost: the database is unavailable and too many are waiting", "records", over)
		rows = rows[over:]
	}
	return rows
}

func (a *Auditor) insertMany(ctx context.Context, rows []row) error {
	var (
		ids                                                   = make([]uuid.UUID, len(rows))
		times                                                 = make([]time.Time, len(rows))
		decision, exec, req, session, principal, tool, effect = col(rows), col(rows), col(rows), col(rows), col(rows), col(rows), col(rows)
		digest, code, approval, approver                      = col(rows), col(rows), col(rows), col(rows)
		policySet, policies, detail                           = col(rows), col(rows), col(rows)
	)
	for i, r := range rows {
		rec := r.rec
		ids[i], times[i] = r.id, rec.Time
		decision[i], exec[i], req[i], session[i], principal[i], tool[i], effect[i] = string(rec.Decision), rec.ExecutionID, rec.RequestID, rec.Session, rec.Principal, rec.Tool, rec.Effect.String()
		digest[i], code[i], approval[i], approver[i] = rec.Digest, string(rec.Code), rec.ApprovalID, rec.Approver
		policySet[i], policies[i], detail[i] = rec.PolicySet, policiesJSON(rec.Policies), rec.Detail
	}
	_, err := a.pool.Exec(ctx, a.insertAll, ids, times, decision, exec, req, session, principal, tool, effect, digest, code, approval, approver, policySet, policies, detail)
	return err
}

func col(rows []row) []string { return make([]string, len(rows)) }

// Lost returns how many batched records could not be inserted and were
// dropped. Each loss is also logged.
func (a *Auditor) Lost() int64 { return a.lost.Load() }

// Close inserts the records still queued, then closes the connections.
// Records given to Audit after Close are refused.
func (a *Auditor) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.queue)
	a.mu.Unlock()
	<-a.done
	a.pool.Close()
	return nil
}
