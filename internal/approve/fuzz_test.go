package approve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// FuzzText shows arbitrary strings. Whatever the string, the text a person
// sees holds no character that hides (a line break of the indentation
// aside), and it means the same value: read back, with its escapes
// undone, it is the string shown.
//
//	go test -run '^$' -fuzz FuzzText -fuzztime 5m ./internal/approve
func FuzzText(f *testing.F) {
	for _, s := range []string{"prod", "pro\u034fd", "\ufe0f", "\U000e0100", "\u180b\u17b4\u115f\u3164\uffa0",
		"\U000e0041\U000e007f", "\u202egnp.exe", "a\u2028b", "\u00a0\u3000", "\ue000\U0010fffd", "\ufdd0\U0010ffff",
		"\u0378", "\x1b[2J", "日本 é 😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		form, err := json.Marshal(map[string]string{"p": s})
		if err != nil {
			t.Skip()
		}
		got, err := Text(form)
		if err != nil {
			t.Fatalf("Text(%q): %v", form, err)
		}
		for _, c := range got {
			if c != '\n' && hides(c) {
				t.Fatalf("Text(%q) = %q shows %U as it is", form, got, c)
			}
		}
		var back map[string]string
		if err := json.Unmarshal([]byte(asJSON(got)), &back); err != nil {
			t.Fatalf("Text(%q) = %q does not read back: %v", form, got, err)
		}
		var want map[string]string
		_ = json.Unmarshal(form, &want) // what json.Marshal made of s (invalid UTF-8 replaced)
		if back["p"] != want["p"] {
			t.Fatalf("Text(%q) = %q reads back as %q, want %q", form, got, back["p"], want["p"])
		}
	})
}

// asJSON writes the \U escapes of a shown text as the surrogate pairs
// JSON has for them; an escaped backslash stays as it is.
func asJSON(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' || i+1 == len(text) {
			b.WriteByte(text[i])
			continue
		}
		if text[i+1] == 'U' && i+10 <= len(text) {
			if n, err := strconv.ParseUint(text[i+2:i+10], 16, 32); err == nil {
				r1, r2 := utf16.EncodeRune(rune(n))
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				i += 9
				continue
			}
		}
		b.WriteString(text[i : i+2])
		i++
	}
	return b.String()
}
