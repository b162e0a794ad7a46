package carmy_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/carmy-dev/carmy"
)

// A readiness probe asks /readyz: 200 while the host reaches its store
// (the in-memory default always does), 503 once it was out of reach for
// longer than the grace. Liveness asks /livez, which never looks at the
// store.
func ExampleBuilder_HealthGrace() {
	reg, err := carmy.New().HealthGrace(10 * time.Second).Build()
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	for _, path := range []string{"/readyz", "/livez"} {
		w := httptest.NewRecorder()
		reg.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://localhost"+path, nil))
		fmt.Println(path, w.Code, strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// /readyz 200 {"status":"ok","store":"ok"}
	// /livez 200 {"status":"ok"}
}
