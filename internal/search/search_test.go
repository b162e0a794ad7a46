package search

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"create_order", []string{"create", "order"}},
		{"orders.export-csv", []string{"order", "export", "csv"}},
		{"getHTTPStatus", []string{"get", "http", "status"}},
		{"ListInvoices", []string{"list", "invoice"}},
		{"Cancel the orders of a customer", []string{"cancel", "order", "customer"}},
		{"queries address", []string{"query", "address"}},
		{"", nil},
		{"__--..", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Terms(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("Terms(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSearchRanks(t *testing.T) {
	docs := []Doc{
		{Name: "get_weather", Description: "Current weather for a city."},
		{Name: "cancel_order", Description: "Cancel an order that has not shipped.", InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","description":"The order to cancel"}}}`)},
		{Name: "list_orders", Description: "Orders of a customer, newest first."},
		{Name: "refund_payment", Description: "Give a customer their money back.", InputSchema: json.RawMessage(`{"type":"object","properties":{"invoice":{"$ref":"#/$defs/Inv"}},"$defs":{"Inv":{"type":"object","properties":{"iban":{"type":"string","description":"Bank account"}}}}}`)},
	}
	ix := New(docs)
	names := func(q string, limit int) []string {
		var out []string
		ix.Search(q, func(d int) bool {
			out = append(out, docs[d].Name)
			return len(out) < limit
		})
		return out
	}
	for _, tc := range []struct {
		query string
		limit int
		want  []string
	}{
		{"cancel an order", 10, []string{"cancel_order", "list_orders"}},
		{"weather", 10, []string{"get_weather"}},
		{"IBAN", 10, []string{"refund_payment"}},         // a nested field of $defs
		{"bank account", 10, []string{"refund_payment"}}, // its description
		{"orders", 1, []string{"cancel_order"}},          // the limit stops the search
		{"customer", 10, []string{"list_orders", "refund_payment"}},
		{"the of and", 10, nil},
		{"unicorn", 10, nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			if got := names(tc.query, tc.limit); !slices.Equal(got, tc.want) {
				t.Errorf("Search(%q) = %q, want %q", tc.query, got, tc.want)
			}
		})
	}
}

// A word in the name outranks the same word in another tool's
// description.
func TestSearchNameOutranksProse(t *testing.T) {
	docs := []Doc{
		{Name: "list_users", Description: "Users of the account; an export is separate."},
		{Name: "export_data", Description: "Write the account's data as a file."},
	}
	var got []int
	New(docs).Search("export", func(d int) bool { got = append(got, d); return true })
	if !slices.Equal(got, []int{1, 0}) {
		t.Errorf("export ranks %v, want export_data first", got)
	}
}

// Searches run at the same time on one index each get their own
// scores.
func TestSearchConcurrent(t *testing.T) {
	docs := []Doc{{Name: "alpha_tool"}, {Name: "beta_tool"}, {Name: "alpha_beta"}}
	ix := New(docs)
	done := make(chan []int)
	for range 8 {
		go func() {
			for range 200 {
				var got []int
				ix.Search("alpha", func(d int) bool { got = append(got, d); return true })
				if len(got) != 2 {
					done <- got
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if got := <-done; got != nil {
			t.Errorf("a concurrent search found %v", got)
		}
	}
}
