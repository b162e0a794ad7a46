package carmy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/carmy-dev/carmy/internal/schemes"
)

// AuditDecision says what the runtime decided about a call, in an
// [AuditRecord].
type AuditDecision string

const (
	// AuditStarted is written before a destructive tool runs, once every
	// check passed and its turn came: the tool runs only once every sink
	// has recorded it.
	AuditStarted AuditDecision = "started"
	// AuditExecuted is the outcome of an execution, written once the tool
	// returned or its deadline passed.
	AuditExecuted AuditDecision = "executed"
	// AuditReplayed is a call answered with the recorded outcome of an
	// earlier execution with the same request id.
	AuditReplayed AuditDecision = "replayed"
	// AuditRefused is a call answered without running the tool: an invalid
	// input, the host's policy, a missing confirmation, a request id reused
	// with another input, a busy tool, an audit sink that failed before a
	// destructive tool, a store that failed, or a caller that gave up while
	// waiting.
	AuditRefused AuditDecision = "refused"
	// AuditApproved and AuditDenied are a person's decision on a pending
	// approval, through the HTTP API, the console or their MCP client: the
	// record names the approval (ApprovalID), the call's principal, tool
	// and digest, and who decided (Approver). A refused attempt to decide
	// (a principal deciding its own call, or one without the right) is an
	// AuditRefused record with the approval's id and the refused decider
	// as Principal.
	AuditApproved AuditDecision = "approved"
	AuditDenied   AuditDecision = "denied"
	// AuditExpired is an approval that no call used before it expired,
	// pending or approved, written by the host that recorded it.
	AuditExpired AuditDecision = "expired"
	// AuditCancelRequested is a request to cancel a task ([Task.Cancel],
	// POST /tasks/{id}/cancel), naming the task's tool, request id,
	// digest and execution, if it started, and who asked (Principal), with
	// no code; the call's own record, code cancelled, follows once it
	// stopped.
	AuditCancelRequested AuditDecision = "cancel_requested"
	// AuditToolChanged is a mounted upstream's tool that changed: its
	// definition (Digest is the new definition's hash), or it vanished
	// (Digest ""), or a tool appeared upstream; Detail says what carmy did
	// (served it, with the effect it has and had; refused or held it, and
	// why). No call, principal or code.
	AuditToolChanged AuditDecision = "tool_changed"
	// AuditRead is a caller's read of a mounted upstream's resource or prompt
	// (Tool is its URI or served name, Detail says which and the mount's
	// prefix).
	AuditRead AuditDecision = "read"
)

// AuditRecord is one decision about one call, as an [Auditor] receives it.
// Its JSON form (snake_case keys, the effect as text, the time in RFC 3339)
// is what the JSON-lines sink writes. It never holds the input itself: the
// digest identifies it.
type AuditRecord struct {
	// Time is when the decision was made.
	Time     time.Time     `json:"time"`
	Decision AuditDecision `json:"decision"`
	// ExecutionID is the execution's id: the new one for started and
	// executed records, the original one for a replay; "" for a refusal.
	ExecutionID string `json:"execution_id"`
	RequestID   string `json:"request_id"`
	Session     string `json:"session"`
	// Principal is who asked, as the host authenticated them; "" for
	// nobody.
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Effect    Effect `json:"effect"`
	// Digest is the hex SHA-256 of the input's canonical form, the one a
	// confirmation grant names; "" when the input was invalid.
	Digest string `json:"digest"`
	// Code is the outcome: "ok" for a success, the error's [Code]
	// otherwise, "" in a started record.
	Code Code `json:"code"`
	// ApprovalID and Approver name the approval the call ran under and who
	// gave it; "" when none did. In an approved, denied or expired record
	// they name the approval concerned and who decided it, and in the
	// refused record of an attempt to decide, the approval (Principal is
	// then who tried).
	ApprovalID string `json:"approval_id"`
	Approver   string `json:"approver"`
	// PolicySet is the hex SHA-256 of the Cedar policy set in force when
	// the call was decided ([Builder.PolicyFile]), and Policies the ids of
	// the policies that determined the decision: the forbids that refused,
	// the permits that allowed, those that failed to evaluate; both empty
	// without policies.
	PolicySet string   `json:"policy_set,omitempty"`
	Policies  []string `json:"policies,omitempty"`
	// Detail says why a policy file was rejected (policy_rejected), or,
	// in shadow mode, what the policies would have refused.
	Detail string `json:"detail,omitempty"`
}

