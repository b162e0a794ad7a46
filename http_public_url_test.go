package carmy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

// Builder.PublicURL makes approval links name the address clients use,
// not the Host a proxy rewrote.
func TestPublicURLNamesApprovalLinks(t *testing.T) {
	t.Parallel()
	srv, _, _ := approvalServer(t, carmy.New().PublicURL("https://tools.example.com/"))
	_, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/delete_note", `{"id":7}`)
	link := detail(body, "approval_url")
	if !strings.HasPrefix(link, "https://tools.example.com/console?approval=") {
		t.Fatalf("approval_url = %q; want it under the public URL", link)
	}
	for _, bad := range []string{"tools.example.com", "ftp://tools.example.com", "https://", "https://tools.example.com/?a=b", "https://user:pw@tools.example.com"} {
		if _, err := carmy.New().PublicURL(bad).Build(); err == nil {
			t.Errorf("PublicURL(%q) built", bad)
		}
	}
}
