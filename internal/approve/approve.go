// Package approve is carmy's one approval policy and its one rendering:
// who may see an approval, who may decide it, and the text a person is
// shown before deciding. The HTTP API, the console and MCP all ask it, so
// that no door decides differently, and no door shows a person something
// other than what runs.
package approve

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/carmy-dev/carmy/store"
)

// Who is a party to approvals: the caller of the HTTP API or the console.
type Who struct {
	Principal   string
	Permissions []string
	// Console: the request carries the console secret of a server without
	// an authenticator. The secret alone carries the approver's rights
	// there: its holder is the person who started the server, never the
	// agent, which calls as the same anonymous principal.
	Console bool
	// Scoped narrows the console's rights to the approvals of Principal's
	// calls: the console served for the person at one single-client
	// session (stdio), whose calls are all that principal's, sees and
	// decides those alone, whatever else the registry's store holds.
	Scoped bool
}

// Reasons a decision is refused.
var (
	// ErrNoRight: the caller holds neither approve:<tool> nor approve:*.
	ErrNoRight = errors.New("approve: the caller may not decide approvals of this tool")
	// ErrOwnCall: the caller made the call. Whatever it holds, the
	// principal that made a call never decides its approval: an agent
	// whose token carries approve:* (as tokens that carry all of a user's
	// permissions do) could otherwise approve itself.
	ErrOwnCall = errors.New("approve: the principal that made a call never decides its approval")
)

// holds reports whether w holds the right to decide approvals of tool,
// for calls that principal made.
func (w Who) holds(tool, principal string) bool {
	if w.Console {
		return !w.Scoped || principal == w.Principal
	}
	return slices.Contains(w.Permissions, "approve:*") || slices.Contains(w.Permissions, "approve:"+tool)
}

// MayDecide returns nil when w may approve or deny a, else [ErrNoRight] or
// [ErrOwnCall].
func (w Who) MayDecide(a store.Approval) error {
	if !w.holds(a.Tool, a.Principal) {
		return ErrNoRight
	}
	if !w.Console && a.Principal == w.Principal {
		return ErrOwnCall
	}
	return nil
}

// MayView reports whether w may see a: one of a tool it may decide, or
// one of its own calls.
func (w Who) MayView(a store.Approval) bool {
	return w.holds(a.Tool, a.Principal) || a.Principal == w.Principal
}

// MayViewCall reports whether w may see a call of tool made by principal,
// as the console's recent calls list it.
func (w Who) MayViewCall(tool, principal string) bool {
	return w.holds(tool, principal) || principal == w.Principal
}

// DecidesSome reports whether w holds the right to decide approvals of
// some tool.
func (w Who) DecidesSome() bool {
	if w.Console {
		return true
	}
	return slices.ContainsFunc(w.Permissions, func(p string) bool {
		return len(p) > len("approve:") && strings.HasPrefix(p, "approve:")
	})
}

// Name is how a decision names its maker, for the approval and the audit.
func (w Who) Name() string {
	if w.Console {
		return "console"
	}
	return w.Principal
}

// Text is an input as a person is shown it before deciding: its canonical
// form (the document the confirmation digest is over, numbers written as
// their exact digits), indented, with every character that a person would
// not see as itself escaped (see [hides]): \uXXXX for one of the Basic
// Multilingual Plane, \U0010XXXX (eight hex digits) beyond it. Every door
// shows this text, made here, so that what a person approves is what runs.
func Text(form []byte) (string, error) {
	// Indent works in place, within form's capacity: on a copy, so that the
	// caller's form (an approval's input, kept and shown again) stays as it
	// was.
	v := jsontext.Value(bytes.Clone(form))
	if err := v.Indent(jsontext.WithIndent("  ")); err != nil {
		return "", err
	}
	// Valid JSON holds such characters only inside strings, so an escape
	// never changes the document's structure.
	var b strings.Builder
	b.Grow(len(v))
	for _, c := range string(v) {
		switch {
		case c == '\n' || !hides(c):
			b.WriteRune(c)
		case c > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, c)
		default:
			fmt.Fprintf(&b, `\u%04x`, c)
		}
	}
	return b.String(), nil
}

// hides reports a character that a person would not see as itself, or
// could take for another: every default-ignorable code point (variation
// selectors, Hangul fillers, the combining grapheme joiner, tag
// characters, Mongolian free variation selectors and the like); every
// control, format, private-use, surrogate and unassigned code point; and
// every separator but the space U+0020 (line and paragraph separators,
// no-break and other spaces, which look like U+0020 and are not). "prod"
// and "pro\u034fd" look alike; shown with [Text], they do not.
func hides(c rune) bool {
	switch {
	case c == ' ':
		return false
	case c < ' ' || c == 0x7f:
		return true
	case c < 0x80:
		return false
	}
	return unicode.In(c, unicode.C, unicode.Z, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, unicode.Noncharacter_Code_Point) ||
		!unicode.In(c, assigned...)
}

// assigned are the general categories of every assigned code point;
// unicode.C holds Cc, Cf, Co and Cs, not the unassigned Cn.
var assigned = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.C}

// Pending is the pending approval that a confirmation_required refusal
// asks a person for, as a typed value: the refusal carries it as its
// cause, so that a door that can reach a person (MCP elicitation, the
// console) finds it with [PendingOf] rather than by reading the details
// sent to the caller.
type Pending struct {
	ID   string
	Tool string
	// URL is the page where a person decides.
	URL string
	// Digest is the digest of the input, and Permission the grant that
	// confirms that input alone.
	Digest     string
	Permission string
	Expires    time.Time
}

func (p *Pending) Error() string {
	return "approval " + p.ID + " of " + p.Tool + " waits for a person"
}

// PendingOf returns the pending approval err asks for, if any.
func PendingOf(err error) (*Pending, bool) {
	var p *Pending
	if errors.As(err, &p) {
		return p, true
	}
	return nil, false
}
