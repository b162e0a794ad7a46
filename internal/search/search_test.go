package search

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
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

// BenchmarkSearch10k: ranking 10,000 generated tools for a query and
// taking the best 5, the index alone; p50 and p99 are those of the
// searches measured one by one.
func BenchmarkSearch10k(b *testing.B) {
	verbs := []string{"get", "list", "create", "update", "delete", "export", "import", "sync", "archive", "approve", "search", "count", "merge", "assign", "close", "reopen", "tag", "notify", "schedule", "refund"}
	nouns := []string{"order", "invoice", "customer", "ticket", "user", "report", "shipment", "payment", "product", "contract", "lead", "campaign", "subscription", "warehouse", "employee", "project", "task", "document", "calendar", "message", "vendor", "asset", "budget", "claim", "license"}
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"The record's identifier"},"filter":{"type":"string","description":"Words that narrow what is returned"}}}`)
	docs := make([]Doc, 10_000)
	for i := range docs {
		v, o, svc := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)], i/(len(verbs)*len(nouns))
		docs[i] = Doc{
			Name:        fmt.Sprintf("%s_%s_s%d", v, o, svc),
			Description: fmt.Sprintf("%s the %s records of service %d; returns them with their status, owner and history.", v, o, svc),
			InputSchema: schema,
		}
	}
	ix := New(docs)
	queries := []string{"export the invoices of a service", "refund a payment", "who owns this customer record", "close ticket", "status history", "schedule calendar message for employee"}
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		start := time.Now()
		n := 0
		ix.Search(queries[i%len(queries)], func(int) bool { n++; return n < 5 })
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds())/1e3, "p99-µs")
}
