package carmy

import "fmt"

// Effect classifies what a tool does to the world. It is a required argument
// of [Tool]; the zero value means unset and [Builder.Build] rejects it.
//
// Effect implements [encoding.TextMarshaler] and [encoding.TextUnmarshaler]
// with the names returned by [Effect.String].
type Effect uint8

// The effects, from the harmless to the irreversible.
const (
	// None: the tool computes an answer from its input alone.
	None Effect = iota + 1
	// Read: the tool reads state but changes nothing.
	Read
	// Write: the tool changes state that the host owns.
	Write
	// ExternalWrite: the tool changes state outside the host (sends mail,
	// calls a payment provider); the world it touches is open.
	ExternalWrite
	// Destructive: the tool deletes or irreversibly overwrites state.
	Destructive
)

var effectNames = [...]string{None: "none", Read: "read", Write: "write", ExternalWrite: "external_write", Destructive: "destructive"}

// String returns the effect's name: none, read, write, external_write or
// destructive; an unset or unknown effect is shown as effect(N).
func (e Effect) String() string {
	if e.valid() {
		return effectNames[e]
	}
	return fmt.Sprintf("effect(%d)", uint8(e))
}

func (e Effect) valid() bool { return e >= None && e <= Destructive }

// ReadOnly reports whether the effect changes nothing: [None] or [Read].
func (e Effect) ReadOnly() bool { return e == None || e == Read }

// ParseEffect returns the effect named s, as [Effect.String] spells it.
func ParseEffect(s string) (Effect, error) {
	for e := None; e <= Destructive; e++ {
		if effectNames[e] == s {
			return e, nil
		}
	}
	return 0, fmt.Errorf("carmy: unknown effect %q (want none, read, write, external_write or destructive)", s)
}

// MarshalText implements [encoding.TextMarshaler]. An unset effect is an error.
func (e Effect) MarshalText() ([]byte, error) { return e.AppendText(nil) }

// AppendText implements [encoding.TextAppender], as [Effect.MarshalText]
// does, appending to b: encoders that know it (every audit record holds an
// effect) allocate nothing for it.
func (e Effect) AppendText(b []byte) ([]byte, error) {
	if !e.valid() {
		return nil, fmt.Errorf("carmy: cannot marshal unset or unknown %s", e)
	}
	return append(b, effectNames[e]...), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with [ParseEffect].
func (e *Effect) UnmarshalText(text []byte) error {
	v, err := ParseEffect(string(text))
	if err != nil {
		return err
	}
	*e = v
	return nil
}
