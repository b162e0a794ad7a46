package shape

import "testing"

func TestJoinPath(t *testing.T) {
	tests := []struct{ base, name, want string }{
		{"", "sku", "sku"},
		{"items[2]", "sku", "items[2].sku"},
		{"tags", "a.b", `tags["a.b"]`},
		{"", "with space", `["with space"]`},
		{"x", "1st", `x["1st"]`},
		{"x", "名前", `x["名前"]`},
	}
	for _, tt := range tests {
		if got := JoinPath(tt.base, tt.name); got != tt.want {
			t.Errorf("JoinPath(%q, %q) = %q, want %q", tt.base, tt.name, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"create_order", "cancel_order", "list_orders"}
	tests := []struct{ s, want string }{
		{"create_ordr", "create_order"},
		{"CANCEL_ORDER", "cancel_order"},
		{"list_order", "list_orders"},
		{"refund", ""}, // nothing near enough to be a typo
	}
	for _, tt := range tests {
		if got := Closest(tt.s, names); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}
