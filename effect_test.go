package carmy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

func TestEffectConversionIsIdentity(t *testing.T) {
	t.Parallel()
	if carmy.Effect(carmy.Write) != carmy.Write {
		t.Fatalf("carmy.Effect(carmy.Write) = %v, want %v", carmy.Effect(carmy.Write), carmy.Write)
	}
	var unset carmy.Effect
	for _, e := range []carmy.Effect{carmy.None, carmy.Read, carmy.Write, carmy.ExternalWrite, carmy.Destructive} {
		if e == unset {
			t.Errorf("effect %v equals the zero value; the zero value must mean unset", e)
		}
	}
}

func TestEffectString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		effect carmy.Effect
		want   string
	}{
		{carmy.None, "none"},
		{carmy.Read, "read"},
		{carmy.Write, "write"},
		{carmy.ExternalWrite, "external_write"},
		{carmy.Destructive, "destructive"},
		{0, "effect(0)"},
		{200, "effect(200)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.effect.String(); got != tt.want {
				t.Errorf("Effect(%d).String() = %q, want %q", uint8(tt.effect), got, tt.want)
			}
		})
	}
}

func TestParseEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    carmy.Effect
		wantErr bool
	}{
		{"none", carmy.None, false},
		{"read", carmy.Read, false},
		{"write", carmy.Write, false},
		{"external_write", carmy.ExternalWrite, false},
		{"destructive", carmy.Destructive, false},
		{"", 0, true},
		{"Write", 0, true}, // case-sensitive
		{"external-write", 0, true},
		{"effect(0)", 0, true},
		{" read", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := carmy.ParseEffect(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseEffect(%q) = %v, nil; want an error", tt.in, got)
				}
				if !strings.Contains(err.Error(), "external_write") {
					t.Errorf("ParseEffect(%q) error %q does not list the valid names", tt.in, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseEffect(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
			if back := got.String(); back != tt.in {
				t.Errorf("round trip: ParseEffect(%q).String() = %q", tt.in, back)
			}
		})
	}
}

func TestEffectTextRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range []carmy.Effect{carmy.None, carmy.Read, carmy.Write, carmy.ExternalWrite, carmy.Destructive} {
		t.Run(e.String(), func(t *testing.T) {
			text, err := e.MarshalText()
			if err != nil {
				t.Fatalf("MarshalText: %v", err)
			}
			if string(text) != e.String() {
				t.Errorf("MarshalText = %q, want %q", text, e.String())
			}
			if app, err := e.AppendText([]byte("x:")); err != nil || string(app) != "x:"+e.String() {
				t.Errorf("AppendText = %q, %v; want x:%s", app, err, e.String())
			}
			var back carmy.Effect
			if err := back.UnmarshalText(text); err != nil || back != e {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, e)
			}

			// Through encoding/json, which uses the text methods.
			type holder struct {
				Effect carmy.Effect `json:"effect"`
			}
			b, err := json.Marshal(holder{e})
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if want := `{"effect":"` + e.String() + `"}`; string(b) != want {
				t.Errorf("json.Marshal = %s, want %s", b, want)
			}
			var h holder
			if err := json.Unmarshal(b, &h); err != nil || h.Effect != e {
				t.Errorf("json.Unmarshal(%s) = %v, %v; want %v", b, h.Effect, err, e)
			}
		})
	}
}

func TestEffectTextErrors(t *testing.T) {
	t.Parallel()
	t.Run("marshal unset", func(t *testing.T) {
		if b, err := carmy.Effect(0).MarshalText(); err == nil {
			t.Errorf("Effect(0).MarshalText() = %q, nil; want an error", b)
		}
	})
	t.Run("marshal unknown", func(t *testing.T) {
		if b, err := carmy.Effect(99).MarshalText(); err == nil {
			t.Errorf("Effect(99).MarshalText() = %q, nil; want an error", b)
		}
	})
	t.Run("json marshal unset", func(t *testing.T) {
		if b, err := json.Marshal(struct{ E carmy.Effect }{}); err == nil {
			t.Errorf("json.Marshal of an unset effect = %s, nil; want an error", b)
		}
	})
	for _, in := range []string{"", "WRITE", "delete", "3"} {
		t.Run("unmarshal "+in, func(t *testing.T) {
			e := carmy.Read
			if err := e.UnmarshalText([]byte(in)); err == nil {
				t.Fatalf("UnmarshalText(%q) = nil; want an error", in)
			}
			if e != carmy.Read {
				t.Errorf("a failed UnmarshalText changed the value to %v", e)
			}
		})
	}
}

func TestEffectReadOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		effect carmy.Effect
		want   bool
	}{
		{carmy.None, true},
		{carmy.Read, true},
		{carmy.Write, false},
		{carmy.ExternalWrite, false},
		{carmy.Destructive, false},
		{0, false},
	}
	for _, tt := range tests {
		t.Run(tt.effect.String(), func(t *testing.T) {
			if got := tt.effect.ReadOnly(); got != tt.want {
				t.Errorf("%v.ReadOnly() = %v, want %v", tt.effect, got, tt.want)
			}
		})
	}
}
