package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// TestExportAsATask: a client starts the export over HTTP as a task, reads
// its progress while it runs, and collects the CSV once it is done.
func TestExportAsATask(t *testing.T) {
	reg, store := setup(t)
	store.ExportPause = 20 * time.Millisecond
	ctx := context.Background()
	for _, sku := range []string{"A-100", "B,7"} {
		if _, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: sku, Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	get := func(url string, into any) int {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if err := json.NewDecoder(res.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode
	}

	req, _ := http.NewRequest("POST", srv.URL+"/tools/export_orders", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	location := res.Header.Get("Location")
	if res.StatusCode != http.StatusAccepted || location == "" {
		t.Fatalf("POST /tools/export_orders, Prefer: respond-async = %d, Location %q; want 202 and the task", res.StatusCode, location)
	}
	var task struct {
		Status   string `json:"status"`
		Output   Export `json:"output"`
		Progress *struct {
			Done, Total float64
		} `json:"progress"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for task.Status != "completed" {
		if status := get(srv.URL+location+"?wait=10s", &task); status != 200 || time.Now().After(deadline) {
			t.Fatalf("GET %s = %d %+v", location, status, task)
		}
	}
	if task.Output.Orders != 2 || task.Output.CSV != "order_id,sku,quantity,status\n1,A-100,1,placed\n2,\"B,7\",1,placed\n" {
		t.Fatalf("export = %+v", task.Output)
	}
	if task.Progress == nil || task.Progress.Done != 2 || task.Progress.Total != 2 {
		t.Fatalf("progress = %+v; want 2 of 2", task.Progress)
	}
}
