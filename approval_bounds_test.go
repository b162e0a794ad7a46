package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/store"
)

// Blob is the input of a tool whose calls carry up to 1 MiB.
type Blob struct {
	Data string `json:"data"`
}

// TestApprovalsBoundedInBytes: 200 refused calls (12 under the race
// detector) with an input of 1 MiB
// each keep at most the principal's bound of bytes: the calls beyond it
// are unavailable, reason "capacity", and record no approval; another
// principal's call still asks for one.
func TestApprovalsBoundedInBytes(t *testing.T) {
	t.Parallel()
	var runs int
	reg, err := carmy.New().Tool(carmy.Tool(func(in Blob) error { runs++; return nil }, carmy.Destructive,
		carmy.Name("store_blob"), carmy.RequireConfirmation(), carmy.Register(false))).Logger(quietLogger()).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	const mib = 1 << 20
	asked, full := 0, 0
	for i := range blobFlood {
		in, _ := json.Marshal(Blob{Data: strings.Repeat(string(rune('a'+i%26)), mib-100) + strings.Repeat("x", i)})
		_, err := reg.Execute(ctx, carmy.Call{Tool: "store_blob", Principal: "mallory", Input: in})
		var e *carmy.Error
		switch {
		case carmy.CodeOf(err) == carmy.CodeConfirmationRequired:
			asked++
		case carmy.CodeOf(err) == carmy.CodeUnavailable && errors.As(err, &e) && e.Details["reason"] == "capacity" && e.Retryable:
			full++
		default:
			t.Fatalf("call %d: %v; want confirmation_required or unavailable for capacity", i, err)
		}
	}
	if want := store.DefaultApprovalBytes / mib; asked != want || full != blobFlood-want {
		t.Fatalf("%d calls asked for an approval, %d were refused for capacity; want %d and %d", asked, full, want, blobFlood-want)
	}
	if _, err := reg.Execute(ctx, carmy.Call{Tool: "store_blob", Principal: "alice", Input: json.RawMessage(`{"data":"x"}`)}); carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
		t.Fatalf("another principal's call: %v; want it to ask for an approval", err)
	}
	if runs != 0 {
		t.Fatalf("the tool ran %d times", runs)
	}
}

// TestApprovalsListPagesSummaries: GET /approvals lists summaries, never
// an input; pages of ?limit= follow one another through the Link header;
// an approval's input comes with it alone, at GET /approvals/{id}.
func TestApprovalsListPagesSummaries(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New())
	var ids []string
	for i := range 5 {
		_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":`+string(rune('1'+i))+`}`)
		ids = append([]string{detail(body, "approval_id")}, ids...)
	}
	var got []string
	next := srv.URL + "/approvals?limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 approvals")
		}
		resp, err := http.Get(next)
		if err != nil {
			t.Fatal(err)
		}
		var list []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || len(list) > 2 {
			t.Fatalf("page %s: %d approvals, %v", next, len(list), err)
		}
		for _, a := range list {
			if _, ok := a["input"]; ok {
				t.Fatalf("the list carries an input: %v", a)
			}
			if _, ok := a["text"]; ok {
				t.Fatalf("the list carries an input's text: %v", a)
			}
			if a["tool"] != "delete_note" || a["status"] != "pending" || a["digest"] == "" {
				t.Fatalf("summary %v; want tool, status and digest", a)
			}
			got = append(got, a["id"].(string))
		}
		next = ""
		if link := resp.Header.Get("Link"); link != "" {
			ref, ok := strings.CutPrefix(strings.TrimSuffix(link, `>; rel="next"`), "<")
			u, err := url.Parse(ref)
			if !ok || err != nil {
				t.Fatalf("Link %q", link)
			}
			next = srv.URL + u.String()
		}
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("pages gave %v; want %v, newest first", got, ids)
	}
	_, one := httpDo(t, http.DefaultClient, "GET", srv.URL+"/approvals/"+ids[0], "")
	a, _ := one.(map[string]any)
	if in, _ := a["input"].(map[string]any); in["id"] != 5.0 || !strings.Contains(a["text"].(string), `"id": 5`) {
		t.Fatalf("GET /approvals/{id} = %v; want its input and text", one)
	}
	if status, _ := httpDo(t, http.DefaultClient, "GET", srv.URL+"/approvals?limit=0", ""); status != 400 {
		t.Fatalf("limit=0: %d; want 400", status)
	}
}
