package approve

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

func TestMayDecide(t *testing.T) {
	a := store.Approval{Tool: "delete", Principal: "agent"}
	tests := []struct {
		name string
		who  Who
		want error
	}{
		{"approve:tool", Who{Principal: "alice", Permissions: []string{"approve:delete"}}, nil},
		{"approve:*", Who{Principal: "alice", Permissions: []string{"approve:*"}}, nil},
		{"another tool's right", Who{Principal: "alice", Permissions: []string{"approve:other"}}, ErrNoRight},
		{"no right", Who{Principal: "alice"}, ErrNoRight},
		{"a prefix is not a right", Who{Principal: "alice", Permissions: []string{"approve:"}}, ErrNoRight},
		{"its own call, with approve:*", Who{Principal: "agent", Permissions: []string{"approve:*"}}, ErrOwnCall},
		{"its own call, with approve:tool", Who{Principal: "agent", Permissions: []string{"approve:delete"}}, ErrOwnCall},
		{"the console secret", Who{Console: true}, nil},
		{"the console secret, the anonymous caller's call", Who{Console: true}, nil},
		{"a single-client session's console, its principal's call", Who{Principal: "agent", Console: true, Scoped: true}, nil},
		{"a single-client session's console, another principal's call", Who{Principal: "local", Console: true, Scoped: true}, ErrNoRight},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.who.MayDecide(a); !errors.Is(got, tt.want) {
				t.Fatalf("MayDecide = %v, want %v", got, tt.want)
			}
		})
	}
	anon := store.Approval{Tool: "delete"}
	if err := (Who{}).MayDecide(anon); !errors.Is(err, ErrNoRight) {
		t.Fatalf("the anonymous caller decides its own call: %v", err)
	}
	if err := (Who{Console: true}).MayDecide(anon); err != nil {
		t.Fatalf("the console secret cannot decide the anonymous caller's call: %v", err)
	}
}

func TestMayView(t *testing.T) {
	a := store.Approval{Tool: "delete", Principal: "agent"}
	for _, tt := range []struct {
		who  Who
		want bool
	}{
		{Who{Principal: "agent"}, true},
		{Who{Principal: "other"}, false},
		{Who{Principal: "other", Permissions: []string{"approve:delete"}}, true},
		{Who{Console: true}, true},
		{Who{Principal: "agent", Console: true, Scoped: true}, true},
		{Who{Principal: "local", Console: true, Scoped: true}, false},
	} {
		if got := tt.who.MayView(a); got != tt.want {
			t.Errorf("%+v: MayView = %v, want %v", tt.who, got, tt.want)
		}
	}
	if (Who{Principal: "p", Permissions: []string{"read"}}).DecidesSome() || !(Who{Permissions: []string{"approve:x"}}).DecidesSome() {
		t.Fatal("DecidesSome")
	}
	if (Who{Console: true, Principal: ""}).Name() != "console" || (Who{Principal: "alice"}).Name() != "alice" {
		t.Fatal("Name")
	}
}

// Text shows exact digits and escapes every character that hides or
// disguises text.
func TestText(t *testing.T) {
	tests := []struct {
		name, form, want string
	}{
		{"beyond 2^53", `{"n":9007199254740993}`, "{\n  \"n\": 9007199254740993\n}"},
		{"exact decimals", `{"n":1000000.000000000001}`, "{\n  \"n\": 1000000.000000000001\n}"},
		{"huge exponent", `{"n":1e+400}`, "{\n  \"n\": 1e+400\n}"},
		{"right-to-left override", "{\"p\":\"/srv/backups/\u202egnp.exe\"}", "{\n  \"p\": \"/srv/backups/\\u202egnp.exe\"\n}"},
		{"zero width", "{\"p\":\"a\u200bb\u200dc\ufeff\"}", "{\n  \"p\": \"a\\u200bb\\u200dc\\ufeff\"\n}"},
		{"line and paragraph separators", "{\"p\":\"a\u2028b\u2029c\"}", "{\n  \"p\": \"a\\u2028b\\u2029c\"\n}"},
		{"isolates", "{\"p\":\"\u2066x\u2069\"}", "{\n  \"p\": \"\\u2066x\\u2069\"\n}"},
		{"C1 control", "{\"p\":\"\u0085\"}", "{\n  \"p\": \"\\u0085\"\n}"},
		{"tag characters, as surrogates", "{\"p\":\"\U000e0041\"}", "{\n  \"p\": \"\\udb40\\udc41\"\n}"},
		{"control escaped by the form", `{"p":"a\nb"}`, "{\n  \"p\": \"a\\nb\"\n}"},
		{"plain text unchanged", `{"a":[1,2],"b":"é ü"}`, "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"é ü\"\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Text([]byte(tt.form))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Text = %q\nwant   %q", got, tt.want)
			}
		})
	}
	if _, err := Text([]byte(`{`)); err == nil {
		t.Fatal("Text of malformed JSON: no error")
	}
}

func TestPendingOf(t *testing.T) {
	p := &Pending{ID: "a1", Tool: "delete", Expires: time.Now()}
	if got, ok := PendingOf(fmt.Errorf("wrapped: %w", p)); !ok || got != p {
		t.Fatalf("PendingOf = %v, %v", got, ok)
	}
	if _, ok := PendingOf(errors.New("other")); ok {
		t.Fatal("PendingOf found a pending approval in another error")
	}
}

// Text leaves the form it is given as it was, even when the form has room
// to grow in place: the form is an approval's input, kept and shown again.
func TestTextKeepsItsArgument(t *testing.T) {
	form := make([]byte, 0, 64)
	form = append(form, `{"id":26,"note":"a"}`...)
	want := string(form)
	if _, err := Text(form); err != nil {
		t.Fatal(err)
	}
	if got := string(form); got != want {
		t.Fatalf("Text changed its argument to %q, was %q", got, want)
	}
	if got := string(form[:cap(form)][:len(want)]); got != want {
		t.Fatalf("Text wrote into its argument's array: %q", got)
	}
}
