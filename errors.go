package carmy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Code classifies an [Error] so that a caller, human or model, knows what to
// do next. Codes are stable strings and part of the wire format.
type Code string

// The codes a caller can see.
const (
	// CodeInvalidInput: the input does not fit the tool's schema or rules;
	// fix the fields named in [Error.Fields] and call again.
	CodeInvalidInput Code = "invalid_input"
	// CodeUnknownTool: no tool has that name; the message suggests the
	// closest one.
	CodeUnknownTool Code = "unknown_tool"
	// CodeUnauthenticated: the host could not tell who is calling.
	CodeUnauthenticated Code = "unauthenticated"
	// CodePermissionDenied: the caller may not run this tool.
	CodePermissionDenied Code = "permission_denied"
	// CodeConfirmationRequired: the tool needs a grant the caller does not
	// hold; [Error.Details] tells what to ask the user to confirm.
	CodeConfirmationRequired Code = "confirmation_required"
	// CodeNotFound: the tool ran and the thing it was asked about does not
	// exist.
	CodeNotFound Code = "not_found"
	// CodeConflict: the call contradicts the current state, or reuses a
	// request id with another input.
	CodeConflict Code = "conflict"
	// CodeCancelled: the caller gave up before the tool finished.
	CodeCancelled Code = "cancelled"
	// CodeTimeout: the tool did not finish within its deadline.
	CodeTimeout Code = "timeout"
	// CodeUnavailable: something the tool needs is down; try again later.
	CodeUnavailable Code = "unavailable"
	// CodeRateLimited: the caller made as many calls of the tool as its
	// limits allow ([RateLimit], [MaxInFlight]); call again once
	// details.retry_after_ms (milliseconds) has passed.
	CodeRateLimited Code = "rate_limited"
	// CodeToolError: a mounted upstream's tool ran and reported an error
	// of its own (MCP's isError); the message and details.content are the
	// upstream's. Not retryable: a retry with the same request id replays
	// it.
	CodeToolError Code = "tool_error"
	// CodeInternal: a bug or an unexpected failure; the cause is logged and
	// never sent.
	CodeInternal Code = "internal"
)

// retryableByDefault reports whether calling again, unchanged, may succeed.
func (c Code) retryableByDefault() bool {
	switch c {
	case CodeTimeout, CodeCancelled, CodeUnavailable, CodeRateLimited, CodeInternal:
		return true
	}
	return false
}