// Auditor is a sink for [AuditRecord] values; see [Builder.Audit]. Audit is
// called concurrently. For a record of a destructive tool, Audit returns
// only once the record is durable, since the tool runs only after it
// returns; other records it may buffer. An error means the record may be
// lost: a destructive tool then does not run. Package audittest checks
// that a sink keeps these promises.
type Auditor interface {
	Audit(ctx context.Context, rec AuditRecord) error
}

// AuditorFunc is a function as an [Auditor].
type AuditorFunc func(ctx context.Context, rec AuditRecord) error

// Audit calls f.
func (f AuditorFunc) Audit(ctx context.Context, rec AuditRecord) error { return f(ctx, rec) }

// AuditOpener opens the audit sink that a URL names, such as
// "postgres://host/db". When the returned value implements io.Closer, the
// registry closes it on [Registry.Close].
type AuditOpener func(url string) (Auditor, error)

var auditOpeners schemes.Registry[AuditOpener]

// RegisterAuditor makes an audit sink available to [Builder.AuditURL] (and
// so to the audit_url setting of carmy.toml) under a URL scheme. Sink
// packages call it from init, as [store.Register] is called for stores:
//
//	import _ "github.com/carmy-dev/carmy/pgaudit" // registers "postgres" and "postgresql"
//
// Registering a scheme again replaces its opener.
func RegisterAuditor(scheme string, open AuditOpener) { auditOpeners.Register(scheme, open) }

// openAuditor opens the sink a URL names. Errors never repeat the URL: it
// may hold a password.
func openAuditor(url string) (Auditor, error) {
	scheme, open, ok := auditOpeners.Lookup(url)
	switch {
	case scheme == "":
		return nil, errors.New("audit URL has no scheme, such as postgres:// (the URL is not shown: it may hold a password)")
	case !ok:
		return nil, fmt.Errorf("no audit sink is registered for %q URLs: import its package, such as _ \"github.com/carmy-dev/carmy/pgaudit\"", scheme)
	}
	return open(url)
}

// Audit adds a sink that receives one [AuditRecord] per decision:
//
//   - for a tool whose effect is [Write] or above, every call: its outcome
//     (executed), its replay, or its refusal;
//   - for a [Destructive] tool, also a started record, written before the
//     tool runs: when a sink fails to take it, the tool does not run and
//     the caller gets [CodeUnavailable], retryable;
//   - for every tool, every refusal.
//
// A sink that fails on any other record does not change the call's
// outcome: the failure is logged at error level and counted by
// [Registry.AuditFailures]. Every record goes to every sink, in the order
// added; a record is written before the caller is answered, within the
// tool's timeout.
func (b *Builder) Audit(a Auditor) *Builder {
	if a == nil {
		b.misuse("Builder.Audit was given a nil Auditor")
		return b
	}
	b.audit = append(b.audit, auditSource{sink: a})
	return b
}

// AuditFile adds a sink that appends every record, as one line of JSON, to
// the file at path, created with mode 0600 if needed and opened at Build.
// A destructive tool's records are synced to disk (fsync) before it runs
// and before its caller is answered; the others reach the operating
// system at once and the disk on its schedule. [Registry.Close] closes the
// file.
func (b *Builder) AuditFile(path string) *Builder {
	b.audit = append(b.audit, auditSource{file: path})
	return b
}

// AuditURL adds the sink that a URL names, opened at Build by the package
// registered for its scheme with [RegisterAuditor].
func (b *Builder) AuditURL(url string) *Builder {
	b.audit = append(b.audit, auditSource{url: url})
	return b
}

// auditSource is one sink given to the builder: a value, a file or a URL.
type auditSource struct {
	sink      Auditor
	file, url string
}

