package carmy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/carmy-dev/carmy"
)

type DropTable struct {
	Table string `json:"table" validate:"required"`
}

// A tool declared with RequireConfirmation is refused until the host grants
// "confirm:<tool>" or, for one input only, "confirm:<tool>:<digest>". The
// refusal carries the digest, so the host can show the user exactly what
// will run, ask, and grant exactly that.
func ExampleRequireConfirmation() {
	drop := carmy.Tool(func(in DropTable) error { fmt.Println("dropped", in.Table); return nil },
		carmy.Destructive, carmy.Name("drop_table"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, _ := carmy.New().Tool(drop).Build()
	defer reg.Close()
	ctx := context.Background()
	input := []byte(`{"table":"orders"}`)

	_, err := reg.Execute(ctx, carmy.Call{Tool: "drop_table", Input: input})
	var e *carmy.Error
	errors.As(err, &e)
	fmt.Println(e.Code)
	grant := e.Details["permission"].(string) // confirm:drop_table:<digest of this input>

	// The user approved this very call: the host grants it, and only it.
	_, err = reg.Execute(ctx, carmy.Call{Tool: "drop_table", Input: []byte(`{"table":"users"}`), Permissions: []string{grant}})
	fmt.Println(carmy.CodeOf(err))
	_, err = reg.Execute(ctx, carmy.Call{Tool: "drop_table", Input: input, Permissions: []string{grant}})
	fmt.Println(err)
	// Output:
	// confirmation_required
	// confirmation_required
	// dropped orders
	// <nil>
}

// A call with a request id runs once per (principal, tool, request id): a
// retry gets the recorded outcome, marked Replayed, with the original
// execution id. The id must come from the caller, made once per intended
// action and sent again on every retry of it: an id the server made up
// could not recognise a retry.
func ExampleWithRequestID() {
	charges := 0
	charge := carmy.Tool(func(in struct {
		Cents int64 `json:"cents" validate:"min=1"`
	}) (int, error) {
		charges++
		return charges, nil
	}, carmy.ExternalWrite, carmy.Name("charge"), carmy.Register(false))
	reg, _ := carmy.New().Tool(charge).Build()
	defer reg.Close()
	ctx := context.Background()
	in := map[string]int{"cents": 500}

	first, _ := carmy.Invoke[int](ctx, reg, "charge", in, carmy.WithRequestID("order-7-payment"))
	retry, _ := carmy.Invoke[int](ctx, reg, "charge", in, carmy.WithRequestID("order-7-payment"))
	_, err := carmy.Invoke[int](ctx, reg, "charge", map[string]int{"cents": 900}, carmy.WithRequestID("order-7-payment"))
	fmt.Println(first, retry, charges)
	fmt.Println(carmy.CodeOf(err))
	// Output:
	// 1 1 1
	// conflict
}

// Authorize is the host's policy, asked before every execution. Here a
// session without the "write" grant may only use tools that change nothing.
func ExampleBuilder_Authorize() {
	read := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("read_report"), carmy.Register(false))
	write := carmy.Tool(func() error { return nil }, carmy.Write, carmy.Name("edit_report"), carmy.Register(false))
	reg, _ := carmy.New().Tool(read, write).Authorize(func(c carmy.Context, t carmy.ToolMetadata) error {
		if !t.Effect.ReadOnly() && !c.Permissions.Has("write") {
			return errors.New("this session may only read")
		}
		return nil
	}).Build()
	defer reg.Close()
	ctx := context.Background()
	for _, name := range []string{"read_report", "edit_report"} {
		_, err := reg.Execute(ctx, carmy.Call{Tool: name})
		fmt.Printf("%s: %q\n", name, carmy.CodeOf(err))
	}
	// Output:
	// read_report: ""
	// edit_report: "permission_denied"
}

// Logging records one line per call, never the input's values.
func ExampleLogging() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key { // drop what changes from run to run
			case slog.TimeKey, "execution_id", "duration":
				return slog.Attr{}
			}
			return a
		},
	}))
	login := carmy.Tool(func(in struct {
		Password string `json:"password"`
	}) error {
		return nil
	}, carmy.Write, carmy.Name("login"), carmy.Register(false))
	reg, _ := carmy.New().Tool(login).Use(carmy.Logging(logger)).Build()
	defer reg.Close()
	_, _ = reg.Execute(context.Background(), carmy.Call{Tool: "login", Input: []byte(`{"password":"hunter2"}`), Principal: "alice"})
	// Output:
	// level=INFO msg="carmy call" request_id="" tool=login effect=write principal=alice code=ok replayed=false
}