// FieldError is one problem with one place in a tool's input.
type FieldError struct {
	// Path locates the value by JSON names: "items[2].sku", `tags["a.b"]`;
	// "" is the input as a whole.
	Path string `json:"path"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
}

// Error is the error every caller of a tool sees. Tools return one to choose
// the code; any other error a tool returns becomes [CodeInternal] with a
// generic message, its text kept in Err for the logs only.
//
// Use [errors.As] to reach it, or [CodeOf] for the code alone.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Fields lists the problems found in the input, for CodeInvalidInput:
	// at most 20, then one entry with path "" saying how many more there
	// are, so that an input built to make errors cannot make answers huge.
	Fields []FieldError `json:"fields,omitempty"`
	// Details carries machine-readable facts, such as the digest to confirm
	// for CodeConfirmationRequired. Values must be JSON-encodable.
	Details map[string]any `json:"details,omitempty"`
	// Retryable tells the caller that the same call may succeed later.
	// [Errorf] sets it from the code: timeout, cancelled, unavailable,
	// rate_limited and internal are retryable.
	Retryable bool `json:"retryable"`
	// Err is the cause. It is logged and never sent to callers.
	Err error `json:"-"`
}

// Errorf returns an [Error] with the code, a message formatted as by
// [fmt.Sprintf], and Retryable set by the code's default.
//
// An error argument wrapped with %w is the cause: it becomes Err, which is
// logged and reachable with [errors.Is] and [errors.As], and it is left out
// of the message sent to callers, with the punctuation around it. Format an
// error with %v to show it to callers.
//
//	carmy.Errorf(carmy.CodeUnavailable, "cannot load order %d: %w", id, err)
//	// Message: "cannot load order 7"; Err: err
func Errorf(code Code, format string, args ...any) *Error {
	e := &Error{Code: code, Retryable: code.retryableByDefault()}
	// Forwarding the format to fmt.Errorf alone makes go vet treat Errorf
	// like fmt.Errorf, so that it accepts %w.
	full := fmt.Errorf(format, args...)
	var causes []error
	switch u := full.(type) {
	case interface{ Unwrap() error }:
		causes = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		causes = u.Unwrap()
	}
	if len(causes) == 0 {
		e.Message = full.Error()
		return e
	}
	if len(causes) == 1 {
		e.Err = causes[0]
	} else {
		e.Err = errors.Join(causes...)
	}
	shown := make([]any, len(args))
	for i, a := range args {
		shown[i] = a
		for _, c := range causes {
			if sameValue(a, c) {
				shown[i] = hiddenCause{}
				break
			}
		}
	}
	e.Message = tidyMessage(fmt.Sprintf(wrapVerbsAsV(format), shown...))
	return e
}

// wrapVerbsAsV turns every %w verb of a format into %v, leaving %% alone.
func wrapVerbsAsV(format string) string {
	b := []byte(format)
	for i := 0; i < len(b); i++ {
		if b[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(b) && strings.IndexByte("+-# 0123456789.*[]", b[j]) >= 0 {
			j++
		}
		if j < len(b) && b[j] == 'w' {
			b[j] = 'v'
		}
		i = j
	}
	return string(b)
}

// hiddenCause stands in for a %w argument in a message: it prints a mark
// that tidyMessage removes with the punctuation around it.
type hiddenCause struct{}

const causeMark = "\x00"

func (hiddenCause) Format(f fmt.State, _ rune) { f.Write([]byte(causeMark)) }

// sameValue reports whether a is c, without panicking on values that are
// not comparable.
func sameValue(a any, c error) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == any(c)
}

// tidyMessage removes the marks of hidden causes and what they leave
// behind: "load order 7: %w" reads "load order 7", "%v (%w)" reads "%v".
func tidyMessage(s string) string {
	s = strings.NewReplacer("("+causeMark+")", causeMark, "["+causeMark+"]", causeMark).Replace(s)
	parts := strings.Split(s, causeMark)
	out := strings.TrimRight(parts[0], " :;,-")
	for _, p := range parts[1:] {
		p = strings.TrimLeft(p, " ")
		switch {
		case out == "":
			out = strings.TrimLeft(p, " :;,-")
		case p == "":
		case strings.ContainsRune(";,.)", rune(p[0])):
			out += p
		default:
			out += " " + strings.TrimLeft(p, " :-")
		}
	}
	return strings.TrimSpace(out)
}

// Error returns the code, the message and every field problem.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("carmy: ")
	b.WriteString(string(e.Code))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	fields := e.Fields
	if len(fields) == 1 && strings.Contains(e.Message, fields[0].Message) {
		fields = nil // the message already says it
	}
	for i, f := range fields {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		if f.Path != "" {
			b.WriteString(f.Path)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
		if i == len(fields)-1 {
			b.WriteString(")")
		}
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of the first [*Error] in err's chain, "" for a nil
// error and [CodeInternal] for an error that holds no [*Error].
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// BuildError is one problem found by [Builder.Build]. Build returns all of
// them at once, joined with [errors.Join]; reach each with errors.As or by
// unwrapping the join.
type BuildError struct {
	Tool string // the tool's name, when known
	Site string // file:line of the carmy.Tool call that declared the tool; for App's configuration, carmy.toml:LINE or a CARMY_* variable
	Err  error
}

// Error names the tool and its declaration site before the problem.
func (e *BuildError) Error() string {
	var b strings.Builder
	b.WriteString("carmy: ")
	if e.Tool == "" && e.Site != "" && !strings.Contains(e.Site, ".go:") {
		// A configuration problem: carmy.toml:3 or CARMY_TIMEOUT.
		fmt.Fprintf(&b, "%s: %s", e.Site, e.Err)
		return b.String()
	}
	if e.Tool != "" {
		fmt.Fprintf(&b, "tool %q ", e.Tool)
	} else {
		b.WriteString("tool ")
	}
	if e.Site != "" {
		fmt.Fprintf(&b, "(%s) ", e.Site)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the problem.
func (e *BuildError) Unwrap() error { return e.Err }

// Limits of an error as callers see it, against inputs built to make the
// answer huge (a field error per unknown member, each naming the member).
// An MCP answer carries the error up to three times, once as escaped text,
// so an error's JSON of at most maxErrorJSON keeps every answer, on every
// transport, within 64 KiB.
const (
	maxFieldErrors  = 20
	maxErrorJSON    = 15 << 10
	maxMessageBytes = 1 << 10 // of the message, when the whole is too large
	maxFieldBytes   = 256     // of a field error's path and message, likewise
)

// limitFields keeps the first maxFieldErrors field errors and replaces the
// rest with one entry, path "", saying how many more there are: "and 12
// more problems". It leaves f itself unchanged.
func limitFields(f []FieldError) []FieldError {
	kept, more := splitMore(f)
	if len(kept) <= maxFieldErrors {
		return f
	}
	return joinMore(kept[:maxFieldErrors], more+len(kept)-maxFieldErrors)
}

const moreFormat = "and %d more problems; fix these and call again to see them"

// splitMore separates the entry that counts left-out problems, if any.
func splitMore(f []FieldError) ([]FieldError, int) {
	var n int
	if len(f) > 0 && f[len(f)-1].Path == "" {
		if _, err := fmt.Sscanf(f[len(f)-1].Message, moreFormat, &n); err == nil && n > 0 {
			return f[:len(f)-1], n
		}
	}
	return f, 0
}

func joinMore(kept []FieldError, more int) []FieldError {
	kept = slices.Clip(kept) // never append into the caller's array
	if more == 0 {
		return kept
	}
	return append(kept, FieldError{Message: fmt.Sprintf(moreFormat, more)})
}

// bounded returns e as it may be sent: limitFields, and when its JSON is
// still larger than maxErrorJSON, strings cut short, then details left
// out, then field errors counted instead of listed. e itself is unchanged.
func (e *Error) bounded() *Error {
	fields := limitFields(e.Fields)
	if len(fields) == len(e.Fields) && encodedSize(e) <= maxErrorJSON {
		return e
	}
	b := *e
	b.Fields = fields
	if encodedSize(&b) <= maxErrorJSON {
		return &b
	}
	kept, more := splitMore(fields)
	kept = slices.Clone(kept)
	for i := range kept {
		kept[i] = FieldError{Path: truncate(kept[i].Path, maxFieldBytes), Message: truncate(kept[i].Message, maxFieldBytes)}
	}
	b.Message, b.Fields = truncate(b.Message, maxMessageBytes), joinMore(kept, more)
	if b.Details != nil && encodedSize(&b) > maxErrorJSON {
		b.Details = nil
		b.Message += " (details left out: too large)"
	}
	for len(kept) > 0 && encodedSize(&b) > maxErrorJSON {
		kept, more = kept[:len(kept)-1], more+1
		b.Fields = joinMore(kept, more)
	}
	return &b
}

// encodedSize is the length of e's JSON as encoding/json writes it, which
// escapes more than carmy's own encoder: an upper bound on every
// transport.
func encodedSize(e *Error) int {
	b, err := json.Marshal(e)
	if err != nil {
		return math.MaxInt
	}
	return len(b)
}

// truncate cuts s to at most n bytes, on a character boundary, marking the
// cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