// openAuditors opens the builder's sinks; what must be closed is appended
// to closers even when another sink fails to open.
func (b *Builder) openAuditors(closers *[]func() error) ([]Auditor, []error) {
	var (
		sinks []Auditor
		errs  []error
	)
	for _, s := range b.audit {
		a := s.sink
		var err error
		switch {
		case s.file != "":
			var f *os.File
			if f, err = os.OpenFile(s.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				a = NewJSONLinesAuditor(f)
				*closers = append(*closers, f.Close)
			}
		case s.url != "":
			if a, err = openAuditor(s.url); err == nil {
				if c, ok := a.(io.Closer); ok {
					*closers = append(*closers, c.Close)
				}
			}
		}
		if err != nil {
			errs = append(errs, &BuildError{Err: fmt.Errorf("audit: %w", err)})
			continue
		}
		sinks = append(sinks, a)
	}
	return sinks, errs
}

// NewJSONLinesAuditor returns a sink that writes every record to w as one
// line of JSON. Records that arrive while an earlier write is under way
// share the next write (group commit); Audit returns once its record is
// written, so a record still reaches w before its caller is answered. When
// w has a Sync method, as an *os.File does, a write that holds a
// destructive tool's record is synced before Audit returns, and a failed
// write or sync is the failure of every record it held.
func NewJSONLinesAuditor(w io.Writer) Auditor {
	j := &jsonLines{w: w}
	j.sync, _ = w.(interface{ Sync() error })
	j.written.L = &j.mu
	return j
}

// appendAuditRecord appends rec as the JSON library encodes it, without
// its reflection, the larger part of a record's cost. It reports false,
// having appended part of it maybe, for a record it cannot encode as the
// library would (a string that is not UTF-8, an unknown effect, a time
// past year 9999), which the library then encodes or refuses.
func appendAuditRecord(b []byte, rec *AuditRecord) ([]byte, bool) {
	if y := rec.Time.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `{"time":"`...)
	b = rec.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	ok := true
	field := func(name, v string) {
		b = append(append(append(b, ',', '"'), name...), '"', ':')
		var err error
		b, err = jsontext.AppendQuote(b, v)
		ok = ok && err == nil
	}
	field("decision", string(rec.Decision))
	field("execution_id", rec.ExecutionID)
	field("request_id", rec.RequestID)
	field("session", rec.Session)
	field("principal", rec.Principal)
	field("tool", rec.Tool)
	if !rec.Effect.valid() {
		return b, false
	}
	field("effect", effectNames[rec.Effect])
	field("digest", rec.Digest)
	field("code", string(rec.Code))
	field("approval_id", rec.ApprovalID)
	field("approver", rec.Approver)
	if rec.PolicySet != "" {
		field("policy_set", rec.PolicySet)
	}
	if len(rec.Policies) > 0 {
		b = append(b, `,"policies":[`...)
		for i, p := range rec.Policies {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			b, err = jsontext.AppendQuote(b, p)
			ok = ok && err == nil
		}
		b = append(b, ']')
	}
	if rec.Detail != "" {
		field("detail", rec.Detail)
	}
	return append(b, '}'), ok
}

// auditLines are the buffers records are encoded in, before they join a
// batch: no record allocates its line.
var auditLines = sync.Pool{New: func() any { return new(bytes.Buffer) }}

type jsonLines struct {
	w    io.Writer
	sync interface{ Sync() error }

	mu      sync.Mutex
	written sync.Cond   // a batch was written
	pending []byte      // the lines of the open batch
	spare   []byte      // the buffer of the last batch written, for the next
	open    *auditBatch // the batch records join, nil when none waits
	writing bool        // a caller is writing batches
	torn    bool        // a write failed part way: the next batch starts a new line
}

// auditBatch is the records one write holds.
type auditBatch struct {
	sync bool // one of them is a destructive tool's: sync after writing
	done bool
	err  error
}

// localSink is a sink that writes where no deadline is needed (a local
// file): the runtime gives it no timer.
func (j *jsonLines) localSink() {}

