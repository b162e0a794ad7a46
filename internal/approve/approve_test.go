package approve

import (
	"encoding/json"
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
		{"tag characters, beyond the BMP", "{\"p\":\"\U000e0041\"}", "{\n  \"p\": \"\\U000e0041\"\n}"},
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

// Text escapes every code point that a person would not see as itself,
// each alone between two letters, as "pro\u034fd" hides in "prod".
func TestTextEscapesInvisible(t *testing.T) {
	tests := []struct {
		name string
		c    rune
		want string
	}{
		{"combining grapheme joiner", 0x034F, `\u034f`},
		{"variation selector 16", 0xFE0F, `\ufe0f`},
		{"variation selector 1", 0xFE00, `\ufe00`},
		{"variation selector 17", 0xE0100, `\U000e0100`},
		{"variation selector 256", 0xE01EF, `\U000e01ef`},
		{"Mongolian free variation selector one", 0x180B, `\u180b`},
		{"Mongolian vowel separator", 0x180E, `\u180e`},
		{"Khmer vowel inherent aq", 0x17B4, `\u17b4`},
		{"Khmer vowel inherent aa", 0x17B5, `\u17b5`},
		{"Hangul choseong filler", 0x115F, `\u115f`},
		{"Hangul jungseong filler", 0x1160, `\u1160`},
		{"Hangul filler", 0x3164, `\u3164`},
		{"halfwidth Hangul filler", 0xFFA0, `\uffa0`},
		{"tag space", 0xE0020, `\U000e0020`},
		{"cancel tag", 0xE007F, `\U000e007f`},
		{"soft hyphen", 0x00AD, `\u00ad`},
		{"Arabic letter mark", 0x061C, `\u061c`},
		{"word joiner", 0x2060, `\u2060`},
		{"invisible times", 0x2062, `\u2062`},
		{"zero width non-joiner", 0x200C, `\u200c`},
		{"left-to-right mark", 0x200E, `\u200e`},
		{"shorthand format letter overlap", 0x1BCA0, `\U0001bca0`},
		{"interlinear annotation anchor", 0xFFF9, `\ufff9`},
		{"no-break space", 0x00A0, `\u00a0`},
		{"ideographic space", 0x3000, `\u3000`},
		{"en quad", 0x2000, `\u2000`},
		{"narrow no-break space", 0x202F, `\u202f`},
		{"Ogham space mark", 0x1680, `\u1680`},
		{"line separator", 0x2028, `\u2028`},
		{"delete", 0x7F, `\u007f`},
		{"escape", 0x1B, `\u001b`},
		{"C1 control", 0x9B, `\u009b`},
		{"private use", 0xE000, `\ue000`},
		{"supplementary private use", 0xF0000, `\U000f0000`},
		{"last private use", 0x10FFFD, `\U0010fffd`},
		{"noncharacter", 0xFDD0, `\ufdd0`},
		{"noncharacter at a plane's end", 0x10FFFF, `\U0010ffff`},
		{"unassigned", 0x0378, `\u0378`},
		{"unassigned beyond the BMP", 0x2FFFF, `\U0002ffff`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			form, err := json.Marshal(map[string]string{"p": "pro" + string(tt.c) + "d"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Text(form)
			if err != nil {
				t.Fatal(err)
			}
			if want := "{\n  \"p\": \"pro" + tt.want + "d\"\n}"; got != want {
				t.Fatalf("Text = %q\nwant   %q", got, want)
			}
		})
	}
}

// Text leaves what a person sees as itself as it is: letters of every
// script, marks that show, emoji without selectors, symbols and U+0020.
func TestTextKeepsVisible(t *testing.T) {
	for _, s := range []string{"prod", "é ü ß", "日本語", "Ελληνικά", "עברית", "a\u0301", "😀", "€ ∑ ©", "한국어"} {
		form, _ := json.Marshal(map[string]string{"p": s})
		got, err := Text(form)
		if err != nil {
			t.Fatal(err)
		}
		if want := "{\n  \"p\": \"" + s + "\"\n}"; got != want {
			t.Errorf("Text = %q, want %q", got, want)
		}
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
