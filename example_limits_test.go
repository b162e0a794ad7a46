package carmy_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carmy-dev/carmy"
)

type LimitedOrder struct {
	SKU string `json:"sku"`
}

// Each principal may place one order an hour here: the second call of
// alice's is refused with a message her model can act on, and bob's
// first call runs.
func ExampleRateLimit() {
	placeOrder := func(in LimitedOrder) (string, error) { return "placed " + in.SKU, nil }
	reg, err := carmy.New().Tool(
		carmy.Tool(placeOrder, carmy.Write, carmy.Name("place_order"), carmy.ParallelSafe(),
			carmy.RateLimit(1, time.Hour), carmy.Register(false)),
	).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	ctx := context.Background()
	for _, who := range []string{"alice", "alice", "bob"} {
		out, err := carmy.Invoke[string](ctx, reg, "place_order", LimitedOrder{SKU: "A-100"}, carmy.WithPrincipal(who))
		var e *carmy.Error
		if errors.As(err, &e) {
			fmt.Printf("%s: %s (retryable %v)\n%s\n", who, e.Code, e.Retryable, e.Message)
			continue
		}
		fmt.Printf("%s: %s\n", who, out)
	}
	// Output:
	// alice: placed A-100
	// alice: rate_limited (retryable true)
	// place_order is rate limited: this caller may call it once per hour; call place_order again in 3600 s
	// bob: placed A-100
}