func (j *jsonLines) Audit(_ context.Context, rec AuditRecord) error {
	line := auditLines.Get().(*bytes.Buffer)
	defer auditLines.Put(line)
	line.Reset()
	if b, ok := appendAuditRecord(line.AvailableBuffer(), &rec); ok {
		line.Write(b)
	} else if err := jsonv2.MarshalWrite(line, rec, encodeOptions); err != nil {
		return err
	}
	j.mu.Lock()
	b := j.open
	if b == nil {
		b = &auditBatch{}
		j.open = b
	}
	j.pending = append(append(j.pending, line.Bytes()...), '\n')
	b.sync = b.sync || rec.Effect == Destructive && j.sync != nil
	if j.writing {
		for !b.done {
			j.written.Wait()
		}
		j.mu.Unlock()
		return b.err
	}
	// This caller writes: every batch that opens while it writes, until
	// none is left, then the waiters of each are woken.
	j.writing = true
	for j.open != nil {
		batch, buf := j.open, j.pending
		j.open, j.pending = nil, j.spare[:0]
		j.mu.Unlock()
		err := j.write(buf, batch.sync)
		j.mu.Lock()
		j.spare = buf
		batch.done, batch.err = true, err
		j.written.Broadcast()
	}
	j.writing = false
	j.mu.Unlock()
	return b.err
}

// write writes one batch, and syncs it when it holds a destructive tool's
// record. Only the caller that writes calls it.
func (j *jsonLines) write(buf []byte, sync bool) error {
	if j.torn {
		if _, err := j.w.Write([]byte{'\n'}); err != nil {
			return err
		}
		j.torn = false
	}
	n, err := j.w.Write(buf)
	j.torn = err != nil && n > 0
	if err != nil {
		return err
	}
	if sync {
		return j.sync.Sync()
	}
	return nil
}

// AuditFailures returns how many audit records a sink failed to take. Each
// is also logged.
func (r *Registry) AuditFailures() int64 { return r.auditFailures.Load() }

// auditing is the observer that writes the audit record of every
// refusal, and of every decided call of a tool that writes.
type auditing struct{ r *Registry }

func (a auditing) observe(ctx context.Context, rec AuditRecord, _ time.Duration) {
	if rec.Decision != AuditRefused && rec.Effect < Write {
		return
	}
	if a.r.auditLocal() {
		// Local sinks read no deadline nor cancellation: the caller's
		// context serves as is.
		_ = a.r.writeAudit(ctx, rec)
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.r.tab().tools[rec.Tool].meta.Timeout)
	defer cancel()
	_ = a.r.writeAudit(actx, rec)
}

// auditLocal reports whether every sink writes where no deadline is needed
// (files), so that a record needs no timer: those sinks do not read the
// context they are given.
func (r *Registry) auditLocal() bool {
	for _, a := range r.auditors {
		if _, ok := a.(interface{ localSink() }); !ok {
			return false
		}
	}
	return true
}

// auditStart writes the started record of a destructive tool that is about
// to run, within the tool's timeout. When it fails, the call is answered
// without running: the pipeline releases its reservation and its turn.
func (r *Registry) auditStart(ctx context.Context, t *tool, req *Request, execID string) error {
	if len(r.auditors) == 0 || t.meta.Effect != Destructive {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, t.meta.Timeout)
	err := r.writeAudit(actx, r.auditRecord(t, req, AuditStarted, execID, ""))
	cancel()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = stopError(ctx, t)
	} else {
		err = &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s cannot run now: its audit record could not be written; try again", t.meta.Name), Retryable: true, Details: map[string]any{"reason": "audit"}, Err: err}
	}
	return err
}

// writeAudit gives one record to every sink; a failure is logged and
// counted, and returned.
func (r *Registry) writeAudit(ctx context.Context, rec AuditRecord) error {
	var errs []error
	for _, a := range r.auditors {
		if err := a.Audit(ctx, rec); err != nil {
			r.auditFailures.Add(1)
			r.logger.LogAttrs(ctx, slog.LevelError, "carmy: audit record not written",
				slog.String("tool", rec.Tool),
				slog.String("decision", string(rec.Decision)),
				slog.String("execution_id", rec.ExecutionID),
				slog.String("principal", rec.Principal),
				slog.String("code", string(rec.Code)),
				slog.Any("error", err),
			)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
