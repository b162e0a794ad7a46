package carmy

import (
	"errors"
	"fmt"
	"strings"
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
	// CodeInternal: a bug or an unexpected failure; the cause is logged and
	// never sent.
	CodeInternal Code = "internal"
)

// retryableByDefault reports whether calling again, unchanged, may succeed.
func (c Code) retryableByDefault() bool {
	switch c {
	case CodeTimeout, CodeCancelled, CodeUnavailable, CodeInternal:
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
	Code    Code
	Message string
	// Fields lists every problem found in the input, for CodeInvalidInput.
	Fields []FieldError
	// Details carries machine-readable facts, such as the digest to confirm
	// for CodeConfirmationRequired. Values must be JSON-encodable.
	Details map[string]any
	// Retryable tells the caller that the same call may succeed later.
	// [Errorf] sets it from the code: timeout, cancelled, unavailable and
	// internal are retryable.
	Retryable bool
	// Err is the cause. It is logged and never sent to callers.
	Err error
}

// Errorf returns an [Error] with the code, a message formatted as by
// [fmt.Sprintf], and Retryable set by the code's default. When an argument
// is an error wrapped with %w, it becomes Err, the logged cause, and is kept
// out of the message sent to callers.
func Errorf(code Code, format string, args ...any) *Error {
	e := &Error{Code: code, Retryable: code.retryableByDefault()}
	if strings.Contains(format, "%w") {
		wrapped := fmt.Errorf(format, args...)
		e.Err = errors.Unwrap(wrapped)
		e.Message = fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), args...)
		return e
	}
	e.Message = fmt.Sprintf(format, args...)
	return e
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
	for i, f := range e.Fields {
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
		if i == len(e.Fields)-1 {
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
	Site string // file:line of the carmy.Tool call that declared the tool
	Err  error
}

// Error names the tool and its declaration site before the problem.
func (e *BuildError) Error() string {
	var b strings.Builder
	b.WriteString("carmy: ")
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
