package llm_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

type orderArgs struct {
	SKU string `json:"sku"`
}

// A model past its principal's limit is told, in the tool error it reads,
// when to call again; Dispatch and a Dispatcher say the same.
func TestDispatchRateLimited(t *testing.T) {
	reg, err := carmy.New().Logger(slog.New(slog.NewTextHandler(io.Discard, nil))).Tool(
		carmy.Tool(func(in orderArgs) (string, error) { return "ok", nil }, carmy.Write,
			carmy.Name("create_order"), carmy.ParallelSafe(), carmy.RateLimit(1, time.Hour), carmy.Register(false)),
	).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ctx := context.Background()
	d := llm.NewDispatcher(reg)
	dispatch := []func(args string) error{
		func(args string) error {
			_, err := llm.Dispatch(ctx, reg, "create_order", args, carmy.WithPrincipal("alice"))
			return err
		},
		func(args string) error {
			_, err := d.Dispatch(ctx, "create_order", args, carmy.WithPrincipal("alice"))
			return err
		},
	}
	if err := dispatch[0](`{"sku":"A-1"}`); err != nil {
		t.Fatalf("first call = %v", err)
	}
	for i, call := range dispatch {
		for _, args := range []string{`{"sku":"A-1"}`, `{"sku":`} {
			var e *carmy.Error
			if err := call(args); !errors.As(err, &e) || e.Code != carmy.CodeRateLimited || !e.Retryable ||
				!strings.Contains(e.Message, "call create_order again in 3600 s") {
				t.Errorf("dispatch %d of %s past the limit = %v; want rate_limited, telling the model when to call again", i, args, err)
			}
		}
	}
}
